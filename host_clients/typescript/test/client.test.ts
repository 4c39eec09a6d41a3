// The client against the real daemon, over a Unix socket, loopback TCP and stdio.
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { LibravdbClient } from "../src/client/client.js";
import { CallAborted, ConnectError, ConnectionClosed, InvalidParams, MethodNotFound, NotFound, RpcTimeout } from "../src/client/errors.js";
import type { ProgressParams } from "../src/generated/protocol.js";
import { daemonCommand, removeDir, startDaemon, tempDir, type Daemon } from "./support.js";

for (const transport of ["unix", "tcp"] as const) {
  describe(`client over ${transport}`, () => {
    let daemon: Daemon;
    let client: LibravdbClient;
    before(async () => {
      daemon = await startDaemon({ transport, env: { LIBRAVDB_DEBUG_METHODS: "1" } });
      client = await LibravdbClient.connect({ endpoint: daemon.endpoint, timeoutMs: 60_000 });
    });
    after(async () => {
      await client.close();
      await daemon.stop();
      removeDir(daemon.dir);
    });

    test("initialize is answered and typed calls return typed results", async () => {
      assert.equal(client.server?.protocolVersion, "2.0");
      assert.ok(client.server?.methods.includes("assemble"));
      const stored = await client.ingest({
        sessionId: "c1",
        userId: "ana",
        messages: [
          { id: "m1", role: "user", content: "My sister Ines lives in Porto." },
          { id: "m2", role: "assistant", content: "Noted." },
        ],
      });
      assert.equal(stored.ingested, 2);
      const ctx = await client.assemble({ sessionId: "fresh", userId: "ana", tokenBudget: 4000, prompt: "Where does Ines live?" });
      assert.match(ctx.systemPromptAddition, /Porto/);
      const hits = await client.search({ query: "Porto", userId: "ana", k: 3 });
      assert.ok((hits.hits ?? []).some((h) => h.text.includes("Porto")));
    });

    test("forget one message: a dry run lists it, then it goes from search", async () => {
      await client.ingest({
        sessionId: "f1",
        userId: "fio",
        messages: [
          { id: "k1", role: "user", content: "My locker code at the gym is 4417." },
          { id: "k2", role: "user", content: "I play five-a-side football on Tuesdays." },
        ],
      });
      const dry = await client.forget({ userId: "fio", query: "locker code", dryRun: true });
      assert.deepEqual((dry.items ?? []).map((i) => [i.id, i.sessionId]), [["k1", "f1"]]);
      const gone = await client.forget({ userId: "fio", messageIds: ["k1"] });
      assert.equal(gone.dryRun, false);
      assert.ok(gone.deleted >= 2);
      const hits = await client.search({ query: "locker code", userId: "fio", k: 10 });
      assert.ok(!(hits.hits ?? []).some((h) => h.text.includes("4417")));
      const kept = await client.search({ query: "football on Tuesdays", userId: "fio", k: 10 });
      assert.ok((kept.hits ?? []).some((h) => h.text.includes("football")));
    });

    test("memory.list pages what is kept; memory.update corrects a fact", async () => {
      await client.ingest({
        sessionId: "m1",
        userId: "mo",
        messages: [1, 2, 3].map((i) => ({ id: `q${i}`, role: "user", content: `Fact ${i}: I own ${i} bicycles.`, ts: 1_700_000_000_000 + i })),
      });
      const page = await client.memoryList({ userId: "mo", scope: "history", limit: 2 });
      assert.deepEqual(page.records.map((r) => r.id), ["m1:q3", "m1:q2"]);
      assert.equal(page.total, 3);
      const next = await client.memoryList({ userId: "mo", scope: "history", cursor: page.nextCursor });
      assert.deepEqual(next.records.map((r) => r.id), ["m1:q1"]);
      assert.equal(next.nextCursor, "");
      const fixed = await client.memoryUpdate({ userId: "mo", collection: "turns:mo", id: "m1:q3", text: "I own four bicycles." });
      assert.equal(fixed.record.collection, "user:mo");
      assert.equal(fixed.record.text, "I own four bicycles.");
      const got = await client.memoryGet({ userId: "mo", collection: "user:mo", id: "m1:q3" });
      assert.equal(got.record.metadata["provenance_class"], "user_update");
    });

    test("sessions.list and memory.stats describe what a namespace holds", async () => {
      await client.ingest({
        sessionId: "st1",
        userId: "sta",
        messages: [1, 2].map((i) => ({ id: `s${i}`, role: "user", content: `Note ${i}: the tram leaves at ${i} pm.`, ts: 1_700_000_000_000 + i })),
      });
      const sessions = await client.sessionsList({ namespace: "sta" });
      assert.deepEqual(sessions.sessions.map((s) => [s.sessionId, s.turnCount]), [["st1", 2]]);
      assert.equal(sessions.nextCursor, "");
      const stats = await client.memoryStats({ namespace: "sta", bucket: "day" });
      assert.deepEqual(stats.namespaces.map((n) => [n.namespace, n.sessions, n.history]), [["sta", 1, 2]]);
      assert.ok(stats.disk.totalBytes > 0);
    });

    test("many calls in flight on one connection all get their own reply", async () => {
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => client.call("embed", { texts: [`text ${i}`], kind: "query" })));
      assert.equal(results.length, 20);
      for (const r of results) assert.equal(r.vectors.length, 1);
    });

    test("daemon errors become typed errors", async () => {
      await assert.rejects(client.request("ingest", { sessionId: "x", messages: [], user_id: "a" }), (e: Error) => e instanceof InvalidParams && /did you mean `userId`/.test(e.message));
      await assert.rejects(client.compact({ sessionId: "never-seen" }), NotFound);
      await assert.rejects(client.request("no.such.method", {}), MethodNotFound);
    });

    test("a call past its deadline times out; the connection keeps serving", async () => {
      await assert.rejects(client.call("debug.sleep", { seconds: 1 }, { timeoutMs: 100 }), RpcTimeout);
      assert.equal((await client.health()).ok, true);
    });

    test("an aborted call rejects at once", async () => {
      const ac = new AbortController();
      const pending = client.call("debug.sleep", { seconds: 0.5 }, { signal: ac.signal });
      ac.abort();
      await assert.rejects(pending, CallAborted);
      await assert.rejects(client.health({ signal: AbortSignal.abort() }), CallAborted);
    });

    test("$/progress notifications reach their call", async () => {
      const messages = Array.from({ length: 30 }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: `Point ${i} about the boat trip to Hydra.` }));
      await client.ingest({ sessionId: "p1", userId: "pp", messages });
      const seen: ProgressParams[] = [];
      const out = await client.compact({ sessionId: "p1", force: true }, { onProgress: (p) => seen.push(p) });
      assert.equal(out.didCompact, true);
      assert.ok(seen.length >= 1);
      for (let i = 1; i < seen.length; i++) assert.ok(seen[i]!.done >= seen[i - 1]!.done);
    });
  });
}

