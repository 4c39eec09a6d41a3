// Test support: the real Python daemon, started from the repository's virtualenv.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import type { PluginLogger } from "../src/plugin/host-types.js";

const here = dirname(fileURLToPath(import.meta.url)); // build/test
export const PACKAGE_DIR = resolve(here, "..", "..");
export const REPO = resolve(PACKAGE_DIR, "..", "..");

/** `LIBRAVDBD_COMMAND` (a JSON argv), else the repository's `python -m sidecar`. */
export function daemonCommand(): string[] {
  const configured = process.env["LIBRAVDBD_COMMAND"];
  if (configured) return JSON.parse(configured) as string[];
  return [join(REPO, ".venv", "bin", "python"), "-m", "sidecar"];
}

export function tempDir(prefix = "lvdb-ts-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface Daemon {
  endpoint: string;
  proc: ChildProcess;
  dir: string;
  stderr: string[];
  stop(): Promise<void>;
  kill(): Promise<void>;
}

export interface DaemonOptions {
  transport?: "unix" | "tcp";
  dir?: string;
  /** Unix socket path (default <dir>/d.sock). */
  socket?: string;
  env?: Record<string, string>;
}

function exited(proc: ChildProcess): Promise<void> {
  return proc.exitCode !== null || proc.signalCode !== null ? Promise.resolve() : new Promise((r) => proc.once("exit", () => r()));
}

/** Start `libravdbd serve` on a unix socket or loopback TCP and wait for its endpoint line. */
export async function startDaemon(options: DaemonOptions = {}): Promise<Daemon> {
  const dir = options.dir ?? tempDir();
  const [cmd, ...pre] = daemonCommand();
  const where = options.transport === "tcp" ? ["--tcp", "127.0.0.1:0"] : ["--socket", options.socket ?? join(dir, "d.sock")];
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: join(dir, "home"), PYTHONUNBUFFERED: "1", ...options.env };
  for (const key of Object.keys(env)) if (key.startsWith("LIBRAVDB_") && !(options.env && key in options.env)) delete env[key];
  const proc = spawn(cmd as string, [...pre, "serve", ...where, "--data-dir", join(dir, "data")], { cwd: REPO, env, stdio: ["ignore", "pipe", "pipe"] });
  const stderr: string[] = [];
  createInterface({ input: proc.stderr! }).on("line", (l) => stderr.push(l));
  const endpoint = await new Promise<string>((resolveLine, reject) => {
    const timer = setTimeout(() => reject(new Error(`daemon did not start: ${stderr.slice(-5).join("\n")}`)), 60_000);
    createInterface({ input: proc.stdout! }).once("line", (line) => {
      clearTimeout(timer);
      resolveLine(line.trim());
    });
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`daemon exited (${code}): ${stderr.slice(-5).join("\n")}`));
    });
  });
  return {
    endpoint,
    proc,
    dir,
    stderr,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
      await exited(proc);
    },
    async kill() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
      await exited(proc);
    },
  };
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/** A logger that keeps what it is told. */
export class RecordingLogger implements PluginLogger {
  readonly lines: { level: string; message: string }[] = [];
  info(message: string): void {
    this.lines.push({ level: "info", message });
  }
  warn(message: string): void {
    this.lines.push({ level: "warn", message });
  }
  error(message: string): void {
    this.lines.push({ level: "error", message });
  }
  count(level: string, pattern: RegExp): number {
    return this.lines.filter((l) => l.level === level && pattern.test(l.message)).length;
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Poll `check` until it is true or `timeoutMs` passes. */
export async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}
