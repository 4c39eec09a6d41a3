// `make bench` section "typescript" (scripts/bench_typescript.py runs this and writes the
// table). Side by side in one run, against one real daemon on a Unix socket:
//   1. assemble: the daemon's own time (its dispatcher's p50), a bare client round trip,
//      and the plugin's engine.assemble round trip, with the same inputs;
//   2. a host turn (recall then commit) through the plugin, and through the reference
//      plugin's v1 call sequence (the reference package is not installable here, so its
//      documented calls are replayed with this client): RPCs and time.
import { LibravdbClient } from "../src/client/client.js";
import { closeAll, engine, register } from "../test/host.js";
import type { AgentMessage } from "../src/plugin/host-types.js";
import { removeDir, startDaemon } from "../test/support.js";

const rounds = Number(process.argv[2] ?? 200);
const KEY = "agent:main:main";
const NS = `session-key:${KEY}`;
const TOPICS = ["garden", "kyoto trip", "cello lessons", "mortgage", "football", "sister Ines", "marathon", "job interview", "new laptop", "dentist"];

function sentence(i: number): string {
  const t = TOPICS[i % TOPICS.length]!;
  return `Note ${i} about the ${t}: on day ${i % 28} we talked about ${t} plans, number ${i * 7} and who joins.`;
}

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

