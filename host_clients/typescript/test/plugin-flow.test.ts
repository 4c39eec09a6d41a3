// The plugin's engine, tools, memory runtime and CLI driven through a whole host flow
// against the real daemon, over a Unix socket and over TCP.
import assert from "node:assert/strict";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { EXPORT_SCOPES, runExport, runForget, runStatus, type CliIo } from "../src/plugin/cli.js";
import { pluginState } from "../src/plugin/entry.js";
import { resolveConfig } from "../src/plugin/config.js";
import type { AgentMessage } from "../src/plugin/host-types.js";
import { LibravdbClient } from "../src/client/client.js";
import { closeAll, engine, register, tools } from "./host.js";
import { RecordingLogger, removeDir, startDaemon, tempDir, type Daemon } from "./support.js";

const KEY = "agent:main:main";
const FACT = "My sister Ines lives in Porto and teaches physics.";

function turn(user: string, assistant: string, ts: number): AgentMessage[] {
  return [
    { role: "user", content: [{ type: "text", text: user }], timestamp: ts },
    { role: "assistant", content: [{ type: "text", text: assistant }], timestamp: ts + 1 },
  ];
}

function captureIo(): CliIo & { out: (t: string) => void; lines: string[]; code: number } {
  const io = { lines: [] as string[], code: 0, out: (t: string) => void io.lines.push(t), err: (t: string) => void io.lines.push(t), setExitCode: (c: number) => void (io.code = c) };
  return io;
}

