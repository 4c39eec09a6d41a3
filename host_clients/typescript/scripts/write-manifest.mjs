#!/usr/bin/env node
// Writes openclaw.plugin.json from the compiled plugin (build/src/plugin/*.js), so the
// manifest's configSchema, tools and commands are the ones the code uses. `--check` exits
// 1 when the committed manifest differs; the test suite runs the same comparison.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
export const MANIFEST_PATH = join(root, "openclaw.plugin.json");

export async function buildManifest() {
  const load = (p) => import(pathToFileURL(join(root, "build", "src", "plugin", p)).href);
  const { CONFIG_JSON_SCHEMA } = await load("schema.js");
  const { ENGINE_ID, ENGINE_NAME, ENGINE_VERSION } = await load("engine.js");
  const { PLUGIN_DESCRIPTION } = await load("entry.js");
  const { SEARCH_TOOL, GET_TOOL } = await load("memory.js");
  const { CLI_DESCRIPTOR } = await load("cli.js");
  return {
    id: ENGINE_ID,
    name: ENGINE_NAME,
    description: PLUGIN_DESCRIPTION,
    version: ENGINE_VERSION,
    kind: ["memory", "context-engine"],
    categories: ["memory", "context"],
    activation: { onStartup: true, onCommands: [CLI_DESCRIPTOR.name] },
    // A root command of its own: OpenClaw lists it in help and loads the plugin for it
    // without running the plugin's code first.
    cliCommands: [CLI_DESCRIPTOR],
    contracts: { tools: [SEARCH_TOOL, GET_TOOL] },
    configSchema: CONFIG_JSON_SCHEMA,
  };
}

export async function renderManifest() {
  return `${JSON.stringify(await buildManifest(), null, 2)}\n`;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const text = await renderManifest();
  if (process.argv.includes("--check")) {
    if (readFileSync(MANIFEST_PATH, "utf8") !== text) {
      console.error("openclaw.plugin.json is out of date: run `npm run manifest` in host_clients/typescript");
      process.exit(1);
    }
  } else {
    writeFileSync(MANIFEST_PATH, text);
    console.log("wrote openclaw.plugin.json");
  }
}