describe("client edge cases", () => {
  test("stdio: the client spawns the daemon and stops it on close", async () => {
    const dir = tempDir();
    try {
      const client = await LibravdbClient.connect({
        endpoint: "stdio",
        timeoutMs: 60_000,
        spawn: { command: daemonCommand(), dataDir: join(dir, "data"), env: { ...process.env, HOME: dir } },
      });
      assert.equal((await client.status()).ok, true);
      await client.close();
      await assert.rejects(client.health(), ConnectionClosed);
    } finally {
      removeDir(dir);
    }
  });

  test("nothing listening: ConnectError names the endpoint", async () => {
    const dir = tempDir();
    try {
      await assert.rejects(LibravdbClient.connect({ endpoint: `unix:${join(dir, "none.sock")}` }), (e: Error) => e instanceof ConnectError && /none\.sock/.test(e.message));
    } finally {
      removeDir(dir);
    }
  });

  test("a reply that is not JSON retires the connection with a ProtocolError", async () => {
    // Not a daemon stand-in: the daemon never sends garbage, so a socket that does is the
    // only way to see what the client does with it.
    const server = createServer((sock) => {
      sock.once("data", () => sock.write("this is not json\n"));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const port = (server.address() as { port: number }).port;
    try {
      await assert.rejects(LibravdbClient.connect({ endpoint: `tcp:127.0.0.1:${port}`, timeoutMs: 2000 }), (e: Error) => e instanceof ConnectionClosed && /not JSON/.test(e.message));
    } finally {
      server.close();
    }
  });

  test("a daemon that dies fails the calls in flight", async () => {
    const daemon = await startDaemon({ env: { LIBRAVDB_DEBUG_METHODS: "1" } });
    try {
      const client = await LibravdbClient.connect({ endpoint: daemon.endpoint });
      const failed = assert.rejects(client.call("debug.sleep", { seconds: 5 }), ConnectionClosed);
      await daemon.kill();
      await failed;
      assert.equal(client.closed, true);
    } finally {
      removeDir(daemon.dir);
    }
  });
});

