// What the plugin does with a parked turn for each error the daemon can answer: a
// transient error keeps it queued (and it is sent, in order, once the daemon takes it), a
// definitive refusal of the turn itself (-32602, -32009) sets it aside with a warning, and
// the outbox drains on a timer and after every successful call, never overtaken by a
// later commit. The daemon here is scripted (test/scripted-daemon.ts): the real one cannot
// be made to answer busy, cancelled or an internal error on demand.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";

import { resolveConfig } from "../src/plugin/config.js";
import { pluginState } from "../src/plugin/entry.js";
import type { AgentMessage } from "../src/plugin/host-types.js";
import { closeAll, engine, register, type Registered } from "./host.js";
import { ScriptedDaemon, type ScriptedError } from "./scripted-daemon.js";
import { PACKAGE_DIR, removeDir, tempDir, waitFor } from "./support.js";

const KEY = "agent:main:main";
const STORAGE_DOWN: ScriptedError = { code: -32005, message: "storage unavailable, the write was not applied: PostgreSQL at /run: connection refused" };

/** Codes after which a parked turn must stay queued: the daemon, not the turn, is the problem. */
const TRANSIENT: [number, string][] = [
  [-32000, "server error"],
  [-32001, "frame too large"],
  [-32002, "not found"],
  [-32003, "conflict"],
  [-32004, "model unavailable"],
  [-32005, "storage error"],
  [-32006, "fingerprint mismatch"],
  [-32008, "cancelled"],
  [-32010, "busy"],
  [-32011, "unauthorized"],
  [-32012, "wrong namespace"],
  [-32600, "invalid request"],
  [-32601, "method not found"],
  [-32603, "internal error"],
  [-32099, "a code this client has no class for"],
];

/** Codes by which the daemon refuses the turn itself: it is set aside, never resent. */
const DEFINITIVE: [number, string][] = [
  [-32602, "invalid params"],
  [-32009, "invalid input"],
];

function turn(text: string): AgentMessage[] {
  return [
    { role: "user", content: text, timestamp: 1_000 },
    { role: "assistant", content: "Noted.", timestamp: 1_001 },
  ];
}

const secret = (key: string): string => `private words of turn ${key}`;

async function commit(reg: Registered, key: string): Promise<string> {
  const out = await (await engine(reg)).commitTurn({ advancementKey: key, sessionId: "s1", sessionKey: KEY, messages: turn(secret(key)) });
  return out.status;
}

const files = (dir: string, suffix: string): string[] => (existsSync(dir) ? readdirSync(dir).filter((n) => n.endsWith(suffix)) : []);

interface Setup {
  daemon: ScriptedDaemon;
  reg: Registered;
  outbox: string;
  dir: string;
}

async function withPlugin(options: Record<string, unknown>, body: (s: Setup) => Promise<void>): Promise<void> {
  const dir = tempDir();
  const daemon = await ScriptedDaemon.start(join(dir, "d.sock"));
  const outbox = join(dir, "outbox");
  const reg = register({ endpoint: daemon.endpoint, spawnDaemon: false, outboxDir: outbox, callTimeoutMs: 2_000, assembleTimeoutMs: 2_000, reconnectInitialMs: 100, reconnectMaxMs: 400, ...options });
  try {
    await body({ daemon, reg, outbox, dir });
    // Whatever happened, no message text reached the log.
    for (const line of reg.log.lines) assert.doesNotMatch(line.message, /private words/, line.message);
  } finally {
    await closeAll();
    await daemon.close();
    removeDir(dir);
  }
}

const ask = { sessionId: "s2", sessionKey: KEY, messages: [], prompt: "anything?", tokenBudget: 4000 };

