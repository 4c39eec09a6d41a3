// `openclaw libravdb ...`: status, search, forget, compact and export. A root command of
// its own: OpenClaw's `memory` command belongs to memory-core, which the install disables
// (and which, enabled, takes the memory slot back), so a group under it would not exist.
import type { MemoryRecord } from "../generated/protocol.js";
import type { PluginConfig } from "./config.js";
import { DaemonLink } from "./daemon.js";
import type { CliCommand, CliDescriptor, PluginLogger } from "./host-types.js";
import { safeSessionId } from "./messages.js";
import { DEFAULT_AGENT_ID, agentNamespace, durableNamespace, v1Namespace } from "./namespace.js";

export interface CliIo {
  out: (text: string) => void;
  err: (text: string) => void;
  setExitCode: (code: number) => void;
}

export const processIo: CliIo = {
  out: (t) => process.stdout.write(t.endsWith("\n") ? t : `${t}\n`),
  err: (t) => process.stderr.write(t.endsWith("\n") ? t : `${t}\n`),
  setExitCode: (c) => {
    process.exitCode = c;
  },
};

export const CLI_GROUP = "libravdb";
export const CLI_DESCRIPTION = "LibraVDB memory: status, search, forget, compact, export";
export const CLI_COMMANDS = ["status", "search", "forget", "compact", "export"] as const;
/** The root command, as the manifest's cliCommands and registerCli's descriptors declare it. */
export const CLI_DESCRIPTOR: CliDescriptor = { name: CLI_GROUP, description: CLI_DESCRIPTION, hasSubcommands: true };

/** What the commands use: the config and a daemon link of their own. */
export interface CliDeps {
  cfg: PluginConfig;
  link: DaemonLink;
}

/**
 * The commands' link: it may start the daemon (and says so), but its outage warning is
 * left out, since every command reports its own failure on its own output.
 */
export function cliDeps(cfg: PluginConfig, log: PluginLogger, env?: NodeJS.ProcessEnv): CliDeps {
  const quiet: PluginLogger = { info: (m) => log.info(m), warn: (m) => log.debug?.(m), error: (m) => log.error(m) };
  return { cfg, link: new DaemonLink(cfg, quiet, env) };
}

export interface NsOptions {
  namespace?: string;
  agent?: string;
  sessionKey?: string;
  userId?: string;
}

/**
 * The namespace a command names: --namespace verbatim; --agent, that agent's (`agent:<id>`);
 * --session-key, the one the configured rule gives that session; --user-id, the v1
 * namespace of that user; else the configured namespace, else under the agent rule the
 * default agent's. Null when nothing names one (the v1 rule has no default).
 */
export function namespaceOption(deps: Pick<CliDeps, "cfg">, opts: NsOptions): string | null {
  const cfg = deps.cfg;
  if (opts.namespace?.trim()) return opts.namespace.trim();
  if (opts.agent?.trim()) return agentNamespace(opts.agent.trim().toLowerCase());
  if (opts.sessionKey?.trim()) return durableNamespace(cfg, { sessionKey: opts.sessionKey.trim() });
  if (opts.userId?.trim()) return v1Namespace({ userId: opts.userId });
  if (cfg.namespace.trim() || cfg.namespaceRule === "agent") return durableNamespace(cfg, { agentId: DEFAULT_AGENT_ID });
  return null;
}

const NAMING = "--namespace, --agent, --session-key or --user-id";

function failure(io: CliIo, err: unknown): void {
  io.err(`libravdb: ${err instanceof Error ? err.message.split("\n")[0] : String(err)}`);
  io.setExitCode(1);
}

/** How sessions are keyed, said in one line (status). */
function ruleLine(deps: Pick<CliDeps, "cfg">): string {
  if (deps.cfg.namespace.trim()) return `every session shares ${JSON.stringify(deps.cfg.namespace.trim())} (namespace)`;
  if (deps.cfg.namespaceRule === "v1") return "v1: userId, else session-key:<sessionKey>, else session:<sessionId>";
  return `agent: one memory per agent, agent:<agentId> (the default agent's is ${agentNamespace(DEFAULT_AGENT_ID)})`;
}

