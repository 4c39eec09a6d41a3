// The daemon dies, hangs or is absent: turns go on with the host's own messages, nothing
// committed is lost, and memory comes back by itself when the daemon does.
import assert from "node:assert/strict";
import { readdirSync, existsSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { LibravdbClient } from "../src/client/client.js";
import type { AgentMessage } from "../src/plugin/host-types.js";
import { closeAll, engine, register } from "./host.js";
import { daemonCommand, removeDir, startDaemon, tempDir, waitFor } from "./support.js";

const KEY = "agent:main:main";

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
    assert.equal(reg.log.count("info", /starting/), 1);
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
