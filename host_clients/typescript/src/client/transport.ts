// Byte pipes to the daemon: a Unix socket, a loopback TCP socket, or the stdin/stdout of
// a `libravdbd serve --stdio` child. The client above sees only `Pipe`.
import { spawn, type ChildProcess } from "node:child_process";
import { connect as netConnect, type Socket } from "node:net";

import { ConnectError } from "./errors.js";
import { formatEndpoint, type Endpoint } from "./endpoint.js";

export interface Pipe {
  write(data: string): void;
  onData(handler: (chunk: Buffer) => void): void;
  /** Called once, when the pipe ends for any reason. */
  onClose(handler: (reason: string) => void): void;
  close(): Promise<void>;
  readonly description: string;
}

export interface SpawnOptions {
  /** The daemon command; default `["libravdbd"]` (on PATH). `serve --stdio` is appended. */
  command?: readonly string[];
  /** Extra arguments after `serve --stdio`. */
  args?: readonly string[];
  dataDir?: string;
  env?: NodeJS.ProcessEnv;
  /** Where the daemon's JSON logs go: inherited stderr, or dropped (default). */
  stderr?: "inherit" | "ignore";
}

/** The close bookkeeping both pipes share: handlers run once, late ones at once. */
abstract class ClosingPipe {
  private closeHandlers: ((reason: string) => void)[] = [];
  protected closedReason: string | null = null;

  protected finish(reason: string): void {
    if (this.closedReason !== null) return;
    this.closedReason = reason;
    this.onFinish();
    for (const h of this.closeHandlers) h(reason);
  }

  protected onFinish(): void {}

  onClose(handler: (reason: string) => void): void {
    if (this.closedReason !== null) handler(this.closedReason);
    else this.closeHandlers.push(handler);
  }
}

class SocketPipe extends ClosingPipe implements Pipe {
  constructor(
    private readonly socket: Socket,
    readonly description: string,
  ) {
    super();
    socket.on("error", (err) => this.finish(err.message));
    socket.on("close", () => this.finish("connection closed"));
    socket.on("end", () => this.finish("connection closed by the daemon"));
    // An idle connection must not keep the host process alive (one-shot CLI runs exit
    // when their work is done); a call in flight holds its own timer.
    socket.unref();
  }

  protected override onFinish(): void {
    this.socket.destroy();
  }

  write(data: string): void {
    this.socket.write(data);
  }
  onData(handler: (chunk: Buffer) => void): void {
    this.socket.on("data", handler);
  }
  async close(): Promise<void> {
    this.finish("closed by the client");
  }
}

function openSocket(endpoint: Endpoint & { kind: "unix" | "tcp" }, timeoutMs: number): Promise<Pipe> {
  const description = formatEndpoint(endpoint);
  return new Promise((resolve, reject) => {
    const socket =
      endpoint.kind === "unix" ? netConnect({ path: endpoint.path }) : netConnect({ host: endpoint.host, port: endpoint.port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new ConnectError(`connecting to ${description} timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once("connect", () => {
      clearTimeout(timer);
      socket.removeAllListeners("error");
      socket.setNoDelay(true);
      resolve(new SocketPipe(socket, description));
    });
    socket.once("error", (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      const hint =
        err.code === "ENOENT" || err.code === "ECONNREFUSED"
          ? " (is libravdbd running? start it with `libravdbd serve`)"
          : "";
      reject(new ConnectError(`cannot connect to ${description}: ${err.message}${hint}`));
    });
  });
}

class ChildPipe extends ClosingPipe implements Pipe {
  constructor(
    private readonly child: ChildProcess,
    readonly description: string,
  ) {
    super();
    child.on("exit", (code, signal) => this.finish(`daemon exited (${signal ?? `code ${code}`})`));
    child.on("error", (err) => this.finish(err.message));
    child.stdin?.on("error", () => undefined); // EPIPE after exit: reported by "exit"
  }

  write(data: string): void {
    this.child.stdin?.write(data);
  }
  onData(handler: (chunk: Buffer) => void): void {
    this.child.stdout?.on("data", handler);
  }
  async close(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once("exit", () => resolve()));
    this.child.stdin?.end(); // EOF on stdin: the daemon drains and exits 0
    const timer = setTimeout(() => this.child.kill("SIGKILL"), 15_000);
    await exited;
    clearTimeout(timer);
  }
}

function spawnDaemon(options: SpawnOptions): Promise<Pipe> {
  const [cmd, ...pre] = options.command?.length ? options.command : ["libravdbd"];
  const argv = [...pre, "serve", "--stdio", ...(options.dataDir ? ["--data-dir", options.dataDir] : []), ...(options.args ?? [])];
  return new Promise((resolve, reject) => {
    const child = spawn(cmd as string, argv, {
      stdio: ["pipe", "pipe", options.stderr ?? "ignore"],
      env: options.env ?? process.env,
    });
    child.once("error", (err) => reject(new ConnectError(`cannot start ${cmd}: ${err.message}`)));
    child.once("spawn", () => resolve(new ChildPipe(child, `stdio:${[cmd, ...argv].join(" ")}`)));
  });
}

export function openPipe(endpoint: Endpoint, connectTimeoutMs: number, spawnOptions: SpawnOptions = {}): Promise<Pipe> {
  return endpoint.kind === "stdio" ? spawnDaemon(spawnOptions) : openSocket(endpoint, connectTimeoutMs);
}
