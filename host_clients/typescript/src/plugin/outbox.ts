// Turns that could not reach the daemon's memory wait here, one file each, and are sent in
// commit order (with their advancement key, so a resend is harmless). The host counts a
// commit as done when commitTurn returns, so the turn must be on disk first. This module
// only keeps the files; when to send and what counts as a refusal is commits.ts's policy.
import { randomBytes } from "node:crypto";
import { mkdir, open, readdir, readFile, rename, unlink } from "node:fs/promises";
import { join } from "node:path";

import type { IngestParams } from "../generated/protocol.js";

/** The suffix of a turn set aside: out of the queue, kept for a human. */
export const SET_ASIDE = ".refused";
const UNREADABLE = ".unreadable";

export interface SetAside {
  /** The set-aside file (rename it to end in `.json` to queue the turn again). */
  path: string;
  params: IngestParams;
  error: unknown;
}

export interface DrainResult {
  sent: number;
  setAside: SetAside[];
  /** The error that stopped the drain (the turn it met is still first in line), or null. */
  stopped: unknown;
  /** Files left unreadable and moved out of the queue. */
  unreadable: string[];
}

function missing(err: unknown): boolean {
  return (err as NodeJS.ErrnoException).code === "ENOENT";
}

export class Outbox {
  private lastStamp = 0;
  private seq = 0;

  constructor(readonly dir: string) {}

  /**
   * A name that sorts after every name this process gave before, even within one
   * millisecond or if the clock steps back: the queue's order is the order of put().
   * (Processes sharing the directory are ordered by time only.)
   */
  private nextName(): string {
    const now = Date.now();
    if (now > this.lastStamp) {
      this.lastStamp = now;
      this.seq = 0;
    } else {
      this.seq += 1;
    }
    const stamp = this.lastStamp.toString().padStart(15, "0");
    return `${stamp}-${this.seq.toString().padStart(6, "0")}-${randomBytes(4).toString("hex")}.json`;
  }

  /** Queue one turn durably (fsync, then an atomic rename); returns its file's path. */
  async put(params: IngestParams): Promise<string> {
    const name = this.nextName(); // taken before any await: calls keep their order
    return await this.write(name, params);
  }

  /** Keep a turn the daemon refused, out of the queue (never sent); returns its path. */
  async setAside(params: IngestParams): Promise<string> {
    return await this.write(`${this.nextName()}${SET_ASIDE}`, params);
  }

  private async write(name: string, params: IngestParams): Promise<string> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const tmp = join(this.dir, `.${name}.tmp`);
    const handle = await open(tmp, "wx", 0o600);
    try {
      await handle.writeFile(JSON.stringify(params));
      await handle.sync();
    } finally {
      await handle.close();
    }
    const path = join(this.dir, name);
    await rename(tmp, path);
    return path;
  }

  /** Names of the queued turns, oldest first. */
  async pending(): Promise<string[]> {
    try {
      return (await readdir(this.dir)).filter((n) => n.endsWith(".json") && !n.startsWith(".")).sort();
    } catch (err) {
      if (missing(err)) return [];
      throw err;
    }
  }

  /**
   * Send the queued turns, oldest first, until the queue is empty or a send fails with an
   * error `refused` does not call definitive: that turn stays first in line and the drain
   * stops (the turns behind it must not overtake it). A refused turn is set aside and the
   * drain goes on. The directory is listed again after every turn, so turns queued while
   * it runs are sent by it too. Callers run one drain at a time.
   */
  async drain(send: (params: IngestParams) => Promise<unknown>, refused: (err: unknown) => boolean): Promise<DrainResult> {
    const result: DrainResult = { sent: 0, setAside: [], stopped: null, unreadable: [] };
    for (;;) {
      const [name] = await this.pending();
      if (name === undefined) return result;
      const path = join(this.dir, name);
      let params: IngestParams;
      try {
        params = JSON.parse(await readFile(path, "utf8")) as IngestParams;
      } catch (err) {
        if (missing(err)) continue; // another process sharing the directory sent it
        await this.moveAside(path, UNREADABLE);
        result.unreadable.push(`${path}${UNREADABLE}`);
        continue;
      }
      try {
        await send(params);
      } catch (err) {
        if (!refused(err)) {
          result.stopped = err;
          return result;
        }
        await this.moveAside(path, SET_ASIDE);
        result.setAside.push({ path: `${path}${SET_ASIDE}`, params, error: err });
        continue;
      }
      await unlink(path).catch((err: unknown) => {
        if (!missing(err)) throw err;
      });
      result.sent += 1;
    }
  }

  private async moveAside(path: string, suffix: string): Promise<void> {
    await rename(path, `${path}${suffix}`).catch((err: unknown) => {
      if (!missing(err)) throw err;
    });
  }
}
