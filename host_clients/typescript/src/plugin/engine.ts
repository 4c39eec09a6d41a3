// The OpenClaw context engine: every method is one daemon call (or none). The daemon
// ranks, budgets, windows, compacts and renders; this file only translates, gives every
// call its deadline, and degrades to the host's own messages when the daemon is away.
import { NotFound } from "../client/errors.js";
import type { IngestParams } from "../generated/protocol.js";
import type { TurnCommits } from "./commits.js";
import type { PluginConfig } from "./config.js";
import { inOwnNamespace, type DaemonLink } from "./daemon.js";
import type {
  AgentMessage,
  AssembleParams,
  AssembleResult,
  CommitTurnParams,
  CompactParams,
  CompactResult,
  ContextEngine,
  ContextEngineInfo,
  PluginLogger,
  SessionParams,
} from "./host-types.js";
import { estimateTokens, safeSessionId, toIngestMessages } from "./messages.js";
import { durableNamespace, type SessionScope } from "./namespace.js";

export const ENGINE_ID = "libravdb-memory";
export const ENGINE_NAME = "LibraVDB Memory";
export const ENGINE_VERSION = "0.2.0";
/** The host calls assemble and commitTurn only for an engine that declares these. */
export const TRANSCRIPT_SEMANTICS = {
  currentTurnFence: "before-current-turn-entry-v1",
  turnAdvancementIdempotency: "atomic-idempotent-v1",
} as const;

/** State shared by every engine instance of the plugin (the host builds one per turn). */
export interface EngineDeps {
  cfg: PluginConfig;
  link: DaemonLink;
  /** Turn commits, and the outbox where the ones the daemon could not take wait. */
  commits: TurnCommits;
  log: PluginLogger;
  /** Forked subagents: child session key -> the parent's namespace. */
  forks: Map<string, string>;
  /** The host's own compaction, used while the daemon is away (SDK delegateCompactionToRuntime). */
  delegateCompaction?: (params: CompactParams) => Promise<CompactResult>;
}

/** The namespace of a session: a forked subagent shares its parent's. */
export function namespaceOf(deps: EngineDeps, params: SessionScope): string {
  const key = typeof params.sessionKey === "string" ? params.sessionKey : "";
  return (key && deps.forks.get(key)) || durableNamespace(deps.cfg, params);
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message.split("\n")[0] ?? err.name : String(err);
}

/**
 * A failure of one call: a warning, unless the link is down and has said so once for the
 * whole outage (a turn then prints that one line, not one per call).
 */
export function reportFailure(deps: Pick<EngineDeps, "link" | "log">, message: string): void {
  if (deps.link.degradedReason !== null) deps.log.debug?.(message);
  else deps.log.warn(message);
}