test("a transient error keeps the parked turn queued; it is sent once the daemon takes it", async (t) => {
  for (const [code, name] of TRANSIENT) {
    await t.test(`${code} (${name})`, () =>
      withPlugin({}, async ({ daemon, reg, outbox }) => {
        daemon.failWith({ code, message: `${name}, scripted` });
        assert.equal(await commit(reg, "k1"), "committed");
        assert.equal(files(outbox, ".json").length, 1);
        // A new connection (its drain sends the parked turn first) and more attempts, all
        // answered with the same error while it lasts.
        daemon.dropConnections();
        await waitFor(async () => {
          await (await engine(reg)).assemble(ask);
          return daemon.received.length >= 3 || files(outbox, ".refused").length > 0;
        }, 15_000, `three attempts at the turn answered ${code}`);
        assert.deepEqual(files(outbox, ".refused"), [], `${code} set the turn aside`);
        assert.equal(files(outbox, ".json").length, 1);
        assert.ok(reg.log.count("warn", /still queued|kept in/) >= 1, JSON.stringify(reg.log.lines));
        daemon.failWith(null);
        await waitFor(() => daemon.acceptedKeys().length === 1, 15_000, `the turn kept after ${code} to be sent`);
        assert.deepEqual(daemon.acceptedKeys(), ["k1"]);
        await waitFor(() => files(outbox, ".json").length === 0, 5_000, "the outbox to empty");
        assert.equal(reg.log.count("warn", /set aside/), 0);
      }),
    );
  }
});

test("a definitive refusal sets the turn aside with a warning; the turns behind it go on", async (t) => {
  for (const [code, name] of DEFINITIVE) {
    await t.test(`${code} (${name})`, () =>
      withPlugin({}, async ({ daemon, reg, outbox }) => {
        daemon.failWith(STORAGE_DOWN);
        assert.equal(await commit(reg, "k1"), "committed"); // parked
        daemon.failWith(null);
        daemon.refuseNext({ code, message: `${name} at $.messages[0].role` });
        assert.equal(await commit(reg, "k2"), "committed");
        await waitFor(() => daemon.acceptedKeys().length === 1, 15_000, "the turn behind the refused one to be sent");
        assert.deepEqual(daemon.acceptedKeys(), ["k2"]);
        const aside = files(outbox, ".refused");
        assert.equal(aside.length, 1);
        assert.equal((JSON.parse(readFileSync(join(outbox, aside[0]!), "utf8")) as { advancementKey: string }).advancementKey, "k1");
        assert.equal(reg.log.count("warn", new RegExp(`set aside.*${aside[0]!.replace(/\./g, "\\.")}.*${code}`)), 1, JSON.stringify(reg.log.lines));

        // Refused as it is committed: set aside at once, with the same warning.
        daemon.refuseNext({ code, message: `${name}, scripted` });
        assert.equal(await commit(reg, "k3"), "committed");
        assert.equal(files(outbox, ".refused").length, 2);
        assert.equal(files(outbox, ".json").length, 0);
        assert.equal(reg.log.count("warn", /set aside/), 2);
        assert.deepEqual(daemon.acceptedKeys(), ["k2"]);
      }),
    );
  }
});

test("parked turns are sent after the next successful call, before any later commit", async () => {
  // A retry timer this long never fires during the test: only the successful call drains.
  await withPlugin({ reconnectInitialMs: 60_000, reconnectMaxMs: 60_000 }, async ({ daemon, reg, outbox }) => {
    daemon.failWith(STORAGE_DOWN);
    const parked = Array.from({ length: 30 }, (_, i) => `k${String(i).padStart(2, "0")}`);
    for (const key of parked) assert.equal(await commit(reg, key), "committed");
    assert.equal(files(outbox, ".json").length, parked.length);
    daemon.failWith(null);
    await (await engine(reg)).assemble(ask); // succeeds: the outbox drains behind it
    assert.equal(await commit(reg, "later"), "committed");
    await waitFor(() => daemon.acceptedKeys().length === parked.length + 1, 15_000, "every turn to be sent");
    assert.deepEqual(daemon.acceptedKeys(), [...parked, "later"]);
    assert.deepEqual(files(outbox, ".json"), []);
    assert.ok(reg.log.count("info", /sent \d+ turn/) >= 1, JSON.stringify(reg.log.lines));
  });
});

