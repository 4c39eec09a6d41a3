// The real daemon loses its storage while the link stays up: PostgreSQL stops, or the
// disk under the SQLite store fills. Turns committed meanwhile are answered "committed",
// wait in the outbox, and reach memory by themselves once storage is back, in commit
// order, without a reconnection, and never overtaken by a turn committed later.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, openSync, closeSync, readdirSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { LibravdbClient } from "../src/client/client.js";
import type { AgentMessage } from "../src/plugin/host-types.js";
import { closeAll, engine, register, type Registered } from "./host.js";
import { PgServer } from "./pg.js";
import { removeDir, startDaemon, tempDir, waitFor } from "./support.js";

const KEY = "agent:main:main";
const SESSION = "outage-1";

function turn(label: string, padding = ""): AgentMessage[] {
  return [
    { role: "user", content: `${label}: I keep a journal about glaciers and lanterns.${padding}`, timestamp: 1_000 },
    { role: "assistant", content: `Noted ${label}.`, timestamp: 1_001 },
  ];
}

async function commit(reg: Registered, label: string, padding = ""): Promise<string> {
  const out = await (await engine(reg)).commitTurn({ advancementKey: label, sessionId: SESSION, sessionKey: KEY, messages: turn(label, padding) });
  return out.status;
}

/** The labels of the session's user turns as the daemon stored them, in arrival order. */
async function storedLabels(client: LibravdbClient): Promise<string[]> {
  const out = await client.call("memory.list", { sessionId: SESSION, scope: "history", limit: 500 });
  return out.records
    .filter((r) => r.role === "user")
    .sort((a, b) => Number(a.metadata["seq"]) - Number(b.metadata["seq"]))
    .map((r) => r.text.split(":")[0] ?? "");
}

/** Wait (bounded) until the daemon holds as many user turns as `expected`. */
async function arrived(reader: LibravdbClient, expected: string[], outbox: string): Promise<void> {
  try {
    await waitFor(async () => (await storedLabels(reader)).length >= expected.length, 30_000, "the committed turns to reach memory");
  } catch (err) {
    const stored = await storedLabels(reader);
    throw new Error(`${(err as Error).message}: stored ${JSON.stringify(stored)}, committed ${JSON.stringify(expected)}, still parked ${parked(outbox).length}`);
  }
}

const parked = (dir: string): string[] => (existsSync(dir) ? readdirSync(dir).filter((n) => n.endsWith(".json")) : []);
const setAside = (dir: string): string[] => (existsSync(dir) ? readdirSync(dir).filter((n) => n.endsWith(".refused")) : []);

/** The link never went down: the parked turns were sent without a reconnection. */
function assertNoReconnect(reg: Registered): void {
  assert.equal(reg.log.count("warn", /daemon unavailable/), 0, JSON.stringify(reg.log.lines));
  assert.equal(reg.log.count("info", /daemon back/), 0);
}

test("PostgreSQL stops: committed turns wait in the outbox and reach memory in order once it is back", async (t) => {
  const pg = await PgServer.start();
  const dir = tempDir();
  const daemon = await startDaemon({ dir, env: { LIBRAVDB_STORE_URL: pg.url } });
  const outbox = join(dir, "outbox");
  const reg = register({ endpoint: daemon.endpoint, spawnDaemon: false, outboxDir: outbox, callTimeoutMs: 10_000, reconnectInitialMs: 200, reconnectMaxMs: 1_000 });
  const reader = await LibravdbClient.connect({ endpoint: daemon.endpoint, timeoutMs: 10_000 });
  try {
    assert.equal(await commit(reg, "T0"), "committed");
    assert.deepEqual(await storedLabels(reader), ["T0"]);

    await pg.stop();
    const down = Date.now();
    assert.equal(await commit(reg, "T1"), "committed");
    assert.equal(await commit(reg, "T2"), "committed");
    assert.equal(parked(outbox).length, 2, "the turns were not parked");
    t.diagnostic(`two commits answered in ${Date.now() - down} ms while PostgreSQL was down`);
    assert.ok(reg.log.count("warn", /kept in|still queued/) >= 1, JSON.stringify(reg.log.lines));

    await pg.start();
    const back = Date.now();
    // No call through the plugin: its retry timer alone must send them.
    await arrived(reader, ["T0", "T1", "T2"], outbox);
    t.diagnostic(`the parked turns reached memory ${Date.now() - back} ms after PostgreSQL came back`);
    assert.deepEqual(await storedLabels(reader), ["T0", "T1", "T2"]);
    await waitFor(() => parked(outbox).length === 0, 5_000, "the outbox to empty");
    assert.deepEqual(setAside(outbox), []);
    assert.equal(await commit(reg, "T3"), "committed");
    assert.deepEqual(await storedLabels(reader), ["T0", "T1", "T2", "T3"]);
    assertNoReconnect(reg);
  } finally {
    await reader.close();
    await closeAll();
    await daemon.stop();
    await pg.close();
    removeDir(dir);
  }
});

