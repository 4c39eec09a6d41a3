// A recording stand-in for the OpenClaw plugin API: it keeps what register() registers so
// a test can drive the engine, tools, memory runtime and CLI the way the host does. (The
// real host runs in the e2e suite; it needs Node >= 24.16.)
import { buildPluginDefinition, closeAll } from "../src/plugin/entry.js";
import type { AgentTool, CliCommand, ContextEngine, MemoryPluginCapability, PluginApi, ToolContext } from "../src/plugin/host-types.js";
import { RecordingLogger } from "./support.js";

export interface Registered {
  engines: Map<string, () => ContextEngine | Promise<ContextEngine>>;
  capability: MemoryPluginCapability | null;
  toolFactories: ((ctx: ToolContext) => AgentTool | AgentTool[] | null | undefined)[];
  cli: ((ctx: { program: CliCommand }) => void | Promise<void>)[];
  cliOptions: unknown[];
  hooks: Map<string, ((...args: unknown[]) => unknown)[]>;
  log: RecordingLogger;
}

export function register(config: unknown, registrationMode = "full"): Registered {
  const reg: Registered = { engines: new Map(), capability: null, toolFactories: [], cli: [], cliOptions: [], hooks: new Map(), log: new RecordingLogger() };
  const api: PluginApi = {
    pluginConfig: config,
    registrationMode,
    logger: reg.log,
    registerContextEngine: (id, factory) => void reg.engines.set(id, factory),
    registerMemoryCapability: (c) => void (reg.capability = c),
    registerTool: (tool) => void reg.toolFactories.push(typeof tool === "function" ? tool : () => tool),
    registerCli: (registrar, opts) => {
      reg.cli.push(registrar);
      reg.cliOptions.push(opts);
    },
    on: (event, handler) => void reg.hooks.set(event, [...(reg.hooks.get(event) ?? []), handler]),
  };
  buildPluginDefinition().register(api);
  return reg;
}

export async function engine(reg: Registered): Promise<ContextEngine> {
  const factory = reg.engines.get("libravdb-memory");
  if (!factory) throw new Error("no engine registered");
  return await factory();
}

export function tools(reg: Registered, ctx: ToolContext): Map<string, AgentTool> {
  const out = new Map<string, AgentTool>();
  for (const f of reg.toolFactories) {
    const made = f(ctx);
    for (const t of Array.isArray(made) ? made : made ? [made] : []) out.set(t.name, t);
  }
  return out;
}

export { closeAll };
