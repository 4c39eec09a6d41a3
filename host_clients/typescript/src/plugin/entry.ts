// The plugin definition: what `definePluginEntry` receives (src/index.ts). register() runs
// several times per process in different registration modes; it opens no socket itself:
// the daemon link connects on first use and is shared by every registration. A config the
// plugin cannot use does not stop the host: memory is off, with a warning each turn.
import { homedir } from "node:os";
import { join } from "node:path";

import type { IngestParams } from "../generated/protocol.js";
import { CLI_COMMANDS, CLI_DESCRIPTOR, CLI_GROUP, cliDeps, registerConfigErrorCli, registerMemoryCli } from "./cli.js";
import { ConfigError, checkValues, resolveConfig, type PluginConfig } from "./config.js";
import { TurnCommits } from "./commits.js";
import { DaemonLink, inOwnNamespace } from "./daemon.js";
import { createDisabledEngine, disabledCapability, disabledTools } from "./disabled.js";
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
  const outbox = new Outbox(cfg.outboxDir || join(options.env?.["HOME"] ?? homedir(), ".clawdb", "outbox"));
  // The link's one warning per outage says where turns go meanwhile, so neither the
  // parked commits nor the failed calls of the turn warn again.
  const link = new DaemonLink(cfg, log, options.env, ` (committed turns wait in ${outbox.dir} and are sent when it is back)`);
  // Parked turns are retried on the link's backoff: soon after a short outage, at most
  // reconnectMaxMs apart during a long one.
  const commits = new TurnCommits(
    outbox,
    (params) => inOwnNamespace((p: IngestParams) => link.call("ingest", p, cfg.callTimeoutMs), params),
    log,
    { initialMs: cfg.reconnectInitialMs, maxMs: cfg.reconnectMaxMs },
    () => link.degradedReason !== null,
  );
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
      // As the manifest's schema: values are checked, unknown keys pass (register() names them).
      safeParse(value: unknown) {
        try {
          checkValues(value);
          return { success: true, data: value ?? {} };
        } catch (err) {
          return { success: false, error: { issues: [{ path: [], message: err instanceof Error ? err.message : String(err) }] } };
        }
      },
    },
    register(api: PluginApi): void {
      const log = api.logger ?? consoleLogger;
      const cliOptions = { commands: [CLI_GROUP], descriptors: [CLI_DESCRIPTOR] };
      let cfg: PluginConfig;
      try {
        cfg = resolveConfig(api.pluginConfig);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        registerDisabled(api, log, err.message, cliOptions, options);
        return;
      }
      // The registrar runs only when a `libravdb` command does: its link is made then.
      api.registerCli?.(({ program }) => registerMemoryCli(program, cliDeps(cfg, log, options.env)), cliOptions);
      if (api.registrationMode === "cli-metadata") return;
      const deps = pluginState(cfg, log, options); // lazy: no socket, file or timer yet
      api.registerContextEngine(ENGINE_ID, () => createEngine(deps));
      api.registerMemoryCapability?.(memoryCapability(deps));
      api.registerTool?.((ctx) => memoryTools(deps, ctx), { names: [SEARCH_TOOL, GET_TOOL] });
      if (!METADATA_MODES.has(api.registrationMode ?? "full")) {
        api.on?.("gateway_stop", async () => {
          await closeState(deps);
          shared.delete(JSON.stringify(cfg));
        });
      }
    },
  };
}

/** Memory off: the slots are taken, every surface says why (see disabled.ts). */
function registerDisabled(api: PluginApi, log: PluginLogger, reason: string, cliOptions: Parameters<NonNullable<PluginApi["registerCli"]>>[1], options: EntryOptions): void {
  api.registerCli?.(({ program }) => registerConfigErrorCli(program, `memory is off: ${reason}`), cliOptions);
  if (api.registrationMode === "cli-metadata") return;
  api.registerContextEngine(ENGINE_ID, () => createDisabledEngine(reason, log, options.delegateCompaction));
  api.registerMemoryCapability?.(disabledCapability(reason));
  api.registerTool?.(() => disabledTools(reason), { names: [SEARCH_TOOL, GET_TOOL] });
}

export { CLI_COMMANDS };
