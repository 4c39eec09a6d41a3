// Pure parts: framing, endpoints, errors, config, messages, namespaces.
import assert from "node:assert/strict";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { defaultEndpoint, formatEndpoint, parseEndpoint } from "../src/client/endpoint.js";
import { ERROR_CLASSES, ErrorCode, InvalidParams, NotFound, RpcError, WrongNamespace, rpcError } from "../src/client/errors.js";
import { LineSplitter, encodeFrame } from "../src/client/framing.js";
import { ConfigError, DEFAULT_CONFIG, RULES, checkValues, resolveConfig } from "../src/plugin/config.js";
import { messageId, messageText, toIngestMessages } from "../src/plugin/messages.js";
import { agentIdOf, durableNamespace } from "../src/plugin/namespace.js";
import { hitPath, parseHitPath, visibleTo } from "../src/plugin/memory.js";
import { classifyWorkspaceMemoryPaths } from "../src/plugin/provenance.js";
import { removeDir, tempDir } from "./support.js";

test("lines are split on LF, across chunks, with CR dropped", () => {
  const s = new LineSplitter(1024);
  assert.deepEqual(s.push(Buffer.from('{"a":1}\n{"b"')), ['{"a":1}']);
  assert.deepEqual(s.push(Buffer.from(':2}\r\n\n')), ['{"b":2}', ""]);
  assert.equal(encodeFrame({ x: "é" }), '{"x":"é"}\n');
});

test("a frame over the cap is refused, ended or not", () => {
  assert.throws(() => new LineSplitter(8).push(Buffer.from("0123456789\n")), RangeError);
  const s = new LineSplitter(8);
  assert.throws(() => s.push(Buffer.from("0123456789")), RangeError);
});

test("endpoints parse like the daemon's", () => {
  assert.deepEqual(parseEndpoint("tcp:127.0.0.1:9000"), { kind: "tcp", host: "127.0.0.1", port: 9000 });
  assert.deepEqual(parseEndpoint("tcp:[::1]:9000"), { kind: "tcp", host: "::1", port: 9000 });
  assert.equal(formatEndpoint(parseEndpoint("tcp:[::1]:9000")), "tcp:[::1]:9000");
  assert.deepEqual(parseEndpoint("unix:/tmp/x.sock"), { kind: "unix", path: "/tmp/x.sock" });
  assert.deepEqual(parseEndpoint("stdio"), { kind: "stdio" });
  for (const bad of ["http://x", "tcp:host", "tcp:h:99999", "unix:", "tcp::80"]) assert.throws(() => parseEndpoint(bad), TypeError, bad);
  assert.equal(defaultEndpoint({ LIBRAVDB_RPC_ENDPOINT: "tcp:127.0.0.1:1" }), "tcp:127.0.0.1:1");
  assert.equal(defaultEndpoint({ HOME: "/home/x" }), "unix:/home/x/.clawdb/run/libravdb.sock");
});

test("every daemon error code has its class; unknown codes are RpcError", () => {
  assert.equal(ERROR_CLASSES.size, Object.keys(ErrorCode).length - 1); // SERVER_ERROR has none
  const e = rpcError(ErrorCode.INVALID_PARAMS, "unknown field `x`", { field: "x" });
  assert.ok(e instanceof InvalidParams && e instanceof RpcError);
  assert.equal(e.code, -32602);
  assert.deepEqual(e.data, { field: "x" });
  assert.ok(rpcError(-32002, "gone") instanceof NotFound);
  assert.ok(rpcError(-32012, "other ns") instanceof WrongNamespace);
  const unknown = rpcError(-32099, "new");
  assert.equal(unknown.constructor, RpcError);
  assert.equal(unknown.message, "new (code -32099)");
});

