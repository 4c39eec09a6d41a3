// Turns committed while the daemon was unreachable wait here, one file each, and are sent
// (in order, with their advancement key, so a resend is harmless) once it is back. The
// host counts a commit as done when commitTurn returns, so the turn must be on disk first.
import { randomBytes } from "node:crypto";
import { mkdir, open, readdir, readFile, rename, unlink } from "node:fs/promises";
import { join } from "node:path";

import type { IngestParams } from "../generated/protocol.js";

export class Outbox {
  private draining: Promise<number> | null = null;

  constructor(readonly dir: string) {}

  /** Write one pending commit durably (fsync, then an atomic rename). */
  async put(params: IngestParams): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const name = `${Date.now().toString().padStart(15, "0")}-${randomBytes(6).toString("hex")}.json`;
    const tmp = join(this.dir, `.${name}.tmp`);
    const handle = await open(tmp, "wx", 0o600);
    try {
      await handle.writeFile(JSON.stringify(params));
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, join(this.dir, name));
  }

  async pending(): Promise<string[]> {
    try {
      return (await readdir(this.dir)).filter((n) => n.endsWith(".json") && !n.startsWith(".")).sort();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
      throw err;
    }
  }

  /**
   * Send every pending commit, oldest first; stop at the first failure (it stays for the
   * next drain). Returns how many were sent. One drain runs at a time.
   */
  drain(send: (params: IngestParams) => Promise<void>, refused: (err: unknown) => boolean = () => false): Promise<number> {
    if (!this.draining) {
      this.draining = this.drainOnce(send, refused).finally(() => {
        this.draining = null;
      });
    }
    return this.draining;
  }

  private async drainOnce(send: (params: IngestParams) => Promise<void>, refused: (err: unknown) => boolean): Promise<number> {
    let sent = 0;
    for (const name of await this.pending()) {
      const path = join(this.dir, name);
      let params: IngestParams;
      try {
        params = JSON.parse(await readFile(path, "utf8")) as IngestParams;
      } catch {
        await rename(path, `${path}.unreadable`); // kept for a human, out of the queue
        continue;
      }
      try {
        await send(params);
      } catch (err) {
        // The daemon answered and said no (bad input): retrying cannot help, and the
        // turns behind it must not wait forever. The file stays, renamed, for a human.
        if (!refused(err)) throw err;
        await rename(path, `${path}.refused`);
        continue;
      }
      await unlink(path);
      sent += 1;
    }
    return sent;
  }
}
