// The plugin's one link to the daemon, shared by every engine instance (the host builds an
// engine per turn). It connects lazily, starts the daemon when nothing answers at its
// socket, gives every call a deadline that covers connecting too, and after a failure
// fails fast (no waiting) until its backoff has passed, then tries again: the host never
// stalls on a dead or hung daemon, and the plugin recovers by itself when the daemon is
// back. It says so once per outage; callers stay quiet about failures it has reported.
import { spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync, readFileSync } from "node:fs";
import { dirname } from "node:path";

import { LibravdbClient, type CallOptions } from "../client/client.js";
import { defaultEndpoint, parseEndpoint, formatEndpoint, type Endpoint } from "../client/endpoint.js";
import { ConnectError, LibravdbError, ProtocolError, RpcTimeout, ShuttingDown, TransportError, WrongNamespace } from "../client/errors.js";
import type { MethodName, ParamsOf, ResultOf } from "../generated/protocol.js";
import type { PluginConfig } from "./config.js";
import type { PluginLogger } from "./host-types.js";

/** The daemon is not reachable now; the call was not sent. */
export class DaemonUnavailable extends LibravdbError {
  override name = "DaemonUnavailable";
}

/** Errors after which the connection is not trusted: reconnect after a backoff. */
export function isLinkFailure(err: unknown): boolean {
  return err instanceof TransportError || err instanceof RpcTimeout || err instanceof ProtocolError || err instanceof ShuttingDown || err instanceof DaemonUnavailable;
}

/**
 * A session-scoped call that tolerates a session created under another namespace (the
 * config changed since): on WrongNamespace it runs once more without one, in the
 * session's own namespace.
 */
export async function inOwnNamespace<P extends { namespace?: string | null }, R>(call: (params: P) => Promise<R>, params: P): Promise<R> {
  try {
    return await call(params);
  } catch (err) {
    if (!(err instanceof WrongNamespace) || params.namespace === undefined || params.namespace === null) throw err;
    const { namespace: _ignored, ...own } = params;
    return await call(own as P);
  }
}

const RESPAWN_AFTER_MS = 60_000;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** What the user sets to point the plugin at the daemon it should start. */
const DAEMON_COMMAND_HINT =
  'set the plugin\'s daemonCommand to libravdbd\'s absolute path: openclaw config set plugins.entries.libravdb-memory.config.daemonCommand \'["/path/to/libravdb/.venv/bin/libravdbd"]\' --strict-json';

/** Why starting the daemon failed, said so the user can act on it. */
export function spawnFailure(command: string, err: NodeJS.ErrnoException): string {
  if (err.code === "ENOENT") {
    return command.includes("/") ? `${command} does not exist; ${DAEMON_COMMAND_HINT}` : `${command} not found on PATH; ${DAEMON_COMMAND_HINT}`;
  }
  if (err.code === "EACCES") return `${command} is not executable (${err.message}); ${DAEMON_COMMAND_HINT}`;
  return `cannot start ${command}: ${err.message}`;
}

/** `promise`, or `onLate()` thrown once `ms` have passed (the promise itself runs on). */
function within<T>(promise: Promise<T>, ms: number, onLate: () => Error): Promise<T> {
  if (ms <= 0) return Promise.reject(onLate());
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onLate()), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

export class DaemonLink {
  private client: LibravdbClient | null = null;
  private connecting: Promise<LibravdbClient> | null = null;
  private retryAt = 0;
  private backoffMs: number;
  private down: string | null = null; // the reason, while degraded
  private lastSpawnAt = -Infinity;
  private closedForGood = false;
  private readonly connectListeners: ((client: LibravdbClient) => Promise<void>)[] = [];
  private readonly successListeners: (() => void)[] = [];
  readonly endpoint: Endpoint;

  /**
   * `outageNote` ends the one warning of an outage (what happens to turns meanwhile), so
   * the callers that fail during it need not warn again.
   */
  constructor(
    private readonly cfg: PluginConfig,
    private readonly log: PluginLogger,
    env: NodeJS.ProcessEnv = process.env,
    private readonly outageNote = "",
  ) {
    this.backoffMs = cfg.reconnectInitialMs;
    this.endpoint = parseEndpoint(cfg.endpoint === "auto" ? defaultEndpoint(env) : cfg.endpoint);
  }

