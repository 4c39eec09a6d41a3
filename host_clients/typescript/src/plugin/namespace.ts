// The durable namespace of a session: whose memory a turn reads and extends. Sessions with
// the same namespace share one memory; the daemon keeps each session in the namespace of
// its first turn.
import type { NamespaceRule } from "./config.js";
import { safeName } from "./messages.js";

/** What the host tells about a session; any of it may be missing. */
export interface SessionScope {
  sessionId?: unknown;
  sessionKey?: unknown;
  userId?: unknown;
  agentId?: unknown;
  /** The host's storage-neutral session target (carries the owning agent). */
  sessionTarget?: unknown;
  runtimeContext?: unknown;
}

/** OpenClaw's default agent: the owner of sessions that name none. */
export const DEFAULT_AGENT_ID = "main";

function text(value: unknown): string {
  return typeof value === "string" ? value.trim() : "";
}

function targetAgent(target: unknown): string {
  return target && typeof target === "object" ? text((target as { agentId?: unknown }).agentId) : "";
}

/**
 * The agent a session belongs to: the host's explicit agent id (params, session target),
 * else the `<agentId>` of an `agent:<agentId>:<rest>` session key, lowercased as OpenClaw
 * normalizes agent ids; null when nothing names one.
 */
export function agentIdOf(scope: SessionScope): string | null {
  const runtimeTarget = scope.runtimeContext && typeof scope.runtimeContext === "object" ? (scope.runtimeContext as { sessionTarget?: unknown }).sessionTarget : undefined;
  const explicit = text(scope.agentId) || targetAgent(scope.sessionTarget) || targetAgent(runtimeTarget);
  if (explicit) return explicit.toLowerCase();
  const m = /^agent:([^:]+):[^:]/i.exec(text(scope.sessionKey));
  return m?.[1]?.trim() ? m[1].trim().toLowerCase() : null;
}

/** The agent rule: one memory per agent, `agent:<agentId>` (the default agent when none is named). */
export function agentNamespace(agentId: string | null): string {
  return safeName(`agent:${agentId || DEFAULT_AGENT_ID}`);
}

/**
 * The v1 rule (the reference plugin's, and this plugin's before 0.2): `userId`, else
 * `session-key:<sessionKey>`, else `session:<sessionId>`.
 */
export function v1Namespace(scope: SessionScope): string {
  const userId = text(scope.userId);
  if (userId) return safeName(userId);
  const key = text(scope.sessionKey);
  if (key) return safeName(`session-key:${key}`);
  const sid = text(scope.sessionId);
  return safeName(sid ? `session:${sid}` : "default");
}

export interface NamespaceConfig {
  namespace: string;
  namespaceRule: NamespaceRule;
}

/** The configured namespace, else the one the configured rule derives. */
export function durableNamespace(cfg: NamespaceConfig, scope: SessionScope): string {
  if (cfg.namespace.trim()) return safeName(cfg.namespace.trim());
  return cfg.namespaceRule === "v1" ? v1Namespace(scope) : agentNamespace(agentIdOf(scope));
}