for (const transport of ["unix", "tcp"] as const) {
  describe(`host flow over ${transport}`, () => {
    let daemon: Daemon;
    let stats: LibravdbClient;
    let config: Record<string, unknown>;
    before(async () => {
      daemon = await startDaemon({ transport });
      stats = await LibravdbClient.connect({ endpoint: daemon.endpoint });
      config = { endpoint: daemon.endpoint, spawnDaemon: false, outboxDir: join(daemon.dir, "outbox"), assembleTimeoutMs: 60_000, callTimeoutMs: 60_000 };
    });
    after(async () => {
      await closeAll();
      await stats.close();
      await daemon.stop();
      removeDir(daemon.dir);
    });

    const calls = async (method: string): Promise<number> => ((await stats.status()).methods?.[method]?.calls ?? 0);

    test("metadata registrations open no connection; full registration owns both slots", async () => {
      const connections = (await stats.status()).connections;
      const meta = register(config, "cli-metadata");
      assert.equal(meta.engines.size, 0);
      // A root command: `openclaw libravdb ...` exists whether memory-core is enabled or not.
      assert.deepEqual(meta.cliOptions, [{ commands: ["libravdb"], descriptors: [{ name: "libravdb", description: "LibraVDB memory: status, search, forget, compact, export", hasSubcommands: true }] }]);
      assert.equal(meta.cli.length, 1);
      const reg = register(config, "discovery");
      assert.ok(reg.engines.has("libravdb-memory") && reg.capability?.runtime);
      assert.equal((await stats.status()).connections, connections);
      const e = await engine(reg);
      assert.deepEqual(e.info.transcriptSemantics, { currentTurnFence: "before-current-turn-entry-v1", turnAdvancementIdempotency: "atomic-idempotent-v1" });
      assert.equal(e.info.ownsCompaction, true);
    });

    test("commitTurn writes once; a retry with the key is a duplicate", async () => {
      const reg = register(config);
      const e = await engine(reg);
      assert.deepEqual(await e.bootstrap({ sessionId: "s1", sessionKey: KEY }), { bootstrapped: true, importedMessages: 0 });
      const messages = turn(FACT, "Noted: Ines lives in Porto.", 1_700_000_000_000);
      const first = await e.commitTurn({ advancementKey: "adv-1", sessionId: "s1", sessionKey: KEY, messages });
      assert.equal(first.status, "committed");
      const again = await (await engine(reg)).commitTurn({ advancementKey: "adv-1", sessionId: "s1", sessionKey: KEY, messages });
      assert.equal(again.status, "duplicate");
      const raw = await stats.request("list_collection", { collection: "session_raw:s1" });
      assert.equal((raw as { results: unknown[] }).results.length, 2);
    });

    test("a new session recalls the fact with one assemble call", async () => {
      const reg = register(config);
      const e = await engine(reg);
      const before = await calls("assemble");
      const hostMessages = turn("Hi again", "Hello!", 1_700_000_100_000);
      const out = await e.assemble({ sessionId: "s2", sessionKey: KEY, messages: hostMessages, prompt: "Where does my sister live?", tokenBudget: 8000 });
      assert.match(out.systemPromptAddition ?? "", /Porto/);
      assert.equal(out.messages[0], hostMessages[0]); // the host's own objects, unchanged
      assert.equal(out.messages.length, 2);
      assert.equal((await calls("assemble")) - before, 1);
    });

    test("an owning engine gets a window of its transcript; older turns come back as memory", async () => {
      const e = await engine(register(config));
      const history: AgentMessage[] = [{ role: "user", content: "My passport number ends in 7781.", timestamp: 1 }];
      for (let i = 1; i < 80; i++) history.push({ role: i % 2 ? "assistant" : "user", content: `small talk ${i} ` + "la ".repeat(60), timestamp: 1 + i });
      await e.commitTurn({ advancementKey: "w-1", sessionId: "w1", sessionKey: KEY, messages: history });
      const out = await e.assemble({ sessionId: "w1", sessionKey: KEY, messages: history, prompt: "What does my passport number end in?", tokenBudget: 3000 });
      assert.ok(out.messages.length < history.length && out.messages.length > 0);
      assert.equal(out.messages[0]!.role, "user");
      assert.equal(out.messages.at(-1), history.at(-1));
      assert.match(out.systemPromptAddition ?? "", /7781/);
      assert.ok(out.estimatedTokens <= 3000);
    });

    test("compact: forced compaction of a long session", async () => {
      const e = await engine(register(config));
      const messages: AgentMessage[] = [];
      for (let i = 0; i < 24; i++) messages.push(...turn(`Update ${i}: the Lisbon flat viewing moved to slot ${i}.`, `Thanks, noted ${i}.`, 2_000 + 2 * i));
      await e.commitTurn({ advancementKey: "c-1", sessionId: "c1", sessionKey: KEY, messages });
      const out = await e.compact({ sessionId: "c1", sessionKey: KEY, force: true, currentTokenCount: 900 });
      assert.equal(out.ok, true);
      assert.equal(out.compacted, true);
      const none = await e.compact({ sessionId: "never", sessionKey: KEY });
      assert.deepEqual([none.ok, none.compacted], [true, false]);
    });

    test("v1 rule: a forked subagent shares its parent's memory; an isolated one does not", async () => {
      const reg = register({ ...config, namespaceRule: "v1" });
      const e = await engine(reg);
      await e.commitTurn({ advancementKey: "v1-parent", sessionId: "v1-parent", sessionKey: KEY, messages: turn("My brother Tiago lives in Faro.", "Noted.", 1_700_000_300_000) });
      const child = "agent:main:subagent:fork-1";
      const prep = await e.prepareSubagentSpawn({ parentSessionKey: KEY, childSessionKey: child, contextMode: "fork" });
      assert.ok(prep);
      const inFork = await (await engine(reg)).assemble({ sessionId: "fork-1", sessionKey: child, messages: [], prompt: "Where does my brother live?", tokenBudget: 8000 });
      assert.match(inFork.systemPromptAddition ?? "", /Faro/);
      await prep.rollback();
      assert.equal(await e.prepareSubagentSpawn({ parentSessionKey: KEY, childSessionKey: "agent:main:subagent:iso", contextMode: "isolated" }), undefined);
      const isolated = await e.assemble({ sessionId: "iso-1", sessionKey: "agent:main:subagent:iso", messages: [], prompt: "Where does my brother live?", tokenBudget: 8000 });
      assert.doesNotMatch(isolated.systemPromptAddition ?? "", /Faro/);
      await e.onSubagentEnded({ childSessionKey: child, reason: "completed" });
    });

    test("one memory per agent by default: two channels of one agent meet; v1 keeps them apart", async () => {
      const commitFact = async (cfg: Record<string, unknown>, sessionKey: string, session: string, fact: string) =>
        (await engine(register(cfg))).commitTurn({ advancementKey: `ag-${session}`, sessionId: session, sessionKey, messages: turn(fact, "Noted.", 1_700_000_200_000) });
      const recall = async (cfg: Record<string, unknown>, sessionKey: string, session: string, prompt: string) =>
        (await (await engine(register(cfg))).assemble({ sessionId: session, sessionKey, messages: [], prompt, tokenBudget: 8000 })).systemPromptAddition ?? "";
      // Told through Telegram, asked in the main session of the same agent: one memory.
      await commitFact(config, "agent:main:telegram:direct:42", "ag-tg", "My bicycle is a green Brompton.");
      assert.match(await recall(config, "agent:main:main", "ag-main", "What bicycle do I ride?"), /Brompton/);
      // Another agent does not see it.
      assert.doesNotMatch(await recall(config, "agent:work:main", "ag-work", "What bicycle do I ride?"), /Brompton/);
      // The v1 rule keys by session key: the two channels keep two memories that never meet.
      const v1 = { ...config, namespaceRule: "v1" };
      await commitFact(v1, "agent:main:telegram:direct:43", "v1-tg", "My kayak is a red Prijon.");
      assert.doesNotMatch(await recall(v1, "agent:main:main", "v1-main", "What kayak do I paddle?"), /Prijon/);
      assert.match(await recall(v1, "agent:main:telegram:direct:43", "v1-tg2", "What kayak do I paddle?"), /Prijon/);
    });

    test("memory_search and memory_get tools, within the caller's namespace", async () => {
      const reg = register(config);
      const t = tools(reg, { sessionKey: KEY });
      const found = await t.get("memory_search")!.execute("call-1", { query: "Where does Ines live?" });
      const text = found.content[0]!.text;
      assert.match(text, /Porto/, JSON.stringify(await stats.search({ query: "Where does Ines live?", namespace: "agent:main" })));
      const lines = text.split("\n");
      const path = /path: (libravdb:\S+)/.exec(lines[lines.findIndex((l) => l.includes(FACT)) + 1] ?? "")?.[1];
      assert.ok(path, text);
      const got = await t.get("memory_get")!.execute("call-2", { path });
      assert.equal(got.content[0]!.text, FACT);
      const other = tools(reg, { sessionKey: "agent:other:main" });
      const denied = await other.get("memory_get")!.execute("call-3", { path });
      assert.match(denied.content[0]!.text, /No memory at/);
      const empty = await t.get("memory_search")!.execute("call-4", { query: " " });
      assert.match(empty.content[0]!.text, /query is required/);
    });

    test("memory runtime: manager search and hit authorization", async () => {
      const reg = register(config);
      const runtime = reg.capability!.runtime!;
      const { manager } = await runtime.getMemorySearchManager({ agentId: "main" });
      const hits = await manager!.search("Ines Porto", { maxResults: 5, sessionKey: KEY });
      assert.ok(hits.some((h) => h.snippet.includes("Porto")));
      const mine = await runtime.authorizeSearchHits!({ agentId: "main", requesterSessionKey: KEY, sandboxed: false, hits });
      assert.equal(mine.length, hits.length);
      const theirs = await runtime.authorizeSearchHits!({ agentId: "main", requesterSessionKey: "agent:other:main", sandboxed: false, hits });
      assert.equal(theirs.length, 0);
      assert.deepEqual(reg.capability!.promptBuilder!({ availableTools: new Set(["memory_search", "memory_get"]) }).slice(0, 1), ["## Memory"]);
      // The host's provenance question is answered (it warns on every turn when it is not).
      assert.equal(runtime.supportsWorkspaceMemoryReadSources, true);
      assert.deepEqual(await runtime.classifyWorkspaceMemoryPaths!({ agentId: "main", workspaceDir: daemon.dir, relativePaths: ["MEMORY.md"] }), [{ relativePath: "MEMORY.md", originClass: "untrusted" }]);
      assert.deepEqual(reg.capability!.promptBuilder!({ availableTools: new Set() }), []);
    });

    test("CLI export: the namespace's whole memory, every record memory.stats counts", async () => {
      const deps = pluginState(resolveConfig(config), new RecordingLogger());
      const io = captureIo();
      const errors: string[] = [];
      io.err = (t: string) => void errors.push(t);
      await runExport(deps, io, { agent: "main" });
      assert.equal(io.code, 0, errors.join("\n"));
      const records = io.lines.map((l) => JSON.parse(l) as { namespace: string; scope: string; collection: string; role: string; text: string });
      const counted = (await stats.call("memory.stats", { namespace: "agent:main" })).namespaces[0]!;
      const byScope = (scope: string) => records.filter((r) => r.scope === scope).length;
      assert.equal(byScope("durable"), counted.durable + counted.superseded);
      assert.equal(byScope("history"), counted.history);
      assert.equal(byScope("summary"), counted.summary);
      assert.equal(records.length, counted.records);
      // The conversation is there, both roles, not only the facts kept from it.
      assert.ok(records.some((r) => r.scope === "history" && r.role === "assistant"), JSON.stringify(records.map((r) => [r.scope, r.role])));
      assert.ok(records.some((r) => r.scope === "history" && r.text === FACT));
      assert.ok(records.every((r) => r.namespace === "agent:main" && EXPORT_SCOPES.includes(r.scope as never)));
      assert.match(errors.join("\n"), new RegExp(`exported ${records.length} record\\(s\\) of "agent:main": durable \\d+, history \\d+`));
    });

    test("CLI: status, then forget a session key's memory", async () => {
      const deps = pluginState(resolveConfig(config), new RecordingLogger());
      const status = captureIo();
      await runStatus(deps, status, false);
      assert.match(status.lines.join("\n"), /daemon\s+running/);
      assert.match(status.lines.join("\n"), /namespaces\s+agent: one memory per agent/);
      const refused = captureIo();
      await runForget(deps, refused, { sessionKey: KEY });
      assert.equal(refused.code, 1);
      assert.match(refused.lines.join("\n"), /--yes/);
      const io = captureIo();
      await runForget(deps, io, { sessionKey: KEY, yes: true, includeSessions: true });
      assert.match(io.lines.join("\n"), /forgot \d+ record/);
      const after = await (await engine(register(config))).assemble({ sessionId: "s9", sessionKey: KEY, messages: [], prompt: "Where does my sister live?", tokenBudget: 8000 });
      assert.doesNotMatch(after.systemPromptAddition ?? "", /Porto/);
      assert.deepEqual(readdirSync(join(daemon.dir)).includes("outbox"), false); // nothing ever waited
    });
  });
}

