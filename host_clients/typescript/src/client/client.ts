// A JSON-RPC 2.0 client of libravdbd over one connection: request ids, many calls in
// flight (the daemon answers one connection's requests in order), a deadline per call,
// cancellation by AbortSignal, and `$/progress` notifications routed to their call.
import { ConnectionClosed, CallAborted, ProtocolError, RpcTimeout, rpcError, type LibravdbError } from "./errors.js";
import { defaultEndpoint, parseEndpoint, type Endpoint } from "./endpoint.js";
import { LineSplitter, encodeFrame } from "./framing.js";
import { openPipe, type Pipe, type SpawnOptions } from "./transport.js";
import type {
  AssembleParams,
  AssembleResult,
  CompactParams,
  CompactResult,
  ExpandParams,
  ExpandResult,
  ForgetParams,
  ForgetResult,
  HealthResult,
  IngestParams,
  IngestResult,
  InitializeResult,
  MemoryGetParams,
  MemoryGetResult,
  MemoryListParams,
  MemoryListResult,
  MemoryStatsParams,
  MemoryStatsResult,
  MemoryUpdateParams,
  MemoryUpdateResult,
  MethodName,
  ParamsOf,
  ProgressParams,
  ResultOf,
  SearchParams,
  SessionsListParams,
  SessionsListResult,
  AssembleSearchResult,
  StatusResult,
} from "../generated/protocol.js";

export const PROTOCOL_VERSION = "2.0";
export const CLIENT_NAME = "libravdb-ts";
export const CLIENT_VERSION = "0.2.0";
const DEFAULT_MAX_FRAME = 64 * 1024 * 1024;

export interface ClientOptions {
  /** `unix:/path`, `tcp:host:port` or `stdio` (spawn the daemon); default: defaultEndpoint(). */
  endpoint?: string;
  /** Deadline of every call unless the call names its own; default 30 s. */
  timeoutMs?: number;
  connectTimeoutMs?: number;
  /** The daemon's shared secret (server.auth_token_file), sent in `initialize`. */
  authToken?: string;
  clientName?: string;
  clientVersion?: string;
  /** How to start the daemon for the `stdio` endpoint. */
  spawn?: SpawnOptions;
  maxFrameBytes?: number;
  /**
   * Close the connection when a call times out. The daemon serves one connection's
   * requests in order, so after a stuck call every later call on it waits too; a host
   * that must not stall sets this and reconnects.
   */
  closeOnTimeout?: boolean;
}

export interface CallOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
  onProgress?: (progress: ProgressParams) => void;
}