test("config: defaults, and a bad key is named", () => {
  assert.deepEqual(resolveConfig(undefined), { ...DEFAULT_CONFIG });
  assert.equal(resolveConfig({ endpoint: "tcp:127.0.0.1:1" }).endpoint, "tcp:127.0.0.1:1");
  assert.throws(() => resolveConfig({ assembleTimeout: 5 }), (e: Error) => e instanceof ConfigError && /unknown config key "assembleTimeout"; did you mean "assembleTimeoutMs"\?/.test(e.message));
  assert.throws(() => resolveConfig({ namepsace: "dana" }), /did you mean "namespace"\?/);
  assert.throws(() => resolveConfig({ colour: "red" }), /unknown config key "colour"; known keys: endpoint, /);
  assert.throws(() => resolveConfig({ namespaceRule: "user" }), /namespaceRule must be one of "agent", "v1"/);
  assert.equal(resolveConfig(undefined).namespaceRule, "agent");
  // What the host checks before load: values, not keys (the plugin names unknown keys itself).
  assert.equal(checkValues({ namepsace: "dana", assembleTimeoutMs: 900 }).assembleTimeoutMs, 900);
  assert.throws(() => checkValues({ namepsace: "dana", assembleTimeoutMs: "5s" }), /assembleTimeoutMs must be an integer/);
  assert.throws(() => resolveConfig({ assembleTimeoutMs: -1 }), /assembleTimeoutMs must be an integer/);
  assert.throws(() => resolveConfig({ endpoint: "/tmp/sock" }), /endpoint must be/);
  assert.throws(() => resolveConfig({ memoryBudgetFraction: 0 }), /memoryBudgetFraction/);
  assert.throws(() => resolveConfig({ daemonCommand: [] }), /daemonCommand/);
  assert.throws(() => resolveConfig({ reconnectInitialMs: 500, reconnectMaxMs: 100 }), /reconnectMaxMs/);
  assert.throws(() => resolveConfig("x"), /must be an object/);
  assert.deepEqual(Object.keys(RULES).sort(), Object.keys(DEFAULT_CONFIG).sort());
  const paths = resolveConfig({ daemonLogFile: "~/.clawdb/daemon.log", outboxDir: "~", dataDir: "/abs" });
  assert.equal(paths.daemonLogFile, join(homedir(), ".clawdb", "daemon.log"));
  assert.equal(paths.outboxDir, homedir());
  assert.equal(paths.dataDir, "/abs");
});

test("host messages become daemon messages: user and assistant text, stable ids", () => {
  const msgs = [
    { role: "user", content: "Hi, I'm Dana", timestamp: 1000 },
    { role: "assistant", content: [{ type: "text", text: "Hello" }, { type: "toolCall", name: "f" }], timestamp: 1001 },
    { role: "toolResult", content: [{ type: "text", text: "secret file" }] },
    { role: "assistant", content: [{ type: "toolCall", name: "g" }] },
    { role: "system", content: "be nice" },
  ];
  const out = toIngestMessages(msgs);
  assert.deepEqual(out.map((m) => [m.role, m.content, m.ts]), [["user", "Hi, I'm Dana", 1000], ["assistant", "Hello", 1001]]);
  assert.equal(out[0]!.id, toIngestMessages(msgs)[0]!.id); // same message, same id
  assert.notEqual(messageId({ role: "user", timestamp: 1 }, "x"), messageId({ role: "user", timestamp: 2 }, "x"));
  assert.equal(messageText([{ type: "input_text", text: " a " }, "b"]), "a \nb");
});