test("a misspelled key turns memory off with one warning a turn; the turn goes on", async () => {
  const dir = tempDir();
  try {
    const reg = register({ namepsace: "dana", outboxDir: join(dir, "outbox") });
    const e = await engine(reg);
    const messages = turn("hello", "hi", 1);
    // The host calls assemble twice a turn, then commits.
    assert.equal((await e.assemble({ sessionId: "bad-1", sessionKey: KEY, messages, prompt: "hello" })).messages, messages);
    await e.assemble({ sessionId: "bad-1", sessionKey: KEY, messages, prompt: "hello" });
    assert.equal((await e.commitTurn({ advancementKey: "b1", sessionId: "bad-1", sessionKey: KEY, messages })).status, "committed");
    assert.equal(e.info.ownsCompaction, false); // the host's own compaction stays on
    const warnings = reg.log.lines.filter((l) => l.level === "warn");
    assert.equal(warnings.length, 1, JSON.stringify(reg.log.lines));
    assert.match(warnings[0]!.message, /memory is off.*unknown config key "namepsace"; did you mean "namespace"\?.*neither recalled nor stored/);
    // The next turn (a new engine) says it again; nothing was parked or sent.
    await (await engine(reg)).assemble({ sessionId: "bad-2", sessionKey: KEY, messages: [], prompt: "x" });
    assert.equal(reg.log.count("warn", /memory is off/), 2);
    assert.equal(existsSync(join(dir, "outbox")), false);
    const search = await tools(reg, { sessionKey: KEY }).get("memory_search")!.execute("c1", { query: "x" });
    assert.match(search.content[0]!.text, /Memory is off.*namepsace/);
    const runtime = reg.capability!.runtime!;
    assert.deepEqual(await runtime.getMemorySearchManager({ agentId: "main" }), { manager: null, error: 'memory is off: unknown config key "namepsace"; did you mean "namespace"?' });
  } finally {
    await closeAll();
    removeDir(dir);
  }
});