async function main(): Promise<void> {
  const daemon = await startDaemon({ transport: "unix" });
  const client = await LibravdbClient.connect({ endpoint: daemon.endpoint, timeoutMs: 120_000 });
  try {
    // A namespace with 20 sessions of 20 turns.
    for (let s = 0; s < 20; s++) {
      const messages = Array.from({ length: 20 }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: sentence(s * 20 + i), id: `b${s}-${i}` }));
      await client.ingest({ sessionId: `seed-${s}`, namespace: NS, messages });
    }
    const reg = register({ endpoint: daemon.endpoint, spawnDaemon: false, assembleTimeoutMs: 60_000, callTimeoutMs: 60_000, outboxDir: `${daemon.dir}/outbox` });
    const host: AgentMessage[] = Array.from({ length: 10 }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: sentence(1000 + i), timestamp: 1_700_000_000_000 + i }));
    const wire = host.map((m) => ({ role: m.role, content: String(m.content) }));
    const e = await engine(reg);
    // warm both paths
    for (let i = 0; i < 5; i++) {
      await e.assemble({ sessionId: "live", sessionKey: KEY, messages: host, prompt: "warm up", tokenBudget: 8000 });
      await client.assemble({ sessionId: "live", namespace: NS, tokenBudget: 8000, messages: wire, prompt: "warm up", windowMessages: true, memoryBudgetFraction: 0.25 });
    }
    const bare: number[] = [];
    const plugin: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const prompt = `What did we say about the ${TOPICS[r % TOPICS.length]} on day ${r % 28}?`;
      const viaClient = async () => {
        const t0 = performance.now();
        await client.assemble({ sessionId: "live", namespace: NS, tokenBudget: 8000, messages: wire, prompt, windowMessages: true, memoryBudgetFraction: 0.25 });
        bare.push(performance.now() - t0);
      };
      const viaPlugin = async () => {
        const t0 = performance.now();
        await (await engine(reg)).assemble({ sessionId: "live", sessionKey: KEY, messages: host, prompt, tokenBudget: 8000 });
        plugin.push(performance.now() - t0);
      };
      if (r % 2) {
        await viaClient();
        await viaPlugin();
      } else {
        await viaPlugin();
        await viaClient();
      }
    }

    // The daemon's own p50 for these assemble calls, as its dispatcher times them (request
    // decoded to reply encoded; the last 2048 calls, i.e. the rounds above).
    const served = (await client.status()).methods?.["assemble"]?.p50Ms ?? 0;

    // A host turn: ours (assemble + commitTurn) vs the reference's v1 sequence.
    const totalCalls = async (): Promise<number> => {
      const methods = (await client.status()).methods ?? {};
      return Object.entries(methods).reduce((n, [name, m]) => (name === "status" ? n : n + (m?.calls ?? 0)), 0);
    };
    const turns = Math.max(20, Math.floor(rounds / 4));
    let oursMs = 0;
    let c0 = await totalCalls();
    for (let t = 0; t < turns; t++) {
      const user = sentence(5000 + t);
      const t0 = performance.now();
      const eng = await engine(reg);
      await eng.bootstrap({ sessionId: "turns-ours", sessionKey: KEY });
      await eng.assemble({ sessionId: "turns-ours", sessionKey: KEY, messages: host, prompt: user, tokenBudget: 8000 });
      await eng.commitTurn({ advancementKey: `t${t}`, sessionId: "turns-ours", sessionKey: KEY, messages: [{ role: "user", content: user, timestamp: 1_800_000_000_000 + 2 * t }, { role: "assistant", content: "Noted.", timestamp: 1_800_000_000_001 + 2 * t }] });
      oursMs += performance.now() - t0;
    }
    const oursCalls = ((await totalCalls()) - c0) / turns;

    let refMs = 0;
    c0 = await totalCalls();
    const sid = "turns-ref";
    for (let t = 0; t < turns; t++) {
      const user = sentence(7000 + t);
      const t0 = performance.now();
      // the reference's assemble: history, five searches, access counts
      await client.request("list_by_meta", { collection: `session:${sid}`, key: "sessionId", value: sid });
      await client.request("search_text", { collection: `session:${sid}`, text: user, k: 8, excludeIds: [] });
      await client.request("search_text", { collection: `user:${NS}`, text: user, k: 4 });
      await client.request("search_text", { collection: "global", text: user, k: 2 });
      await client.request("search_text", { collection: "authored:variant", text: user, k: 16 });
      await client.request("search_text_collections", { collections: [`elevated:user:${NS}`, `elevated:session:${sid}`], text: user, k: 16, excludeByCollection: {} });
      await client.request("bump_access_counts", { updates: [{ collection: `user:${NS}`, ids: [] }] });
      // the reference's afterTurn: the user turn (session, turn index, gating, durable), the reply
      const ts = 1_800_000_000_000 + 2 * t;
      const meta = { role: "user", ts, userId: NS, sessionId: sid, type: "turn", provenance_class: "session_turn", stability_weight: 0.5, source_turn_id: `u${t}` };
      await client.request("insert_session_turn", { sessionId: sid, id: `${sid}:u${t}`, text: user, metadata: meta });
      await client.request("insert_text", { collection: `turns:${NS}`, id: `${NS}:u${t}`, text: user, metadata: { ...meta, provenance_class: "turn_index" } });
      await client.request("gating_scalar", { userId: NS, text: user });
      await client.request("insert_text", { collection: `user:${NS}`, id: `${NS}:u${t}`, text: user, metadata: { ...meta, provenance_class: "durable_user_memory" } });
      await client.request("insert_session_turn", { sessionId: sid, id: `${sid}:a${t}`, text: "Noted.", metadata: { ...meta, role: "assistant", ts: ts + 1, stability_weight: 0.25 } });
      refMs += performance.now() - t0;
    }
    const refCalls = ((await totalCalls()) - c0) / turns;
    const embed: number[] = [];
    for (let r = 0; r < rounds; r++) {
      await client.call("embed", { texts: [`What about the ${TOPICS[r % TOPICS.length]} ${r}?`], kind: "query" }); // warm
    }
    for (let r = 0; r < Math.min(rounds, 100); r++) {
      const t0 = performance.now();
      await client.call("embed", { texts: [`Question ${r} about the ${TOPICS[r % TOPICS.length]}?`], kind: "query" });
      embed.push(performance.now() - t0);
    }
    process.stdout.write(
      JSON.stringify({
        rounds,
        turns,
        servedP50: served,
        bareP50: pct(bare, 50),
        pluginP50: pct(plugin, 50),
        pluginP95: pct(plugin, 95),
        embedP50: pct(embed, 50),
        oursCalls,
        oursMsPerTurn: oursMs / turns,
        refCalls,
        refMsPerTurn: refMs / turns,
      }) + "\n",
    );
  } finally {
    await closeAll();
    await client.close();
    await daemon.stop();
    removeDir(daemon.dir);
  }
}

await main();
