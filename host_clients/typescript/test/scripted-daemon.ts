// A scripted stand-in for libravdbd on a Unix socket, for the error codes the real daemon
// cannot be made to answer on demand (busy, model unavailable, cancelled, an internal
// error, a code this client has no class for). It speaks the same newline-delimited
// JSON-RPC, answers `initialize`, `health` and `assemble` plainly, and answers each
// `ingest` with the next scripted error (then success), recording every ingest it
// received in arrival order. The real daemon covers everything it can produce: the
// PostgreSQL outage and the full disk in outbox-faults.test.ts.
import { createServer, type Server, type Socket } from "node:net";
import { createInterface } from "node:readline";

import type { IngestParams } from "../src/generated/protocol.js";

export interface ScriptedError {
  code: number;
  message: string;
}

export class ScriptedDaemon {
  /** Every ingest the daemon accepted, in arrival order. */
  readonly accepted: IngestParams[] = [];
  /** Every ingest it received, accepted or not, in arrival order. */
  readonly received: IngestParams[] = [];
  private readonly script: ScriptedError[] = [];
  private failing: ScriptedError | null = null;
  private readonly sockets = new Set<Socket>();
  private readonly keys = new Set<string>();

  private constructor(
    private readonly server: Server,
    readonly endpoint: string,
  ) {}

  static async start(socketPath: string): Promise<ScriptedDaemon> {
    const server = createServer();
    const daemon = new ScriptedDaemon(server, `unix:${socketPath}`);
    server.on("connection", (socket) => daemon.serve(socket));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(socketPath, () => resolve());
    });
    return daemon;
  }

  /** The next ingests are answered with these errors, in order (before any failWith). */
  refuseNext(...errors: ScriptedError[]): void {
    this.script.push(...errors);
  }

  /** Answer every ingest with this error until called again with null (an outage). */
  failWith(error: ScriptedError | null): void {
    this.failing = error;
  }

  /** Keys of the accepted turns, in arrival order. */
  acceptedKeys(): string[] {
    return this.accepted.map((p) => p.advancementKey ?? "");
  }

  /** Cut every open connection (the plugin reconnects after its backoff). */
  dropConnections(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  async close(): Promise<void> {
    this.dropConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private serve(socket: Socket): void {
    this.sockets.add(socket);
    socket.on("close", () => this.sockets.delete(socket));
    socket.on("error", () => undefined); // a connection the plugin drops is not a failure
    createInterface({ input: socket }).on("line", (line) => {
      const request = JSON.parse(line) as { id: number; method: string; params?: unknown };
      const reply = this.answer(request.method, request.params);
      if (!socket.destroyed) socket.write(`${JSON.stringify({ jsonrpc: "2.0", id: request.id, ...reply })}\n`);
    });
  }

  private answer(method: string, params: unknown): { result: unknown } | { error: ScriptedError } {
    switch (method) {
      case "initialize":
        return {
          result: {
            protocolVersion: "2.0",
            serverInfo: { name: "scripted", version: "0" },
            capabilities: {},
            methods: ["initialize", "health", "assemble", "ingest"],
          },
        };
      case "health":
        return { result: { ok: true, message: "" } };
      case "assemble":
        return { result: { messages: [], systemPromptAddition: "", estimatedTokens: 0, budget: {}, selected: [] } };
      case "ingest":
        return this.ingest(params as IngestParams);
      default:
        return { error: { code: -32601, message: `unknown method: ${method}` } };
    }
  }

  private ingest(params: IngestParams): { result: unknown } | { error: ScriptedError } {
    this.received.push(params);
    const error = this.script.shift() ?? this.failing;
    if (error) return { error };
    const key = params.advancementKey ?? "";
    const duplicate = key !== "" && this.keys.has(key);
    if (!duplicate) {
      this.keys.add(key);
      this.accepted.push(params);
    }
    const n = duplicate ? 0 : params.messages.length;
    return { result: { ingested: n, skipped: params.messages.length - n, ids: params.messages.map(() => ""), ...(key ? { duplicate } : {}) } };
  }
}