  /** True while connected and no call has failed since. */
  get healthy(): boolean {
    return this.client !== null && !this.client.closed && this.down === null;
  }

  /** Why the link is degraded, or null. */
  get degradedReason(): string | null {
    return this.down;
  }

  /**
   * Awaited after every (re)connection, before any call goes out on it: the outbox sends
   * the turns that waited, so the first assemble after an outage already sees them.
   */
  onConnect(listener: (client: LibravdbClient) => Promise<void>): void {
    this.connectListeners.push(listener);
  }

  /**
   * Called (not awaited) after every call the daemon answered with a result: it serves
   * again, so the outbox sends what waits.
   */
  onSuccess(listener: () => void): void {
    this.successListeners.push(listener);
  }

  /**
   * A typed call whose deadline covers everything: waiting for a connection (or a daemon
   * being started), the handshake, and the call. Link failures degrade the link, then
   * rethrow. A caller that gives up while a connection is being made leaves it running:
   * the next call may find it ready.
   */
  async call<M extends MethodName>(method: M, params: ParamsOf<M>, timeoutMs: number, options: Omit<CallOptions, "timeoutMs"> = {}): Promise<ResultOf<M>> {
    const deadline = Date.now() + timeoutMs;
    const client = await within(this.connected(), timeoutMs, () => new DaemonUnavailable(`libravdbd at ${formatEndpoint(this.endpoint)} did not answer ${method} within ${timeoutMs} ms (still connecting)`));
    let result: ResultOf<M>;
    try {
      const left = deadline - Date.now();
      if (left <= 0) throw new RpcTimeout(method, timeoutMs);
      result = await client.call(method, params, { ...options, timeoutMs: left });
    } catch (err) {
      if (isLinkFailure(err)) this.fail(err as Error);
      throw err;
    }
    for (const listener of this.successListeners) listener();
    return result;
  }

