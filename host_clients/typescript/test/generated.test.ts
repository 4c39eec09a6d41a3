// The committed generated files match their sources: the TypeScript protocol types match
// the daemon's JSON Schema, and openclaw.plugin.json matches the code.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { test } from "node:test";

import { PACKAGE_DIR } from "./support.js";

test("src/generated/protocol.ts is generated from the current schema", async () => {
  const gen = (await import(pathToFileURL(join(PACKAGE_DIR, "scripts", "gen-types.mjs")).href)) as { generate: () => string };
  const committed = readFileSync(join(PACKAGE_DIR, "src", "generated", "protocol.ts"), "utf8");
  assert.ok(committed === gen.generate(), "protocol types drifted from protocol/schema/libravdb.schema.json: run `npm run gen`");
});

test("openclaw.plugin.json is the manifest the code describes", async () => {
  const man = (await import(pathToFileURL(join(PACKAGE_DIR, "scripts", "write-manifest.mjs")).href)) as { renderManifest: () => Promise<string> };
  const committed = readFileSync(join(PACKAGE_DIR, "openclaw.plugin.json"), "utf8");
  assert.ok(committed === (await man.renderManifest()), "openclaw.plugin.json drifted: run `npm run manifest`");
});

test("every generated method is one the schema lists", async () => {
  const { METHOD_NAMES } = await import("../src/generated/protocol.js");
  const schema = JSON.parse(readFileSync(join(PACKAGE_DIR, "..", "..", "protocol", "schema", "libravdb.schema.json"), "utf8")) as { methods: Record<string, unknown> };
  assert.deepEqual([...METHOD_NAMES].sort(), Object.keys(schema.methods).sort());
});

test("the protocol's bounds reach the TypeScript types", async () => {
  const gen = (await import(pathToFileURL(join(PACKAGE_DIR, "scripts", "gen-types.mjs")).href)) as {
    boundsOf: (schema: unknown) => string;
  };
  assert.equal(gen.boundsOf({ type: "integer", minimum: 1, maximum: 200 }), "Bounds: >= 1, <= 200.");
  assert.equal(gen.boundsOf({ anyOf: [{ type: "number", exclusiveMinimum: 0 }, { type: "null" }] }), "Bounds: > 0.");
  assert.equal(gen.boundsOf({ type: "string" }), "");
  const committed = readFileSync(join(PACKAGE_DIR, "src", "generated", "protocol.ts"), "utf8");
  const search = committed.slice(committed.indexOf("export interface SearchParams"));
  assert.match(search.slice(0, search.indexOf("\n}")), /Bounds: >= 1, <= 200\.\n\s*\*\/\n\s*k\?: number;/);
});