export async function runStatus(deps: CliDeps, io: CliIo, json: boolean): Promise<void> {
  try {
    const s = await deps.link.call("status", {}, deps.cfg.callTimeoutMs);
    if (json) return io.out(JSON.stringify(s, null, 2));
    const rows: [string, unknown][] = [
      ["daemon", s.ok ? "running" : `unhealthy: ${s.message}`],
      ["endpoint", s.endpoint ?? ""],
      ["version", s.version ?? ""],
      ["data dir", s.dataDir ?? ""],
      ["turns stored", s.turnCount ?? 0],
      ["memories stored", s.memoryCount ?? 0],
      ["embedding profile", s.embeddingProfile ?? ""],
      ["abstractive summarizer", s.abstractiveReady ? "ready" : "extractive only"],
      ["uptime", `${Math.round(s.uptimeS ?? 0)} s`],
      ["namespaces", ruleLine(deps)],
    ];
    io.out(rows.map(([k, v]) => `${k.padEnd(24)} ${String(v)}`).join("\n"));
    if (!s.ok) io.setExitCode(1);
  } catch (err) {
    io.out(`${"daemon".padEnd(24)} down (${err instanceof Error ? err.message.split("\n")[0] : String(err)})`);
    io.setExitCode(1);
  }
}

export async function runSearch(deps: CliDeps, io: CliIo, query: string, opts: NsOptions & { limit?: string; json?: boolean }): Promise<void> {
  const ns = namespaceOption(deps, opts);
  if (!ns) return failure(io, new Error(`name whose memory to search: ${NAMING}`));
  const limit = opts.limit === undefined ? undefined : Number(opts.limit);
  if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > 200)) return failure(io, new Error("--limit must be an integer in 1..200"));
  try {
    const out = await deps.link.call("search", { query, namespace: ns, k: limit ?? deps.cfg.searchResults }, deps.cfg.callTimeoutMs);
    const hits = out.hits ?? [];
    if (opts.json) return io.out(JSON.stringify(hits, null, 2));
    if (!hits.length) return io.out(`no memories of ${JSON.stringify(ns)} matched`);
    io.out(hits.map((h, i) => `${i + 1}. ${h.score.toFixed(3)} [${h.kind} ${h.collection}] ${h.text}`).join("\n"));
  } catch (err) {
    failure(io, err);
  }
}

export async function runForget(deps: CliDeps, io: CliIo, opts: NsOptions & { includeSessions?: boolean; yes?: boolean }): Promise<void> {
  const ns = namespaceOption(deps, opts);
  if (!ns) return failure(io, new Error(`name whose memory to forget: ${NAMING}`));
  if (!opts.yes) return failure(io, new Error(`this deletes the memory of ${JSON.stringify(ns)}; add --yes to confirm`));
  try {
    const out = await deps.link.call("forget", { namespace: ns, includeSessions: opts.includeSessions === true }, deps.cfg.compactTimeoutMs);
    io.out(`forgot ${out.deleted} record(s) of ${JSON.stringify(ns)}`);
  } catch (err) {
    failure(io, err);
  }
}

export async function runCompact(deps: CliDeps, io: CliIo, sessionId: string, opts: { force?: boolean }): Promise<void> {
  try {
    const out = await deps.link.call("compact", { sessionId: safeSessionId(sessionId), force: opts.force === true }, deps.cfg.compactTimeoutMs, {
      onProgress: (p) => io.err(`  ${p.done}${p.total ? `/${p.total}` : ""} ${p.message ?? ""}`),
    });
    io.out(out.didCompact ? `compacted: ${out.turnsCovered} turn(s) into ${out.summaryIds?.length ?? 0} summary(ies) (${out.summaryMethod})` : "nothing to compact outside the recent tail");
  } catch (err) {
    failure(io, err);
  }
}

/**
 * Everything a namespace's memory holds, by memory.list's scopes: `durable` (facts kept,
 * superseded versions included), `history` (every user and assistant turn of its
 * sessions), `summary` (compaction summaries), `elevated` (guidance) and `dream`.
 */
export const EXPORT_SCOPES = ["durable", "history", "summary", "elevated", "dream"] as const;
type Scope = (typeof EXPORT_SCOPES)[number];

async function exportScope(deps: CliDeps, io: CliIo, namespace: string, scope: Scope): Promise<number> {
  let count = 0;
  let cursor = "";
  do {
    const page = await deps.link.call(
      "memory.list",
      { namespace, scope, limit: 500, includeSuperseded: true, ...(cursor ? { cursor } : {}) },
      deps.cfg.compactTimeoutMs,
    );
    for (const record of page.records as MemoryRecord[]) io.out(JSON.stringify({ namespace, scope, ...record }));
    count += page.records.length;
    cursor = page.nextCursor;
  } while (cursor);
  return count;
}