/** Whether this process may mount a tmpfs (root, with mount(8)); the reason when not. */
function cannotMount(probe: string): string | null {
  if (process.getuid?.() !== 0) return "needs root to mount a small tmpfs";
  mkdirSync(probe, { recursive: true });
  const mounted = spawnSync("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", probe], { encoding: "utf8" });
  if (mounted.status !== 0) return `mount -t tmpfs failed: ${(mounted.stderr || String(mounted.error)).trim()}`;
  execFileSync("umount", [probe]);
  return null;
}

/** Write zeros to `path` until the filesystem has no room left. */
function fill(path: string): void {
  const fd = openSync(path, "w");
  const block = Buffer.alloc(64 * 1024);
  try {
    for (;;) writeSync(fd, block);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
  } finally {
    closeSync(fd);
  }
}

test("the disk under the store fills: committed turns wait and arrive in order once space is back", async (t) => {
  const dir = tempDir();
  const reason = cannotMount(join(dir, "probe"));
  if (reason) {
    removeDir(dir);
    t.skip(reason);
    return;
  }
  const data = join(dir, "data");
  mkdirSync(data);
  execFileSync("mount", ["-t", "tmpfs", "-o", "size=16m", "tmpfs", data]);
  const outbox = join(dir, "outbox");
  let daemon: Awaited<ReturnType<typeof startDaemon>> | null = null;
  let reader: LibravdbClient | null = null;
  try {
    daemon = await startDaemon({ dir });
    reader = await LibravdbClient.connect({ endpoint: daemon.endpoint, timeoutMs: 10_000 });
    const reg = register({ endpoint: daemon.endpoint, spawnDaemon: false, outboxDir: outbox, callTimeoutMs: 10_000, reconnectInitialMs: 200, reconnectMaxMs: 1_000 });
    assert.equal(await commit(reg, "T00"), "committed");

    fill(join(data, "filler"));
    // Turns big enough that SQLite needs new pages: commit until two are parked (the
    // first ones may still fit in space the store had already taken).
    const padding = ` ${"glacier lantern journal ".repeat(2_000)}`;
    const committed = ["T00"];
    for (let i = 1; parked(outbox).length < 2; i++) {
      assert.ok(i < 100, "the full disk never refused a turn");
      const label = `T${String(i).padStart(2, "0")}`;
      assert.equal(await commit(reg, label, padding), "committed");
      committed.push(label);
    }
    assert.ok(reg.log.count("warn", /code -32005/) >= 1, JSON.stringify(reg.log.lines));

    t.diagnostic(`${committed.length - 3} turn(s) fitted on the full disk before two were parked`);
    rmSync(join(data, "filler"));
    const freed = Date.now();
    // Committed at once, while older turns still wait: it must go in behind them.
    assert.equal(await commit(reg, "after"), "committed");
    committed.push("after");
    await arrived(reader, committed, outbox);
    t.diagnostic(`every turn reached memory ${Date.now() - freed} ms after space came back`);
    assert.deepEqual(await storedLabels(reader), committed);
    await waitFor(() => parked(outbox).length === 0, 5_000, "the outbox to empty");
    assert.deepEqual(setAside(outbox), []);
    assertNoReconnect(reg);
  } finally {
    await reader?.close();
    await closeAll();
    await daemon?.stop();
    spawnSync("umount", [data]);
    removeDir(dir);
  }
});
