// `openclaw memory ...`: status, search, forget, compact and export, each one daemon call.
import type { EngineDeps } from "./engine.js";
import type { CliCommand } from "./host-types.js";
import { durableNamespace, safeSessionId } from "./messages.js";

export interface CliIo {
  out: (text: string) => void;
  err: (text: string) => void;
  setExitCode: (code: number) => void;
}

const processIo: CliIo = {
  out: (t) => process.stdout.write(t.endsWith("\n") ? t : `${t}\n`),
  err: (t) => process.stderr.write(t.endsWith("\n") ? t : `${t}\n`),
  setExitCode: (c) => {
    process.exitCode = c;
  },
};

interface NsOptions {
  userId?: string;
  sessionKey?: string;
  namespace?: string;
}

/** The namespace a command names: --namespace, else --user-id, else --session-key. */
function namespaceOption(deps: EngineDeps, opts: NsOptions): string | null {
  if (opts.namespace?.trim()) return opts.namespace.trim();
  if (!opts.userId?.trim() && !opts.sessionKey?.trim() && !deps.cfg.namespace.trim()) return null;
  return durableNamespace(deps.cfg.namespace, { userId: opts.userId, sessionKey: opts.sessionKey, sessionId: "" });
}

function failure(io: CliIo, err: unknown): void {
  io.err(`libravdb: ${err instanceof Error ? err.message.split("\n")[0] : String(err)}`);
  io.setExitCode(1);
}

export const CLI_COMMANDS = ["status", "search", "forget", "compact", "export"] as const;

export async function runStatus(deps: EngineDeps, io: CliIo, json: boolean): Promise<void> {
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
    ];
    io.out(rows.map(([k, v]) => `${k.padEnd(24)} ${String(v)}`).join("\n"));
    if (!s.ok) io.setExitCode(1);
  } catch (err) {
    io.out(`${"daemon".padEnd(24)} down (${err instanceof Error ? err.message.split("\n")[0] : String(err)})`);
    io.setExitCode(1);
  }
}

export async function runSearch(deps: EngineDeps, io: CliIo, query: string, opts: NsOptions & { limit?: string; json?: boolean }): Promise<void> {
  const ns = namespaceOption(deps, opts);
  if (!ns) return failure(io, new Error("name whose memory to search: --user-id, --session-key or --namespace"));
  const limit = opts.limit === undefined ? undefined : Number(opts.limit);
  if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > 200)) return failure(io, new Error("--limit must be an integer in 1..200"));
  try {
    const out = await deps.link.call("search", { query, namespace: ns, k: limit ?? deps.cfg.searchResults }, deps.cfg.callTimeoutMs);
    const hits = out.hits ?? [];
    if (opts.json) return io.out(JSON.stringify(hits, null, 2));
    if (!hits.length) return io.out("no memories matched");
    io.out(hits.map((h, i) => `${i + 1}. ${h.score.toFixed(3)} [${h.kind} ${h.collection}] ${h.text}`).join("\n"));
  } catch (err) {
    failure(io, err);
  }
}

export async function runForget(deps: EngineDeps, io: CliIo, opts: NsOptions & { includeSessions?: boolean; yes?: boolean }): Promise<void> {
  const ns = namespaceOption(deps, opts);
  if (!ns) return failure(io, new Error("name whose memory to forget: --user-id, --session-key or --namespace"));
  if (!opts.yes) return failure(io, new Error(`this deletes the memory of ${JSON.stringify(ns)}; add --yes to confirm`));
  try {
    const out = await deps.link.call("forget", { namespace: ns, includeSessions: opts.includeSessions === true }, deps.cfg.compactTimeoutMs);
    io.out(`forgot ${out.deleted} record(s) of ${JSON.stringify(ns)}`);
  } catch (err) {
    failure(io, err);
  }
}

export async function runCompact(deps: EngineDeps, io: CliIo, sessionId: string, opts: { force?: boolean }): Promise<void> {
  try {
    const out = await deps.link.call("compact", { sessionId: safeSessionId(sessionId), force: opts.force === true }, deps.cfg.compactTimeoutMs, {
      onProgress: (p) => io.err(`  ${p.done}${p.total ? `/${p.total}` : ""} ${p.message ?? ""}`),
    });
    io.out(out.didCompact ? `compacted: ${out.turnsCovered} turn(s) into ${out.summaryIds?.length ?? 0} summary(ies) (${out.summaryMethod})` : "nothing to compact outside the recent tail");
  } catch (err) {
    failure(io, err);
  }
}

export async function runExport(deps: EngineDeps, io: CliIo, opts: NsOptions): Promise<void> {
  const ns = namespaceOption(deps, opts);
  try {
    const out = await deps.link.call("export_memory", ns ? { namespace: ns } : {}, deps.cfg.compactTimeoutMs);
    for (const record of out.records ?? []) io.out(JSON.stringify(record));
  } catch (err) {
    failure(io, err);
  }
}

/** The command group: `openclaw memory libravdb ...` (the host's own memory-core owns `openclaw memory`). */
export const CLI_GROUP = "libravdb";
export const CLI_PARENT = ["memory"] as const;
export const CLI_DESCRIPTION = "LibraVDB memory: status, search, forget, compact, export";

/** Adds `libravdb <status|search|forget|compact|export>` under `parent` (the host's `memory` command). */
export function registerMemoryCli(parent: CliCommand, deps: EngineDeps, io: CliIo = processIo): void {
  const memory = parent.command(CLI_GROUP).description(CLI_DESCRIPTION);
  const ns = (cmd: CliCommand): CliCommand =>
    cmd.option("--user-id <id>", "the user whose memory").option("--session-key <key>", "the session key whose memory").option("--namespace <ns>", "the namespace, verbatim");
  memory
    .command("status")
    .description("is the daemon up, and what does it hold")
    .option("--json", "print the daemon's status as JSON")
    .action(async (...args: unknown[]) => runStatus(deps, io, Boolean((args[0] as { json?: boolean })?.json)));
  ns(memory.command("search").description("search the memory of a user or session").argument("<query>", "what to look for"))
    .option("--limit <n>", "how many hits")
    .option("--json", "print the hits as JSON")
    .action(async (...args: unknown[]) => runSearch(deps, io, String(args[0]), (args[1] ?? {}) as NsOptions & { limit?: string; json?: boolean }));
  ns(memory.command("forget").description("delete the memory of a user or session key"))
    .option("--include-sessions", "also delete the sessions' raw history and summaries")
    .option("--yes", "confirm the deletion")
    .action(async (...args: unknown[]) => runForget(deps, io, (args[0] ?? {}) as NsOptions & { includeSessions?: boolean; yes?: boolean }));
  memory
    .command("compact")
    .description("compact one session's history into summaries now")
    .argument("<sessionId>", "the session")
    .option("--force", "compact even below the usual threshold")
    .action(async (...args: unknown[]) => runCompact(deps, io, String(args[0]), (args[1] ?? {}) as { force?: boolean }));
  ns(memory.command("export").description("write memory as NDJSON on stdout (one namespace, or all)")).action(async (...args: unknown[]) =>
    runExport(deps, io, (args[0] ?? {}) as NsOptions),
  );
}
