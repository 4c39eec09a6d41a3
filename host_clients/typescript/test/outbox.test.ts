// The outbox's files: durable, sent oldest first, a refused entry set aside, a failure
// stops the drain. (What counts as a refusal is commits.ts's: outbox-codes.test.ts.)
import assert from "node:assert/strict";
import { readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { InvalidInput } from "../src/client/errors.js";
import { Outbox } from "../src/plugin/outbox.js";
import { removeDir, sleep, tempDir } from "./support.js";

const params = (key: string) => ({ sessionId: "s", messages: [{ role: "user", content: key }], advancementKey: key });

test("entries are private files, sent in order, then removed", async () => {
  const dir = tempDir();
  try {
    const box = new Outbox(join(dir, "out"));
    for (const k of ["a", "b", "c"]) {
      await box.put(params(k));
      await sleep(2);
    }
    assert.equal(statSync(join(dir, "out")).mode & 0o777, 0o700);
    for (const n of readdirSync(join(dir, "out"))) assert.equal(statSync(join(dir, "out", n)).mode & 0o777, 0o600);
    const sent: string[] = [];
    const out = await box.drain(async (p) => void sent.push(p.advancementKey!), () => false);
    assert.equal(out.sent, 3);
    assert.equal(out.stopped, null);
    assert.deepEqual(sent, ["a", "b", "c"]);
    assert.deepEqual(await box.pending(), []);
  } finally {
    removeDir(dir);
  }
});

test("a failure stops the drain and keeps the rest; a refusal is set aside", async () => {
  const dir = tempDir();
  try {
    const box = new Outbox(dir);
    for (const k of ["a", "bad", "c"]) {
      await box.put(params(k));
      await sleep(2);
    }
    writeFileSync(join(dir, "0000000000000-zz.json"), "{not json");
    const down = new Error("daemon down");
    const stopped = await box.drain(async () => {
      throw down;
    }, () => false);
    assert.equal(stopped.stopped, down);
    assert.equal(stopped.sent, 0);
    assert.equal(stopped.unreadable.length, 1);
    assert.equal((await box.pending()).length, 3); // the unreadable one was moved out
    const sent: string[] = [];
    const out = await box.drain(
      async (p) => {
        if (p.advancementKey === "bad") throw new InvalidInput(-32009, "no");
        sent.push(p.advancementKey!);
      },
      (err) => err instanceof InvalidInput,
    );
    assert.equal(out.sent, 2);
    assert.deepEqual(out.setAside.map((a) => a.params.advancementKey), ["bad"]);
    assert.deepEqual(sent, ["a", "c"]);
    const names = readdirSync(dir);
    assert.equal(names.filter((x) => x.endsWith(".refused")).length, 1);
    assert.equal(names.filter((x) => x.endsWith(".unreadable")).length, 1);
  } finally {
    removeDir(dir);
  }
});

test("turns parked within one millisecond keep their order", async () => {
  const dir = tempDir();
  try {
    const box = new Outbox(dir);
    const keys = Array.from({ length: 200 }, (_, i) => `k${String(i).padStart(3, "0")}`);
    await Promise.all(keys.map((k) => box.put(params(k)))); // started in order, no pause between
    const sent: string[] = [];
    await box.drain(async (p) => void sent.push(p.advancementKey!), () => false);
    assert.deepEqual(sent, keys);
  } finally {
    removeDir(dir);
  }
});