async function exportNamespace(deps: CliDeps, io: CliIo, namespace: string): Promise<void> {
  const counts: string[] = [];
  let total = 0;
  for (const scope of EXPORT_SCOPES) {
    const n = await exportScope(deps, io, namespace, scope);
    counts.push(`${scope} ${n}`);
    total += n;
  }
  io.err(`exported ${total} record(s) of ${JSON.stringify(namespace)}: ${counts.join(", ")}`);
}

export async function runExport(deps: CliDeps, io: CliIo, opts: NsOptions & { all?: boolean }): Promise<void> {
  try {
    if (opts.all) {
      const stats = await deps.link.call("memory.stats", {}, deps.cfg.compactTimeoutMs);
      for (const entry of stats.namespaces) await exportNamespace(deps, io, entry.namespace);
      return;
    }
    const ns = namespaceOption(deps, opts);
    if (!ns) return failure(io, new Error(`name whose memory to export: ${NAMING}, or --all`));
    await exportNamespace(deps, io, ns);
  } catch (err) {
    failure(io, err);
  }
}

const options = (args: unknown[], at: number): Record<string, unknown> => (args[at] ?? {}) as Record<string, unknown>;

/** Adds `libravdb <status|search|forget|compact|export>` to the host's root `program`. */
export function registerMemoryCli(program: CliCommand, deps: CliDeps, io: CliIo = processIo): void {
  // One command per process: its connection closes when it is done, so nothing holds the
  // process open after the command.
  const run =
    (command: (...args: unknown[]) => Promise<void>) =>
    async (...args: unknown[]): Promise<void> => {
      try {
        await command(...args);
      } finally {
        await deps.link.close();
      }
    };
  const group = program.command(CLI_GROUP).description(CLI_DESCRIPTION);
  const ns = (cmd: CliCommand): CliCommand =>
    cmd
      .option("--agent <id>", `an agent's memory (agent:<id>; default: ${DEFAULT_AGENT_ID} under the agent rule)`)
      .option("--namespace <ns>", "a namespace, verbatim")
      .option("--session-key <key>", "the memory of the session with this key")
      .option("--user-id <id>", "a user's memory under the v1 rule");
  group
    .command("status")
    .description("is the daemon up, what does it hold, and how sessions share memory")
    .option("--json", "print the daemon's status as JSON")
    .action(run(async (...args: unknown[]) => runStatus(deps, io, Boolean(options(args, 0)["json"]))));
  ns(group.command("search").description("search a memory").argument("<query>", "what to look for"))
    .option("--limit <n>", "how many hits")
    .option("--json", "print the hits as JSON")
    .action(run(async (...args: unknown[]) => runSearch(deps, io, String(args[0]), options(args, 1) as NsOptions & { limit?: string; json?: boolean })));
  ns(group.command("forget").description("delete a memory"))
    .option("--include-sessions", "also delete its sessions' raw history and summaries")
    .option("--yes", "confirm the deletion")
    .action(run(async (...args: unknown[]) => runForget(deps, io, options(args, 0) as NsOptions & { includeSessions?: boolean; yes?: boolean })));
  group
    .command("compact")
    .description("compact one session's history into summaries now")
    .argument("<sessionId>", "the session")
    .option("--force", "compact even below the usual threshold")
    .action(run(async (...args: unknown[]) => runCompact(deps, io, String(args[0]), options(args, 1) as { force?: boolean })));
  ns(group.command("export").description("write a memory as NDJSON on stdout: durable facts, history, summaries, guidance, dreams"))
    .option("--all", "every namespace the daemon holds")
    .action(run(async (...args: unknown[]) => runExport(deps, io, options(args, 0) as NsOptions & { all?: boolean })));
}

/** The same command group when the config is unusable: every command says why, and fails. */
export function registerConfigErrorCli(program: CliCommand, reason: string, io: CliIo = processIo): void {
  const group = program.command(CLI_GROUP).description(`${CLI_DESCRIPTION} (off: the plugin config is invalid)`);
  group.allowUnknownOption?.(true);
  group.allowExcessArguments?.(true);
  group.argument("[command...]", CLI_COMMANDS.join(", ")).action(() => failure(io, new Error(reason)));
}
