// The daemon dies, hangs or is absent: turns go on with the host's own messages, nothing
// committed is lost, and memory comes back by itself when the daemon does.
import assert from "node:assert/strict";
import { readdirSync, existsSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { LibravdbClient } from "../src/client/client.js";
import type { AgentMessage } from "../src/plugin/host-types.js";
import { closeAll, engine, register, type Registered } from "./host.js";
import { daemonCommand, removeDir, startDaemon, tempDir, waitFor } from "./support.js";

const KEY = "agent:main:main";

/**
 * One turn as OpenClaw runs it: an engine for the turn, bootstrap, assemble twice (the
 * overflow precheck and the model call), the commit, then maintenance. Returns how long
 * it took and the warnings it printed.
 */
async function hostTurn(reg: Registered, sessionId: string, text: string, ts: number): Promise<{ ms: number; warnings: string[] }> {
  const before = reg.log.lines.length;
  const t0 = Date.now();
  const e = await engine(reg);
  await e.bootstrap({ sessionId, sessionKey: KEY });
  const messages = turn(text, ts);
  await e.assemble({ sessionId, sessionKey: KEY, messages, prompt: text, tokenBudget: 4000 });
  await e.assemble({ sessionId, sessionKey: KEY, messages, prompt: text, tokenBudget: 4000 });
  await e.commitTurn({ advancementKey: `${sessionId}-${ts}`, sessionId, sessionKey: KEY, messages });
  await e.maintain({ sessionId, sessionKey: KEY });
  const warnings = reg.log.lines.slice(before).filter((l) => l.level === "warn").map((l) => l.message);
  return { ms: Date.now() - t0, warnings };
}

function turn(user: string, ts: number): AgentMessage[] {
  return [
    { role: "user", content: user, timestamp: ts },
    { role: "assistant", content: "Noted.", timestamp: ts + 1 },
  ];
}

const outboxFiles = (dir: string): string[] => (existsSync(dir) ? readdirSync(dir).filter((n) => n.endsWith(".json")) : []);

test("kill -9 mid-session: degrade at once, park commits, recover by itself", async () => {
  const dir = tempDir();
  const socket = join(dir, "d.sock");
  let daemon = await startDaemon({ dir, socket });
  const outbox = join(dir, "outbox");
  const config = { endpoint: `unix:${socket}`, spawnDaemon: false, outboxDir: outbox, assembleTimeoutMs: 1500, callTimeoutMs: 3000, reconnectInitialMs: 200, reconnectMaxMs: 400 };
  try {
    const reg = register(config);
    const e = await engine(reg);
    await e.commitTurn({ advancementKey: "k1", sessionId: "s1", sessionKey: KEY, messages: turn("My sister Ines lives in Porto.", 1000) });
    const ask = { sessionId: "s2", sessionKey: KEY, messages: turn("hello", 2000), prompt: "Where does my sister live?", tokenBudget: 8000 };
    assert.match((await e.assemble(ask)).systemPromptAddition ?? "", /Porto/);

    await daemon.kill();
    let t0 = Date.now();
    const degraded = await (await engine(reg)).assemble(ask);
    assert.ok(Date.now() - t0 < 1500, `degraded assemble took ${Date.now() - t0} ms`);
    assert.equal(degraded.systemPromptAddition, undefined);
    assert.equal(degraded.messages, ask.messages); // the host's messages, unchanged
    t0 = Date.now();
    await (await engine(reg)).assemble(ask); // within the backoff: fails fast, no connect attempt
    assert.ok(Date.now() - t0 < 200);
    assert.equal(reg.log.count("warn", /daemon unavailable/), 1, JSON.stringify(reg.log.lines));

    // While it is down, the host still gets "committed": the turn waits on disk.
    const down = await (await engine(reg)).commitTurn({ advancementKey: "k2", sessionId: "s3", sessionKey: KEY, messages: turn("My cat is called Miso.", 3000) });
    assert.equal(down.status, "committed");
    assert.equal(outboxFiles(outbox).length, 1);
    // An owning engine is not offered while the daemon is down.
    assert.equal((await engine(reg)).info.ownsCompaction, false);

    daemon = await startDaemon({ dir, socket });
    await waitFor(async () => /Porto/.test((await (await engine(reg)).assemble(ask)).systemPromptAddition ?? ""), 15_000, "memory to come back");
    assert.equal(reg.log.count("info", /daemon back/), 1);
    await waitFor(() => outboxFiles(outbox).length === 0, 10_000, "the parked turn to be sent");
    const cat = await (await engine(reg)).assemble({ ...ask, prompt: "What is my cat called?" });
    assert.match(cat.systemPromptAddition ?? "", /Miso/);
    assert.equal((await engine(reg)).info.ownsCompaction, true);
  } finally {
    await closeAll();
    await daemon.stop();
    removeDir(dir);
  }
});

test("a hung daemon costs one deadline, not a stalled turn", async () => {
  const dir = tempDir();
  const daemon = await startDaemon({ dir });
  const config = { endpoint: daemon.endpoint, spawnDaemon: false, outboxDir: join(dir, "outbox"), assembleTimeoutMs: 800, callTimeoutMs: 800, reconnectInitialMs: 100, reconnectMaxMs: 200 };
  try {
    const reg = register(config);
    const ask = { sessionId: "h1", sessionKey: KEY, messages: turn("hello", 1), prompt: "anything?", tokenBudget: 4000 };
    await (await engine(reg)).assemble(ask); // connected and warm
    daemon.proc.kill("SIGSTOP");
    const t0 = Date.now();
    const out = await (await engine(reg)).assemble(ask);
    const took = Date.now() - t0;
    assert.ok(took >= 700 && took < 2500, `took ${took} ms`);
    assert.equal(out.messages, ask.messages);
    daemon.proc.kill("SIGCONT");
    await waitFor(async () => {
      await (await engine(reg)).assemble(ask);
      return reg.log.count("info", /daemon back/) === 1;
    }, 10_000, "reconnection");
  } finally {
    daemon.proc.kill("SIGCONT");
    await closeAll();
    await daemon.stop();
    removeDir(dir);
  }
});

test("no daemon running: the plugin starts one at its socket and uses it", async () => {
  const dir = tempDir();
  const socket = join(dir, "run", "libravdb.sock");
  const config = { endpoint: `unix:${socket}`, daemonCommand: daemonCommand(), dataDir: join(dir, "data"), daemonLogFile: join(dir, "daemon.log"), outboxDir: join(dir, "outbox") };
  try {
    const reg = register(config);
    const e = await engine(reg);
    await e.commitTurn({ advancementKey: "a", sessionId: "p1", sessionKey: KEY, messages: turn("I play the cello on Sundays.", 10) });
    const out = await e.assemble({ sessionId: "p2", sessionKey: KEY, messages: [], prompt: "Which instrument do I play?", tokenBudget: 4000 });
    assert.match(out.systemPromptAddition ?? "", /cello/);
    assert.equal(reg.log.count("info", /started .* serve --socket/), 1);
    assert.ok(existsSync(join(dir, "daemon.log")));
  } finally {
    await closeAll();
    const client = await LibravdbClient.connect({ endpoint: `unix:${socket}` }).catch(() => null);
    await client?.call("shutdown", {}).catch(() => undefined);
    await client?.close();
    await waitFor(() => !existsSync(socket), 20_000, "the started daemon to stop");
    removeDir(dir);
  }
});

test("daemon down: each turn prints one warning, which says where its turn waits", async () => {
  const dir = tempDir();
  const outbox = join(dir, "outbox");
  const config = { endpoint: `unix:${join(dir, "nobody.sock")}`, spawnDaemon: false, outboxDir: outbox };
  try {
    // `openclaw agent` runs each turn in a new process: a new plugin state each time.
    for (const [i, session] of ["d1", "d2"].entries()) {
      const { warnings } = await hostTurn(register(config), session, `turn ${i}`, 10 + i);
      assert.equal(warnings.length, 1, JSON.stringify(warnings));
      assert.match(warnings[0]!, new RegExp(`daemon unavailable .*turns go on without memory \\(committed turns wait in ${outbox}`));
      await closeAll();
    }
    assert.equal(outboxFiles(outbox).length, 2, "both turns wait on disk");
    // A gateway runs many turns in one process: one warning for the whole outage.
    const reg = register(config);
    for (let i = 0; i < 3; i++) await hostTurn(reg, `g${i}`, `gateway turn ${i}`, 20 + i);
    assert.equal(reg.log.count("warn", /./), 1, JSON.stringify(reg.log.lines));
    assert.equal(outboxFiles(outbox).length, 5);
  } finally {
    await closeAll();
    removeDir(dir);
  }
});

test("a stopped daemon: a turn costs at most the assemble deadline, connecting included, and one warning", async (t) => {
  const dir = tempDir();
  const daemon = await startDaemon({ dir });
  // A call deadline far above the assemble one: a turn that waited on it would show.
  const config = { endpoint: daemon.endpoint, spawnDaemon: false, outboxDir: join(dir, "outbox"), assembleTimeoutMs: 3000, callTimeoutMs: 60_000, connectTimeoutMs: 500 };
  try {
    daemon.proc.kill("SIGSTOP");
    // A new process: the socket accepts (the kernel queues it) but nothing answers.
    const fresh = await hostTurn(register(config), "h-new", "anyone there?", 30);
    t.diagnostic(`new process, stopped daemon: the turn's plugin calls took ${fresh.ms} ms`);
    assert.ok(fresh.ms < config.assembleTimeoutMs, `a turn took ${fresh.ms} ms with the daemon stopped`);
    assert.equal(fresh.warnings.length, 1, JSON.stringify(fresh.warnings));
    assert.match(fresh.warnings[0]!, /accepted the connection but did not answer within 500 ms/);
    await closeAll();
    // A gateway whose connection was up: the assemble on it times out, the rest is quick.
    daemon.proc.kill("SIGCONT");
    const reg = register(config);
    await (await engine(reg)).assemble({ sessionId: "h-warm", sessionKey: KEY, messages: [], prompt: "warm up", tokenBudget: 4000 });
    daemon.proc.kill("SIGSTOP");
    const warm = await hostTurn(reg, "h-warm", "still there?", 31);
    t.diagnostic(`connected gateway, stopped daemon: the turn's plugin calls took ${warm.ms} ms`);
    assert.ok(warm.ms < 2 * config.assembleTimeoutMs, `a turn took ${warm.ms} ms with the daemon stopped`);
    assert.equal(warm.warnings.length, 1, JSON.stringify(warm.warnings));
  } finally {
    daemon.proc.kill("SIGCONT");
    await closeAll();
    await daemon.stop();
    removeDir(dir);
  }
});

test("libravdbd not on PATH: the warning says so and how to point the plugin at it", async () => {
  const dir = tempDir();
  const base = { endpoint: `unix:${join(dir, "run", "d.sock")}`, outboxDir: join(dir, "outbox"), daemonLogFile: join(dir, "daemon.log") };
  try {
    const missing = await hostTurn(register({ ...base, daemonCommand: ["libravdbd-not-installed"] }), "p1", "hello", 40);
    assert.equal(missing.warnings.length, 1, JSON.stringify(missing.warnings));
    assert.match(missing.warnings[0]!, /libravdbd-not-installed not found on PATH; set the plugin's daemonCommand to libravdbd's absolute path: openclaw config set plugins\.entries\.libravdb-memory\.config\.daemonCommand/);
    assert.doesNotMatch(missing.warnings[0]!, /exited|daemon\.log/); // nothing ran, there is no log to read
    await closeAll();
    const wrongPath = await hostTurn(register({ ...base, daemonCommand: [join(dir, "venv", "bin", "libravdbd")] }), "p2", "hello", 41);
    assert.match(wrongPath.warnings[0]!, /venv\/bin\/libravdbd does not exist; set the plugin's daemonCommand/);
  } finally {
    await closeAll();
    removeDir(dir);
  }
});