test("namespaces: one per agent by default; the v1 rule as the reference derives them", () => {
  const agent = { namespace: "", namespaceRule: "agent" as const };
  const v1 = { namespace: "", namespaceRule: "v1" as const };
  // Two channels of one agent share its memory; another agent has its own.
  assert.equal(durableNamespace(agent, { sessionKey: "agent:main:main", sessionId: "s1" }), "agent:main");
  assert.equal(durableNamespace(agent, { sessionKey: "agent:Main:telegram:direct:42", sessionId: "s2", userId: "dana" }), "agent:main");
  assert.equal(durableNamespace(agent, { sessionKey: "agent:work:main", sessionId: "s3" }), "agent:work");
  // The host's explicit owner wins over the key; a session naming no agent is the default agent's.
  assert.equal(durableNamespace(agent, { sessionKey: "agent:main:main", sessionTarget: { agentId: "ops" } }), "agent:ops");
  assert.equal(durableNamespace(agent, { sessionKey: "x", runtimeContext: { sessionTarget: { agentId: "ops" } } }), "agent:ops");
  assert.equal(durableNamespace(agent, { sessionId: "s1" }), "agent:main");
  assert.equal(agentIdOf({ sessionKey: "agent:main::x" }), null);
  assert.equal(durableNamespace(v1, { userId: "dana", sessionKey: "k", sessionId: "s" }), "dana");
  assert.equal(durableNamespace(v1, { sessionKey: "agent:main:main", sessionId: "s" }), "session-key:agent:main:main");
  assert.equal(durableNamespace(v1, { sessionId: "s1" }), "session:s1");
  assert.equal(durableNamespace({ namespace: "team", namespaceRule: "agent" }, { userId: "dana", sessionKey: "agent:main:main" }), "team");
  assert.equal(durableNamespace(v1, { userId: "a/b\u0001" }), "a_b_");
});

test("hit paths round-trip and visibility is per namespace", () => {
  const p = hitPath("turns:dana", "s1:m#1");
  assert.deepEqual(parseHitPath(p), { collection: "turns:dana", id: "s1:m#1" });
  assert.equal(parseHitPath("MEMORY.md"), null);
  assert.ok(visibleTo("dana", "user:dana") && visibleTo("dana", "global") && visibleTo("dana", "authored:hard"));
  assert.ok(!visibleTo("dana", "user:bob") && !visibleTo("dana", "session_raw:s1"));
});

test("workspace memory files: untrusted by default; with include, classified as memory-core does without a write record", async () => {
  const dir = tempDir();
  try {
    const ws = join(dir, "workspace");
    mkdirSync(join(ws, "users", "dana"), { recursive: true });
    mkdirSync(join(ws, "memory", "dreaming"), { recursive: true });
    for (const f of ["MEMORY.md", "USER.md", "DREAMS.md", "notes.md", "users/dana/USER.md", "memory/dreaming/x.md"]) writeFileSync(join(ws, f), "x");
    writeFileSync(join(dir, "outside.md"), "x");
    symlinkSync(join(dir, "outside.md"), join(ws, "memory.md")); // a link out of the workspace
    const relativePaths = ["MEMORY.md", "USER.md", "users/dana/USER.md", "DREAMS.md", "memory/dreaming/x.md", "notes.md", "memory.md", "../outside.md", "gone.md"];
    const classes = async (mode: "exclude" | "include", readSources?: { relativePath: string; canonicalRelativePath?: string }[]) =>
      Object.fromEntries(
        (await classifyWorkspaceMemoryPaths(mode, { agentId: "main", workspaceDir: ws, relativePaths, ...(readSources ? { readSources } : {}) })).map((c) => [c.relativePath, c.originClass]),
      );
    assert.deepEqual(new Set(Object.values(await classes("exclude"))), new Set(["untrusted"]));
    assert.deepEqual(await classes("include"), {
      "MEMORY.md": "agent",
      "USER.md": "agent",
      "users/dana/USER.md": "agent",
      "DREAMS.md": "system",
      "memory/dreaming/x.md": "system",
      "notes.md": "untrusted",
      "memory.md": "untrusted",
      "../outside.md": "untrusted",
      "gone.md": "untrusted",
    });
    // A remote workspace: the host read the files; only a clean canonical path counts.
    const remote = await classes("include", [
      { relativePath: "MEMORY.md", canonicalRelativePath: "MEMORY.md" },
      { relativePath: "USER.md", canonicalRelativePath: "../USER.md" },
      { relativePath: "notes.md" },
    ]);
    assert.deepEqual([remote["MEMORY.md"], remote["USER.md"], remote["notes.md"], remote["DREAMS.md"]], ["agent", "untrusted", "untrusted", "untrusted"]);
  } finally {
    removeDir(dir);
  }
});
