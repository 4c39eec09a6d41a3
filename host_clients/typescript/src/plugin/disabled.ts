// The plugin with a config it cannot use (a misspelled key, a value out of range): it takes
// its slots as usual, but memory is off. Every turn runs on the host's own messages and
// compaction and prints one warning naming the problem; nothing is recalled or stored,
// since a misspelled `namespace` or `outboxDir` would put turns where the user did not
// mean them to go. Throwing at load instead would stop every agent run of the host.
import type { CompactParams, CompactResult, ContextEngine, MemoryPluginCapability, PluginLogger, AgentTool } from "./host-types.js";
import { ENGINE_ID, ENGINE_NAME, ENGINE_VERSION, TRANSCRIPT_SEMANTICS } from "./engine.js";
import { estimateTokens } from "./messages.js";
import { GET_TOOL, SEARCH_TOOL } from "./memory.js";

export const CONFIG_PATH = "plugins.entries.libravdb-memory.config";

/** The one line a turn prints while the config is unusable. */
export function configWarning(reason: string): string {
  return `libravdb: memory is off until ${CONFIG_PATH} is fixed (${reason}); this turn is neither recalled nor stored`;
}

/**
 * An engine per turn (the host builds one each turn): it warns at its first call, so a
 * turn prints the warning once however many of its methods the host calls.
 */
export function createDisabledEngine(reason: string, log: PluginLogger, delegateCompaction?: (params: CompactParams) => Promise<CompactResult>): ContextEngine {
  let warned = false;
  const warnOnce = (): void => {
    if (warned) return;
    warned = true;
    log.warn(configWarning(reason));
  };
  return {
    info: {
      id: ENGINE_ID,
      name: ENGINE_NAME,
      version: ENGINE_VERSION,
      // Declared as the working engine does: without them the host hands the turn to its
      // legacy engine, and this engine's warning would never be printed.
      transcriptSemantics: TRANSCRIPT_SEMANTICS,
      ownsCompaction: false,
      turnMaintenanceMode: "background",
    },
    async bootstrap() {
      warnOnce();
      return { bootstrapped: false, reason: `memory is off: ${reason}` };
    },
    async maintain() {
      return { changed: false, bytesFreed: 0, rewrittenEntries: 0, reason: "memory is off" };
    },
    async ingest() {
      warnOnce();
      return { ingested: false };
    },
    async ingestBatch() {
      warnOnce();
      return { ingestedCount: 0 };
    },
    async afterTurn() {
      warnOnce();
    },
    async commitTurn() {
      // The host's transcript keeps the turn; memory does not (see the warning).
      warnOnce();
      return { status: "committed" };
    },
    async assemble(params) {
      warnOnce();
      const messages = Array.isArray(params.messages) ? params.messages : [];
      return { messages, estimatedTokens: estimateTokens(messages) };
    },
    async compact(params) {
      if (delegateCompaction) return delegateCompaction(params);
      return { ok: false, compacted: false, reason: `memory is off: ${reason}` };
    },
    async prepareSubagentSpawn() {
      return undefined;
    },
    async onSubagentEnded() {},
    async dispose() {},
  };
}

/** memory_search and memory_get, answering why memory is off. */
export function disabledTools(reason: string): AgentTool[] {
  const off = async () => ({ content: [{ type: "text" as const, text: `Memory is off: the libravdb-memory plugin config is invalid (${reason}).` }] });
  const parameters = { type: "object", additionalProperties: true, properties: {} };
  return [
    { name: SEARCH_TOOL, label: "Memory search", description: "Search long-term memory (off: the plugin config is invalid).", parameters, execute: off },
    { name: GET_TOOL, label: "Memory get", description: "Read one memory (off: the plugin config is invalid).", parameters, execute: off },
  ];
}

/** A memory runtime with no memory: no manager, no hits, no workspace file vouched for. */
export function disabledCapability(reason: string): MemoryPluginCapability {
  return {
    promptBuilder: () => [],
    runtime: {
      getMemorySearchManager: async () => ({ manager: null, error: `memory is off: ${reason}` }),
      resolveMemoryBackendConfig: () => ({ backend: "builtin" }),
      authorizeSearchHits: async () => [],
      supportsWorkspaceMemoryReadSources: true,
      classifyWorkspaceMemoryPaths: async ({ relativePaths }) => relativePaths.map((relativePath) => ({ relativePath, originClass: "untrusted" as const })),
      closeAllMemorySearchManagers: async () => undefined,
    },
  };
}
