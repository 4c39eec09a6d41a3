// The installed plugin's entry (package.json openclaw.runtimeExtensions): the definition
// wrapped by the host SDK's definePluginEntry, with the host's own compaction as the
// fallback while the daemon is away.
import { definePluginEntry } from "openclaw/plugin-sdk/plugin-entry";

import { buildPluginDefinition } from "./plugin/entry.js";
import type { CompactParams, CompactResult } from "./plugin/host-types.js";

async function delegateCompaction(params: CompactParams): Promise<CompactResult> {
  const sdk = (await import("openclaw/plugin-sdk/core")) as { delegateCompactionToRuntime: (p: CompactParams) => Promise<CompactResult> };
  return sdk.delegateCompactionToRuntime(params);
}

export default definePluginEntry(buildPluginDefinition({ delegateCompaction }) as never);