interface Pending {
  method: string;
  resolve: (value: unknown) => void;
  reject: (error: LibravdbError) => void;
  onProgress: ((progress: ProgressParams) => void) | undefined;
  cleanup: () => void;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export class LibravdbClient {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private closedError: LibravdbError | null = null;
  private readonly closeListeners: ((error: LibravdbError) => void)[] = [];
  private readonly timeoutMs: number;
  private readonly closeOnTimeout: boolean;
  /** What `initialize` answered. */
  server: InitializeResult | null = null;

  private constructor(
    private readonly pipe: Pipe,
    options: ClientOptions,
  ) {
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.closeOnTimeout = options.closeOnTimeout ?? false;
    const splitter = new LineSplitter(options.maxFrameBytes ?? DEFAULT_MAX_FRAME);
    pipe.onData((chunk) => {
      let lines: string[];
      try {
        lines = splitter.push(chunk);
      } catch (err) {
        this.fail(new ProtocolError((err as Error).message));
        return;
      }
      for (const line of lines) if (line.trim()) this.receive(line);
    });
    pipe.onClose((reason) => this.fail(new ConnectionClosed(`${pipe.description}: ${reason}`)));
  }

  /** Connect (or spawn) and run `initialize`. */
  static async connect(options: ClientOptions = {}): Promise<LibravdbClient> {
    const endpoint: Endpoint = parseEndpoint(options.endpoint ?? defaultEndpoint());
    const pipe = await openPipe(endpoint, options.connectTimeoutMs ?? 5_000, options.spawn);
    const client = new LibravdbClient(pipe, options);
    try {
      client.server = await client.call("initialize", {
        clientInfo: { name: options.clientName ?? CLIENT_NAME, version: options.clientVersion ?? CLIENT_VERSION },
        protocolVersion: PROTOCOL_VERSION,
        ...(options.authToken ? { authToken: options.authToken } : {}),
      });
    } catch (err) {
      await client.close();
      throw err;
    }
    return client;
  }

  get closed(): boolean {
    return this.closedError !== null;
  }

  get description(): string {
    return this.pipe.description;
  }

  /** Called once when the connection ends (close, daemon exit, protocol error). */
  onClose(listener: (error: LibravdbError) => void): void {
    if (this.closedError) listener(this.closedError);
    else this.closeListeners.push(listener);
  }

  /** A typed call: params and result types come from the daemon's JSON Schema. */
  call<M extends MethodName>(method: M, params: ParamsOf<M>, options: CallOptions = {}): Promise<ResultOf<M>> {
    return this.request(method, params, options) as Promise<ResultOf<M>>;
  }

  /** An untyped call, for methods newer than this client. */
  request(method: string, params: unknown, options: CallOptions = {}): Promise<unknown> {
    if (this.closedError) return Promise.reject(new ConnectionClosed(this.closedError.message));
    if (options.signal?.aborted) return Promise.reject(new CallAborted(method));
    const id = this.nextId++;
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        this.pending.get(id)?.cleanup();
        reject(new CallAborted(method));
      };
      const timer = setTimeout(() => {
        this.pending.get(id)?.cleanup();
        reject(new RpcTimeout(method, timeoutMs));
        if (this.closeOnTimeout) void this.close();
      }, timeoutMs);
      const cleanup = (): void => {
        clearTimeout(timer);
        options.signal?.removeEventListener("abort", onAbort);
        this.pending.delete(id);
      };
      options.signal?.addEventListener("abort", onAbort, { once: true });
      this.pending.set(id, { method, resolve, reject, onProgress: options.onProgress, cleanup });
      const frame: Record<string, unknown> = { jsonrpc: "2.0", id, method };
      if (params !== undefined) frame["params"] = params;
      try {
        this.pipe.write(encodeFrame(frame));
      } catch (err) {
        cleanup();
        reject(new ConnectionClosed(`${method}: ${(err as Error).message}`));
      }
    });
  }

  private receive(line: string): void {
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      this.fail(new ProtocolError(`the daemon sent a line that is not JSON: ${line.slice(0, 120)}`));
      return;
    }
    if (!isObject(message)) {
      this.fail(new ProtocolError(`the daemon sent a JSON value that is not an object: ${line.slice(0, 120)}`));
      return;
    }
    if (message["method"] === "$/progress") {
      const params = message["params"];
      if (isObject(params) && typeof params["token"] === "number") {
        this.pending.get(params["token"])?.onProgress?.(params as unknown as ProgressParams);
      }
      return;
    }
    const id = message["id"];
    if (typeof id !== "number") {
      const error = message["error"];
      const detail = isObject(error) ? String(error["message"]) : line.slice(0, 120);
      // Only a request this client never sends gets an id-less reply; nothing can be
      // matched after it, so the connection is retired.
      this.fail(new ProtocolError(`the daemon sent a reply without a request id: ${detail}`));
      return;
    }
    const call = this.pending.get(id);
    if (!call) return; // timed out or aborted already
    call.cleanup();
    if ("error" in message) {
      const error = message["error"];
      if (!isObject(error) || typeof error["code"] !== "number" || typeof error["message"] !== "string") {
        call.reject(new ProtocolError(`${call.method}: malformed error object`));
        return;
      }
      call.reject(rpcError(error["code"], error["message"], error["data"]));
      return;
    }
    if (!("result" in message)) {
      call.reject(new ProtocolError(`${call.method}: reply has neither result nor error`));
      return;
    }
    call.resolve(message["result"]);
  }

  private fail(error: LibravdbError): void {
    if (this.closedError) return;
    this.closedError = error;
    for (const call of [...this.pending.values()]) {
      call.cleanup();
      call.reject(error instanceof ConnectionClosed ? error : new ConnectionClosed(error.message));
    }
    for (const listener of this.closeListeners.splice(0)) listener(error);
    void this.pipe.close();
  }

  async close(): Promise<void> {
    this.fail(new ConnectionClosed(`${this.pipe.description}: closed by the client`));
    await this.pipe.close();
  }

  // Typed helpers for the methods hosts use most; everything else goes through call().
  health(options?: CallOptions): Promise<HealthResult> {
    return this.call("health", {}, options);
  }
  status(options?: CallOptions): Promise<StatusResult> {
    return this.call("status", {}, options);
  }
  ingest(params: IngestParams, options?: CallOptions): Promise<IngestResult> {
    return this.call("ingest", params, options);
  }
  assemble(params: AssembleParams, options?: CallOptions): Promise<AssembleResult> {
    return this.call("assemble", params, options);
  }
  search(params: SearchParams, options?: CallOptions): Promise<AssembleSearchResult> {
    return this.call("search", params, options);
  }
  compact(params: CompactParams, options?: CallOptions): Promise<CompactResult> {
    return this.call("compact", params, options);
  }
  expand(params: ExpandParams, options?: CallOptions): Promise<ExpandResult> {
    return this.call("expand", params, options);
  }
  forget(params: ForgetParams, options?: CallOptions): Promise<ForgetResult> {
    return this.call("forget", params, options);
  }
  memoryGet(params: MemoryGetParams, options?: CallOptions): Promise<MemoryGetResult> {
    return this.call("memory.get", params, options);
  }
  memoryList(params: MemoryListParams, options?: CallOptions): Promise<MemoryListResult> {
    return this.call("memory.list", params, options);
  }
  memoryUpdate(params: MemoryUpdateParams, options?: CallOptions): Promise<MemoryUpdateResult> {
    return this.call("memory.update", params, options);
  }
  memoryStats(params: MemoryStatsParams = {}, options?: CallOptions): Promise<MemoryStatsResult> {
    return this.call("memory.stats", params, options);
  }
  sessionsList(params: SessionsListParams, options?: CallOptions): Promise<SessionsListResult> {
    return this.call("sessions.list", params, options);
  }
}