  private connected(): Promise<LibravdbClient> {
    if (this.closedForGood) return Promise.reject(new DaemonUnavailable("the plugin has shut down its daemon link"));
    if (this.client && !this.client.closed) return Promise.resolve(this.client);
    if (this.connecting) return this.connecting;
    const now = Date.now();
    if (now < this.retryAt) {
      return Promise.reject(new DaemonUnavailable(`libravdbd unavailable (${this.down ?? "not connected"}); retrying in ${this.retryAt - now} ms`));
    }
    this.connecting = this.open().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  private async open(): Promise<LibravdbClient> {
    let client: LibravdbClient;
    try {
      client = await this.connectOrSpawn();
    } catch (err) {
      this.fail(err as Error);
      throw err instanceof LibravdbError ? err : new DaemonUnavailable(String(err));
    }
    for (const listener of this.connectListeners) {
      try {
        await listener(client);
      } catch (err) {
        this.log.warn(`libravdb: after connecting: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    if (client.closed) {
      const err = new DaemonUnavailable(`libravdbd at ${formatEndpoint(this.endpoint)} closed the connection`);
      this.fail(err);
      throw err;
    }
    this.client = client;
    client.onClose((error) => {
      if (this.client === client && !this.closedForGood) this.fail(error);
    });
    this.backoffMs = this.cfg.reconnectInitialMs;
    this.retryAt = 0;
    if (this.down !== null) this.log.info(`libravdb: daemon back at ${formatEndpoint(this.endpoint)}; memory is on again`);
    this.down = null;
    return client;
  }

  private clientOptions() {
    const authToken = this.cfg.authTokenFile ? readFileSync(this.cfg.authTokenFile, "utf8").trim() : undefined;
    return {
      endpoint: formatEndpoint(this.endpoint),
      connectTimeoutMs: this.cfg.connectTimeoutMs,
      // The client's own default deadline only serves `initialize` (every call here names
      // its deadline): the handshake is part of connecting, so a daemon that accepts the
      // socket but never answers (stopped, hung) costs connectTimeoutMs, not callTimeoutMs.
      timeoutMs: this.cfg.connectTimeoutMs,
      closeOnTimeout: true,
      clientName: "openclaw-libravdb-memory",
      ...(authToken ? { authToken } : {}),
    };
  }

  /** One connection attempt; a handshake that timed out is said as such. */
  private async connectOnce(options: ReturnType<DaemonLink["clientOptions"]>): Promise<LibravdbClient> {
    try {
      return await LibravdbClient.connect(options);
    } catch (err) {
      if (err instanceof RpcTimeout) {
        throw new ConnectError(`libravdbd at ${formatEndpoint(this.endpoint)} accepted the connection but did not answer within ${err.timeoutMs} ms (stopped or hung)`);
      }
      throw err;
    }
  }

  private async connectOrSpawn(): Promise<LibravdbClient> {
    const options = this.clientOptions(); // reads the token file once per attempt
    try {
      return await this.connectOnce(options);
    } catch (err) {
      const recently = Date.now() - this.lastSpawnAt < RESPAWN_AFTER_MS;
      if (!(err instanceof ConnectError) || !this.cfg.spawnDaemon || this.endpoint.kind !== "unix" || recently) throw err;
    }
    // At most one start a minute: a daemon that keeps dying is reported, not restarted in a loop.
    this.lastSpawnAt = Date.now();
    const started = this.spawnDaemon(this.endpoint.path);
    const deadline = Date.now() + this.cfg.spawnTimeoutMs;
    let last: unknown = null;
    while (Date.now() < deadline) {
      const failure = started.failure;
      if (failure !== null) {
        // Another process may have won the race for the store's lock and be serving.
        try {
          return await this.connectOnce(options);
        } catch {
          throw new ConnectError(failure);
        }
      }
      try {
        return await this.connectOnce(options);
      } catch (err) {
        last = err;
        await sleep(100);
      }
    }
    throw new ConnectError(`libravdbd did not answer within ${this.cfg.spawnTimeoutMs} ms of starting: ${String(last)}`);
  }

  /**
   * Start `<daemonCommand> serve --socket PATH`, detached: it outlives this process.
   * `failure` becomes why it could not start (not found, not executable) or why it ended.
   */
  private spawnDaemon(socketPath: string): { failure: string | null } {
    const [cmd, ...pre] = this.cfg.daemonCommand;
    const args = [...pre, "serve", "--socket", socketPath, ...(this.cfg.dataDir ? ["--data-dir", this.cfg.dataDir] : [])];
    let logFd: number | "ignore" = "ignore";
    if (this.cfg.daemonLogFile) {
      mkdirSync(dirname(this.cfg.daemonLogFile), { recursive: true });
      logFd = openSync(this.cfg.daemonLogFile, "a", 0o600);
    }
    const started: { failure: string | null } = { failure: null };
    const child = spawn(cmd as string, args, { detached: true, stdio: ["ignore", "ignore", logFd] });
    // Said once it runs: a command that cannot start gets only the warning saying why.
    child.once("spawn", () => this.log.info(`libravdb: started ${[cmd, ...args].join(" ")} (pid ${child.pid})`));
    child.on("error", (err) => {
      // Nothing ran, so there is no log to read: say what to fix.
      started.failure = spawnFailure(cmd as string, err);
    });
    child.on("exit", (code, signal) => {
      const where = this.cfg.daemonLogFile ? `see ${this.cfg.daemonLogFile}` : "set daemonLogFile to keep its log";
      started.failure ??= `libravdbd exited while starting (${signal ?? `exit code ${code}`}); ${where}`;
    });
    child.unref();
    if (typeof logFd === "number") closeSync(logFd);
    return started;
  }

  private fail(err: Error): void {
    const client = this.client;
    this.client = null;
    if (client && !client.closed) void client.close();
    if (this.closedForGood) return;
    const reason = err.message.split("\n")[0] ?? String(err);
    this.retryAt = Date.now() + this.backoffMs;
    if (this.down === null) {
      this.log.warn(`libravdb: daemon unavailable at ${formatEndpoint(this.endpoint)} (${reason}); turns go on without memory${this.outageNote}, retrying in ${this.backoffMs} ms`);
    }
    this.down = reason;
    this.backoffMs = Math.min(this.backoffMs * 2, this.cfg.reconnectMaxMs);
  }

  async close(): Promise<void> {
    this.closedForGood = true;
    const client = this.client;
    this.client = null;
    if (client) await client.close();
  }
}
