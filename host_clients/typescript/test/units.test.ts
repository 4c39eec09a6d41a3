// Pure parts: framing, endpoints, errors, config, messages, namespaces.
import assert from "node:assert/strict";
import { homedir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { defaultEndpoint, formatEndpoint, parseEndpoint } from "../src/client/endpoint.js";
import { ERROR_CLASSES, ErrorCode, InvalidParams, NotFound, RpcError, WrongNamespace, rpcError } from "../src/client/errors.js";
import { LineSplitter, encodeFrame } from "../src/client/framing.js";
import { ConfigError, DEFAULT_CONFIG, RULES, resolveConfig } from "../src/plugin/config.js";
import { durableNamespace, messageId, messageText, toIngestMessages } from "../src/plugin/messages.js";
import { hitPath, parseHitPath, visibleTo } from "../src/plugin/memory.js";

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
  assert.throws(() => resolveConfig({ assembleTimeout: 5 }), (e: Error) => e instanceof ConfigError && /unknown config key "assembleTimeout"/.test(e.message));
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

test("namespaces as the reference derives them", () => {
  assert.equal(durableNamespace("", { userId: "dana", sessionKey: "k", sessionId: "s" }), "dana");
  assert.equal(durableNamespace("", { sessionKey: "agent:main:main", sessionId: "s" }), "session-key:agent:main:main");
  assert.equal(durableNamespace("", { sessionId: "s1" }), "session:s1");
  assert.equal(durableNamespace("team", { userId: "dana" }), "team");
  assert.equal(durableNamespace("", { userId: "a/b\u0001" }), "a_b_");
});

test("hit paths round-trip and visibility is per namespace", () => {
  const p = hitPath("turns:dana", "s1:m#1");
  assert.deepEqual(parseHitPath(p), { collection: "turns:dana", id: "s1:m#1" });
  assert.equal(parseHitPath("MEMORY.md"), null);
  assert.ok(visibleTo("dana", "user:dana") && visibleTo("dana", "global") && visibleTo("dana", "authored:hard"));
  assert.ok(!visibleTo("dana", "user:bob") && !visibleTo("dana", "session_raw:s1"));
});