test("with the link up and no call at all, the outbox drains on its timer", async () => {
  await withPlugin({}, async ({ daemon, reg, outbox }) => {
    daemon.failWith(STORAGE_DOWN);
    assert.equal(await commit(reg, "k1"), "committed");
    assert.equal(await commit(reg, "k2"), "committed");
    await waitFor(() => daemon.received.length >= 6, 15_000, "the timer to retry a few times");
    // One warning for the outage, not one per retry.
    assert.equal(reg.log.count("warn", /turns still queued/), 1, JSON.stringify(reg.log.lines));
    daemon.failWith(null);
    await waitFor(() => daemon.acceptedKeys().length === 2, 15_000, "the parked turns to be sent by the timer");
    assert.deepEqual(daemon.acceptedKeys(), ["k1", "k2"]);
    await waitFor(() => files(outbox, ".json").length === 0, 5_000, "the outbox to empty");
    // The link never went down: no reconnection was needed.
    assert.equal(reg.log.count("warn", /daemon unavailable/), 0);
    assert.equal(reg.log.count("info", /daemon back/), 0);
  });
});

test("closing the plugin stops the retry timer and says what still waits", async () => {
  // A retry timer this long is still pending when the plugin closes.
  await withPlugin({ reconnectInitialMs: 60_000, reconnectMaxMs: 60_000 }, async ({ daemon, reg, outbox }) => {
    const config = resolveConfig({ endpoint: daemon.endpoint, spawnDaemon: false, outboxDir: outbox, callTimeoutMs: 2_000, assembleTimeoutMs: 2_000, reconnectInitialMs: 60_000, reconnectMaxMs: 60_000 });
    const deps = pluginState(config, reg.log); // the state register() made for this config
    daemon.failWith(STORAGE_DOWN);
    assert.equal(await commit(reg, "k1"), "committed");
    assert.equal(deps.commits.retryScheduled, true);
    await closeAll();
    assert.equal(deps.commits.retryScheduled, false);
    assert.equal(reg.log.count("warn", /1 turn\(s\) still queued.*next runs/), 1, JSON.stringify(reg.log.lines));
    assert.equal(files(outbox, ".json").length, 1);
  });
});

test("the retry timer does not keep the process alive", async () => {
  const dir = tempDir();
  const outbox = join(dir, "outbox");
  // No daemon at the endpoint: the turn is parked and its retry timer armed; then the
  // script ends without closing anything, and the process must exit by itself.
  const config = { endpoint: `unix:${join(dir, "nobody.sock")}`, spawnDaemon: false, outboxDir: outbox, reconnectInitialMs: 100, reconnectMaxMs: 400 };
  const host = pathToFileURL(join(PACKAGE_DIR, "build", "test", "host.js")).href;
  const script = [
    `const { register, engine } = await import(${JSON.stringify(host)});`,
    `const reg = register(${JSON.stringify(config)});`,
    `const out = await (await engine(reg)).commitTurn({ advancementKey: "k1", sessionId: "s1", sessionKey: "agent:main:main", messages: [{ role: "user", content: "hi", timestamp: 1 }] });`,
    `console.log(out.status);`,
  ].join("\n");
  try {
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
    let stdout = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    const limit = new Promise<"alive">((resolve) => setTimeout(() => resolve("alive"), 20_000).unref());
    const outcome = await Promise.race([exited, limit]);
    if (outcome === "alive") child.kill("SIGKILL");
    assert.equal(outcome, 0, "the process did not exit by itself");
    assert.equal(stdout.trim(), "committed");
    assert.equal(files(outbox, ".json").length, 1);
  } finally {
    removeDir(dir);
  }
});
