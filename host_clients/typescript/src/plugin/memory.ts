// The memory slot: the `memory_search` / `memory_get` tools, the memory runtime the host's
// own memory surfaces use (status, search, hit authorization, workspace file provenance),
// and the prompt section that tells the model the tools exist. The searches are daemon
// `search` and `memory.get`.
import { NotFound } from "../client/errors.js";
import type { MemoryGetResult, SearchHitOut } from "../generated/protocol.js";
import type { EngineDeps } from "./engine.js";
import { namespaceOf } from "./engine.js";
import { durableNamespace } from "./namespace.js";
import { classifyWorkspaceMemoryPaths } from "./provenance.js";
import type {
  AgentTool,
  MemoryPluginCapability,
  MemoryReadResult,
  MemorySearchManager,
  MemorySearchResult,
  ToolContext,
} from "./host-types.js";

export const SEARCH_TOOL = "memory_search";
export const GET_TOOL = "memory_get";

/** A hit's path: `libravdb:<collection>#<id>`, read back by memory_get. */
export function hitPath(collection: string, id: string): string {
  return `libravdb:${encodeURIComponent(collection)}#${encodeURIComponent(id)}`;
}

export function parseHitPath(path: string): { collection: string; id: string } | null {
  const m = /^libravdb:([^#]+)#(.+)$/.exec(path.trim());
  if (!m || !m[1] || !m[2]) return null;
  try {
    return { collection: decodeURIComponent(m[1]), id: decodeURIComponent(m[2]) };
  } catch {
    return null;
  }
}

const SHARED = new Set(["global", "authored:hard", "authored:soft", "authored:variant"]);

/** Whether a collection belongs to namespace `ns` or is shared by all. */
export function visibleTo(ns: string, collection: string): boolean {
  if (SHARED.has(collection)) return true;
  return [`turns:${ns}`, `user:${ns}`, `dream:${ns}`, `elevated:user:${ns}`].includes(collection);
}

function isSessionCollection(collection: string): boolean {
  return collection.startsWith("session");
}

function toResult(hit: SearchHitOut): MemorySearchResult {
  const lines = hit.text.split("\n").length;
  const when = hit.ts ? new Date(hit.ts).toISOString().slice(0, 10) : "";
  return {
    path: hitPath(hit.collection, hit.id),
    startLine: 1,
    endLine: lines,
    score: hit.score,
    snippet: hit.text,
    source: isSessionCollection(hit.collection) || hit.kind === "turn" ? "sessions" : "memory",
    citation: `${hit.role || hit.kind}${when ? ` ${when}` : ""} (${hit.collection})`,
  };
}

interface Scope {
  sessionKey?: string;
  sessionId?: string;
  agentId?: string;
}

function scopeParams(deps: EngineDeps, scope: Scope): { namespace: string } {
  // An agent with no session named: its main session (what the v1 rule keys by).
  const sessionKey = scope.sessionKey ?? (scope.agentId ? `agent:${scope.agentId}:main` : undefined);
  return {
    namespace: namespaceOf(deps, { sessionId: scope.sessionId ?? "", ...(sessionKey ? { sessionKey } : {}), ...(scope.agentId ? { agentId: scope.agentId } : {}) }),
  };
}

export async function searchMemory(deps: EngineDeps, query: string, scope: Scope, maxResults?: number): Promise<MemorySearchResult[]> {
  if (!query.trim()) return [];
  const k = Math.max(1, Math.min(200, Math.trunc(maxResults ?? deps.cfg.searchResults)));
  const out = await deps.link.call("search", { query, k, ...scopeParams(deps, scope) }, deps.cfg.callTimeoutMs);
  return (out.hits ?? []).map(toResult);
}

export async function readMemory(deps: EngineDeps, path: string, scope: Scope, from = 1, lines?: number): Promise<MemoryReadResult> {
  const ref = parseHitPath(path);
  if (!ref) return { status: "not_found", text: "", path };
  let got: MemoryGetResult;
  try {
    got = await deps.link.call("memory.get", { collection: ref.collection, id: ref.id, ...scopeParams(deps, scope) }, deps.cfg.callTimeoutMs);
  } catch (err) {
    if (err instanceof NotFound) return { status: "not_found", text: "", path };
    throw err;
  }
  const all = got.record.text.split("\n");
  const start = Math.max(1, Math.trunc(from));
  const count = lines && lines > 0 ? Math.trunc(lines) : all.length;
  const slice = all.slice(start - 1, start - 1 + count);
  const next = start - 1 + count < all.length ? start + count : undefined;
  return { status: "ok", text: slice.join("\n"), path, from: start, lines: slice.length, ...(next ? { truncated: true, nextFrom: next } : {}) };
}

function textResult(text: string, details?: unknown) {
  return { content: [{ type: "text" as const, text }], ...(details === undefined ? {} : { details }) };
}

function errorText(err: unknown): string {
  return `memory is unavailable right now (${err instanceof Error ? err.message.split("\n")[0] : String(err)})`;
}

/** memory_search and memory_get, bound to the calling session's namespace. */
export function memoryTools(deps: EngineDeps, ctx: ToolContext): AgentTool[] {
  const scope: Scope = {
    ...(typeof ctx.sessionKey === "string" ? { sessionKey: ctx.sessionKey } : {}),
    ...(typeof ctx.sessionId === "string" ? { sessionId: ctx.sessionId } : {}),
    ...(typeof ctx.agentId === "string" ? { agentId: ctx.agentId } : {}),
  };
  const search: AgentTool = {
    name: SEARCH_TOOL,
    label: "Memory search",
    description:
      "Search long-term memory: what the user said in earlier conversations, facts kept about them, and summaries of older parts of this conversation. Returns the best matches with a path to read one in full with memory_get.",
    parameters: {
      type: "object",
      additionalProperties: false,
      required: ["query"],
      properties: {
        query: { type: "string", description: "What to look for, in plain words." },
        maxResults: { type: "integer", minimum: 1, maximum: 50, description: "How many matches to return (default 8)." },
      },
    },
    async execute(_id, params) {
      const query = typeof params["query"] === "string" ? params["query"] : "";
      if (!query.trim()) return textResult("query is required");
      const max = typeof params["maxResults"] === "number" ? params["maxResults"] : undefined;
      try {
        const hits = await searchMemory(deps, query, scope, max);
        if (!hits.length) return textResult("No memories matched.", { results: [] });
        const body = hits.map((h, i) => `${i + 1}. [${h.citation}] ${h.snippet}\n   path: ${h.path}`).join("\n");
        return textResult(body, { results: hits });
      } catch (err) {
        return textResult(errorText(err));
      }
    },
  };
  const get: AgentTool = {
    name: GET_TOOL,
    label: "Memory get",
    description: "Read one memory in full by the path memory_search returned.",
    parameters: {
      type: "object",
      additionalProperties: false,
      required: ["path"],
      properties: {
        path: { type: "string", description: "The path of a memory_search result (libravdb:...)." },
        from: { type: "integer", minimum: 1, description: "First line to read (default 1)." },
        lines: { type: "integer", minimum: 1, description: "How many lines to read (default all)." },
      },
    },
    async execute(_id, params) {
      const path = typeof params["path"] === "string" ? params["path"] : "";
      try {
        const from = typeof params["from"] === "number" ? params["from"] : 1;
        const lines = typeof params["lines"] === "number" ? params["lines"] : undefined;
        const read = await readMemory(deps, path, scope, from, lines);
        if (read.status === "not_found") return textResult(`No memory at ${JSON.stringify(path)}.`, read);
        return textResult(read.text, read);
      } catch (err) {
        return textResult(errorText(err));
      }
    },
  };
  return [search, get];
}

function manager(deps: EngineDeps, agentId: string): MemorySearchManager {
  const scope: Scope = { agentId };
  return {
    search: (query, opts) => searchMemory(deps, query, opts?.sessionKey ? { sessionKey: opts.sessionKey, agentId } : scope, opts?.maxResults),
    readFile: (params) => readMemory(deps, params.relPath, scope, params.from, params.lines),
    status: () => ({
      backend: "builtin",
      provider: "libravdb",
      custom: { endpoint: deps.link.endpoint, healthy: deps.link.healthy, degraded: deps.link.degradedReason },
    }),
    probeEmbeddingAvailability: async () => {
      try {
        const health = await deps.link.call("health", {}, deps.cfg.callTimeoutMs);
        return health.ok ? { ok: true } : { ok: false, error: health.message };
      } catch (err) {
        return { ok: false, error: errorText(err) };
      }
    },
    probeVectorAvailability: async () => {
      try {
        return (await deps.link.call("health", {}, deps.cfg.callTimeoutMs)).ok;
      } catch {
        return false;
      }
    },
    close: async () => undefined,
  };
}

export function memoryCapability(deps: EngineDeps): MemoryPluginCapability {
  return {
    promptBuilder: ({ availableTools }) => {
      if (!availableTools.has(SEARCH_TOOL)) return [];
      const lines = [
        "## Memory",
        "Relevant memories of earlier conversations are added to your context automatically.",
        `When you need something that is not there, call ${SEARCH_TOOL}${availableTools.has(GET_TOOL) ? ` and read a hit in full with ${GET_TOOL}` : ""}.`,
        "",
      ];
      return lines;
    },
    runtime: {
      getMemorySearchManager: async ({ agentId }) => ({ manager: manager(deps, agentId) }),
      resolveMemoryBackendConfig: () => ({ backend: "builtin" }),
      // A requester sees the hits of its own namespace and the shared collections
      // (global, authored rules); anything else is withheld, as the host does by default.
      authorizeSearchHits: async ({ hits, requesterSessionKey, agentId }) => {
        // The requester's own namespace: its session's (a fork's is its parent's), else the agent's.
        const ns = requesterSessionKey ? namespaceOf(deps, { sessionId: "", sessionKey: requesterSessionKey }) : durableNamespace(deps.cfg, { agentId });
        return hits.filter((hit) => {
          const ref = parseHitPath(hit.path);
          return ref !== null && visibleTo(ns, ref.collection);
        });
      },
      supportsWorkspaceMemoryReadSources: true,
      classifyWorkspaceMemoryPaths: (params) => classifyWorkspaceMemoryPaths(deps.cfg.workspaceMemoryFiles, params),
      closeAllMemorySearchManagers: async () => undefined,
    },
  };
}