export function createEngine(deps: EngineDeps): ContextEngine {
  const { cfg, link } = deps;
  // The host reads `info` throughout the turn: own compaction only while the daemon can
  // do it, else the host's built-in compaction stays on. A getter, because the engine is
  // built before the first call of the turn tells whether the daemon answers.
  const info: ContextEngineInfo = {
    id: ENGINE_ID,
    name: ENGINE_NAME,
    version: ENGINE_VERSION,
    acceptedHostParams: ["sessionKey", "prompt"],
    transcriptSemantics: TRANSCRIPT_SEMANTICS,
    get ownsCompaction() {
      return link.degradedReason === null;
    },
    turnMaintenanceMode: "background",
  };

  const ingest = (params: IngestParams) => inOwnNamespace((p: IngestParams) => link.call("ingest", p, cfg.callTimeoutMs), params);

  async function store(params: SessionParams, messages: readonly AgentMessage[], what: string): Promise<number> {
    const items = toIngestMessages(messages);
    if (!items.length) return 0;
    try {
      const out = await ingest({ sessionId: safeSessionId(params.sessionId), namespace: namespaceOf(deps, params), messages: items });
      return out.ingested;
    } catch (err) {
      reportFailure(deps, `libravdb: ${what} not stored (${describe(err)})`);
      return 0;
    }
  }

  return {
    info,

    async bootstrap() {
      // Connecting here warms the link (no call when it is up already); history reaches
      // the daemon through commitTurn.
      if (link.healthy) return { bootstrapped: true, importedMessages: 0 };
      try {
        await link.call("health", {}, cfg.callTimeoutMs);
        return { bootstrapped: true, importedMessages: 0 };
      } catch (err) {
        return { bootstrapped: false, reason: `libravdbd unavailable: ${describe(err)}` };
      }
    },

    async maintain() {
      // Compaction runs in the daemon, never by rewriting the host's transcript.
      return { changed: false, bytesFreed: 0, rewrittenEntries: 0, reason: "libravdb compacts inside the daemon" };
    },

    async ingest(params) {
      if (params.isHeartbeat) return { ingested: false };
      return { ingested: (await store(params, [params.message], "message")) > 0 };
    },

    async ingestBatch(params) {
      if (params.isHeartbeat) return { ingestedCount: 0 };
      return { ingestedCount: await store(params, params.messages, "turn") };
    },

    async afterTurn(params) {
      // Hosts without commitTurn: the messages from the current prompt on are new.
      if (params.isHeartbeat) return;
      await store(params, params.messages.slice(Math.max(0, params.prePromptMessageCount - 1)), "turn");
    },

    async commitTurn(params: CommitTurnParams) {
      const request: IngestParams = {
        sessionId: safeSessionId(params.sessionId),
        namespace: namespaceOf(deps, params),
        messages: toIngestMessages(params.messages),
        advancementKey: params.advancementKey,
      };
      // The host takes "committed" as durable: a turn the daemon cannot take now waits on
      // disk, in order, and is sent when it can (the key makes a resend harmless).
      return { status: await deps.commits.commit(request) };
    },

    async assemble(params: AssembleParams): Promise<AssembleResult> {
      const messages = Array.isArray(params.messages) ? params.messages : [];
      const wire = messages.map((m) => {
        const [item] = toIngestMessages([m]);
        return item ? { role: item.role, content: item.content, id: item.id } : { role: String(m?.role ?? "unknown"), content: "" };
      });
      const request = {
        sessionId: safeSessionId(params.sessionId),
        namespace: namespaceOf(deps, params),
        tokenBudget: params.tokenBudget && params.tokenBudget > 0 ? params.tokenBudget : cfg.defaultTokenBudget,
        memoryBudgetFraction: cfg.memoryBudgetFraction,
        messages: wire,
        windowMessages: info.ownsCompaction === true,
        ...(typeof params.prompt === "string" && params.prompt.trim() ? { prompt: params.prompt } : {}),
      };
      try {
        const out = await inOwnNamespace((p) => link.call("assemble", p, cfg.assembleTimeoutMs), request);
        const start = out.windowStart ?? 0;
        const kept = start > 0 ? messages.slice(start) : messages;
        return {
          messages: kept,
          estimatedTokens: out.estimatedTokens,
          ...(out.systemPromptAddition ? { systemPromptAddition: out.systemPromptAddition } : {}),
        };
      } catch (err) {
        reportFailure(deps, `libravdb: assemble fell back to the host's messages (${describe(err)})`);
        return { messages, estimatedTokens: estimateTokens(messages) };
      }
    },

    async compact(params: CompactParams): Promise<CompactResult> {
      if (!info.ownsCompaction && deps.delegateCompaction) return deps.delegateCompaction(params);
      const tokensBefore = typeof params.currentTokenCount === "number" ? params.currentTokenCount : 0;
      try {
        const out = await link.call(
          "compact",
          { sessionId: safeSessionId(params.sessionId), force: params.force === true },
          cfg.compactTimeoutMs,
          params.abortSignal ? { signal: params.abortSignal } : {},
        );
        return {
          ok: true,
          compacted: out.didCompact,
          ...(out.didCompact ? {} : { reason: "nothing eligible outside the recent tail" }),
          result: { tokensBefore, details: { summaryIds: out.summaryIds, turnsCovered: out.turnsCovered, method: out.summaryMethod } },
        };
      } catch (err) {
        if (err instanceof NotFound) return { ok: true, compacted: false, reason: "nothing is stored for this session yet" };
        if (deps.delegateCompaction) return deps.delegateCompaction(params);
        return { ok: false, compacted: false, reason: `libravdbd unavailable: ${describe(err)}` };
      }
    },

    async prepareSubagentSpawn(params) {
      if (params.contextMode !== "fork") return undefined;
      // A fork sees and extends its parent's memory: it shares the parent's namespace.
      const parentNs = deps.forks.get(params.parentSessionKey) ?? durableNamespace(cfg, { sessionKey: params.parentSessionKey, sessionId: params.parentSessionId });
      deps.forks.set(params.childSessionKey, parentNs);
      return {
        rollback: () => {
          deps.forks.delete(params.childSessionKey);
        },
      };
    },

    async onSubagentEnded(params) {
      deps.forks.delete(params.childSessionKey);
    },

    async dispose() {
      // The daemon link is plugin-wide and outlives the turn's engine.
    },
  };
}
