// The plugin definition: what `definePluginEntry` receives (src/index.ts). register() runs
// several times per process in different registration modes; it opens no socket itself:
// the daemon link connects on first use and is shared by every registration.
import { homedir } from "node:os";
import { join } from "node:path";

import type { IngestParams } from "../generated/protocol.js";
import { CLI_COMMANDS, CLI_DESCRIPTION, CLI_GROUP, CLI_PARENT, registerMemoryCli } from "./cli.js";
import { ConfigError, resolveConfig, type PluginConfig } from "./config.js";
import { TurnCommits } from "./commits.js";
import { DaemonLink, inOwnNamespace } from "./daemon.js";
import { ENGINE_ID, ENGINE_NAME, createEngine, type EngineDeps } from "./engine.js";
import type { CompactParams, CompactResult, PluginApi, PluginLogger } from "./host-types.js";
import { GET_TOOL, SEARCH_TOOL, memoryCapability, memoryTools } from "./memory.js";
import { Outbox } from "./outbox.js";
import { CONFIG_JSON_SCHEMA } from "./schema.js";

export const PLUGIN_DESCRIPTION =
  "Local memory for OpenClaw: libravdbd recalls facts and earlier conversations, keeps the exact recent turns, and compacts long sessions without losing anything.";

const consoleLogger: PluginLogger = {
  info: (m) => console.error(m),
  warn: (m) => console.error(m),
  error: (m) => console.error(m),
};

/** One state per distinct config, shared by every register() call of the process. */
const shared = new Map<string, EngineDeps>();

export interface EntryOptions {
  /** The host's compaction, used while the daemon is away. */
  delegateCompaction?: (params: CompactParams) => Promise<CompactResult>;
  env?: NodeJS.ProcessEnv;
}

export function pluginState(cfg: PluginConfig, log: PluginLogger, options: EntryOptions = {}): EngineDeps {
  const key = JSON.stringify(cfg);
  const existing = shared.get(key);
  if (existing) return existing;
  const link = new DaemonLink(cfg, log, options.env);
  const outbox = new Outbox(cfg.outboxDir || join(options.env?.["HOME"] ?? homedir(), ".clawdb", "outbox"));
  // Parked turns are retried on the link's backoff: soon after a short outage, at most
  // reconnectMaxMs apart during a long one.
  const commits = new TurnCommits(outbox, (params) => inOwnNamespace((p: IngestParams) => link.call("ingest", p, cfg.callTimeoutMs), params), log, {
    initialMs: cfg.reconnectInitialMs,
    maxMs: cfg.reconnectMaxMs,
  });
  const deps: EngineDeps = { cfg, link, commits, log, forks: new Map(), ...(options.delegateCompaction ? { delegateCompaction: options.delegateCompaction } : {}) };
  // A new connection sends what waits before any other call goes out on it, so the first
  // assemble after an outage already sees those turns.
  link.onConnect((client) => commits.drainOnConnect((params) => inOwnNamespace((p: IngestParams) => client.call("ingest", p, { timeoutMs: cfg.callTimeoutMs }), params)));
  link.onSuccess(() => commits.kick());
  shared.set(key, deps);
  return deps;
}

async function closeState(state: EngineDeps): Promise<void> {
  await state.commits.close();
  await state.link.close();
}

/** Forget the shared states (tests; the gateway stops once). */
export async function closeAll(): Promise<void> {
  const states = [...shared.values()];
  shared.clear();
  await Promise.all(states.map(closeState));
}

/** Modes that only read metadata: nothing may connect or start (the link is lazy anyway). */
const METADATA_MODES = new Set(["discovery", "tool-discovery", "cli-metadata", "setup-only"]);

export function buildPluginDefinition(options: EntryOptions = {}) {
  return {
    id: ENGINE_ID,
    name: ENGINE_NAME,
    description: PLUGIN_DESCRIPTION,
    kind: ["memory", "context-engine"] as ("memory" | "context-engine")[],
    configSchema: {
      jsonSchema: CONFIG_JSON_SCHEMA,
      safeParse(value: unknown) {
        try {
          return { success: true, data: resolveConfig(value) };
        } catch (err) {
          return { success: false, error: { issues: [{ path: [], message: err instanceof Error ? err.message : String(err) }] } };
        }
      },
    },
    register(api: PluginApi): void {
      const log = api.logger ?? consoleLogger;
      let cfg: PluginConfig;
      try {
        cfg = resolveConfig(api.pluginConfig);
      } catch (err) {
        if (err instanceof ConfigError) throw new ConfigError(`libravdb-memory config: ${err.message}`);
        throw err;
      }
      const cliOptions = {
        parentPath: [...CLI_PARENT],
        commands: [CLI_GROUP],
        descriptors: [{ name: CLI_GROUP, description: CLI_DESCRIPTION, hasSubcommands: true }],
      };
      if (api.registrationMode === "cli-metadata") {
        api.registerCli?.(() => undefined, cliOptions);
        return;
      }
      const deps = pluginState(cfg, log, options);
      api.registerContextEngine(ENGINE_ID, () => createEngine(deps));
      api.registerMemoryCapability?.(memoryCapability(deps));
      api.registerTool?.((ctx) => memoryTools(deps, ctx), { names: [SEARCH_TOOL, GET_TOOL] });
      api.registerCli?.(({ program }) => registerMemoryCli(program, deps), cliOptions);
      if (!METADATA_MODES.has(api.registrationMode ?? "full")) {
        api.on?.("gateway_stop", async () => {
          await closeState(deps);
          shared.delete(JSON.stringify(cfg));
        });
      }
    },
  };
}

export { CLI_COMMANDS };
