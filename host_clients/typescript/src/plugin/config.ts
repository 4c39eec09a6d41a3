import { homedir } from "node:os";
import { join } from "node:path";

// The plugin's configuration (plugins.entries["libravdb-memory"].config). Every key read
// here is in openclaw.plugin.json's configSchema, and a test keeps the two equal.

export interface PluginConfig {
  /** `auto` (LIBRAVDB_RPC_ENDPOINT, else ~/.clawdb/run/libravdb.sock), `unix:/path` or `tcp:host:port`. */
  endpoint: string;
  /** Start the daemon when nothing answers at a unix endpoint. */
  spawnDaemon: boolean;
  /** The daemon command (argv); `serve --socket <path>` is appended. */
  daemonCommand: string[];
  /** `--data-dir` for a daemon the plugin starts ("" = the daemon's default). */
  dataDir: string;
  /** File the started daemon's JSON logs are appended to ("" = discarded). */
  daemonLogFile: string;
  /** File holding the daemon's auth token ("" = none). */
  authTokenFile: string;
  /** Fixed durable namespace for every session ("" = derive it by `namespaceRule`). */
  namespace: string;
  /**
   * How a session's durable namespace is derived when `namespace` is empty: `agent`, one
   * memory per OpenClaw agent (`agent:<agentId>`); `v1`, the rule of the reference plugin
   * and of this plugin before 0.2 (`userId`, else `session-key:<sessionKey>`, else
   * `session:<sessionId>`), for installs that upgrade with memories stored under it.
   */
  namespaceRule: NamespaceRule;
  /**
   * Whether the workspace's MEMORY.md and USER.md may enter the automatic context:
   * `exclude` classifies them untrusted (the plugin cannot see who wrote them), `include`
   * classifies them as the agent's own, as OpenClaw's memory-core does for files it has
   * no write record of.
   */
  workspaceMemoryFiles: WorkspaceMemoryFiles;
  connectTimeoutMs: number;
  spawnTimeoutMs: number;
  /** Deadline of assemble: past it the turn goes on with the host's own messages. */
  assembleTimeoutMs: number;
  /** Deadline of ingest, commitTurn, search, get and status calls. */
  callTimeoutMs: number;
  compactTimeoutMs: number;
  /** Backoff after a failure: first wait, doubled up to the max. */
  reconnectInitialMs: number;
  reconnectMaxMs: number;
  /** Share of the token budget given to recalled memory. */
  memoryBudgetFraction: number;
  /** Token budget when the host gives none. */
  defaultTokenBudget: number;
  /** Hits memory_search returns when the caller names no limit. */
  searchResults: number;
  /** Directory of turns committed while the daemon was unreachable ("" = ~/.clawdb/outbox). */
  outboxDir: string;
}

export type NamespaceRule = "agent" | "v1";
export const NAMESPACE_RULES: readonly NamespaceRule[] = ["agent", "v1"];
export type WorkspaceMemoryFiles = "exclude" | "include";
export const WORKSPACE_MEMORY_FILES: readonly WorkspaceMemoryFiles[] = ["exclude", "include"];

export const DEFAULT_CONFIG: Readonly<PluginConfig> = Object.freeze({
  endpoint: "auto",
  spawnDaemon: true,
  daemonCommand: ["libravdbd"],
  dataDir: "",
  daemonLogFile: "",
  authTokenFile: "",
  namespace: "",
  namespaceRule: "agent",
  workspaceMemoryFiles: "exclude",
  connectTimeoutMs: 1_000,
  spawnTimeoutMs: 30_000,
  assembleTimeoutMs: 5_000,
  callTimeoutMs: 10_000,
  compactTimeoutMs: 120_000,
  reconnectInitialMs: 500,
  reconnectMaxMs: 16_000,
  memoryBudgetFraction: 0.25,
  defaultTokenBudget: 16_000,
  searchResults: 8,
  outboxDir: "",
});

export class ConfigError extends Error {
  override name = "ConfigError";
}

type Rule = (value: unknown, key: string) => unknown;

const str: Rule = (v, key) => {
  if (typeof v !== "string") throw new ConfigError(`${key} must be a string, got ${JSON.stringify(v)}`);
  return v;
};
/** A path: "~/" is the user's home (JSON config has no shell to expand it). */
const pathRule: Rule = (v, key) => {
  const text = str(v, key) as string;
  if (text === "~") return homedir();
  return text.startsWith("~/") ? join(homedir(), text.slice(2)) : text;
};
const bool: Rule = (v, key) => {
  if (typeof v !== "boolean") throw new ConfigError(`${key} must be true or false, got ${JSON.stringify(v)}`);
  return v;
};
const ms =
  (min: number, max: number): Rule =>
  (v, key) => {
    if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
      throw new ConfigError(`${key} must be an integer of milliseconds in ${min}..${max}, got ${JSON.stringify(v)}`);
    }
    return v;
  };
const int =
  (min: number, max: number): Rule =>
  (v, key) => {
    if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
      throw new ConfigError(`${key} must be an integer in ${min}..${max}, got ${JSON.stringify(v)}`);
    }
    return v;
  };
const fraction: Rule = (v, key) => {
  if (typeof v !== "number" || !(v > 0) || v > 1) throw new ConfigError(`${key} must be a number in (0, 1], got ${JSON.stringify(v)}`);
  return v;
};
const argv: Rule = (v, key) => {
  if (!Array.isArray(v) || !v.length || !v.every((x) => typeof x === "string" && x.length > 0)) {
    throw new ConfigError(`${key} must be a non-empty list of non-empty strings, got ${JSON.stringify(v)}`);
  }
  return [...(v as string[])];
};
const oneOf =
  (values: readonly string[]): Rule =>
  (v, key) => {
    if (typeof v !== "string" || !values.includes(v)) throw new ConfigError(`${key} must be one of ${values.map((x) => JSON.stringify(x)).join(", ")}, got ${JSON.stringify(v)}`);
    return v;
  };
const endpoint: Rule = (v, key) => {
  const text = (str(v, key) as string).trim();
  if (text !== "auto" && !text.startsWith("unix:") && !text.startsWith("tcp:")) {
    throw new ConfigError(`${key} must be "auto", "unix:/path/to/socket" or "tcp:host:port", got ${JSON.stringify(v)}`);
  }
  return text;
};

export const RULES: Readonly<Record<keyof PluginConfig, Rule>> = {
  endpoint,
  spawnDaemon: bool,
  daemonCommand: argv,
  dataDir: pathRule,
  daemonLogFile: pathRule,
  authTokenFile: pathRule,
  namespace: str,
  namespaceRule: oneOf(NAMESPACE_RULES),
  workspaceMemoryFiles: oneOf(WORKSPACE_MEMORY_FILES),
  connectTimeoutMs: ms(50, 60_000),
  spawnTimeoutMs: ms(1_000, 600_000),
  assembleTimeoutMs: ms(100, 120_000),
  callTimeoutMs: ms(100, 600_000),
  compactTimeoutMs: ms(1_000, 3_600_000),
  reconnectInitialMs: ms(10, 60_000),
  reconnectMaxMs: ms(10, 600_000),
  memoryBudgetFraction: fraction,
  defaultTokenBudget: int(256, 10_000_000),
  searchResults: int(1, 200),
  outboxDir: pathRule,
};

/** Edit distance (insertions, deletions, substitutions), for "did you mean". */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min((prev[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length] ?? 0;
}

/** The known key an unknown one most likely misspells (a third of its letters or fewer differ). */
export function closestKey(key: string): string | null {
  let best: string | null = null;
  let bestDistance = Math.max(2, Math.floor(key.length / 3)) + 1;
  for (const known of Object.keys(RULES)) {
    const d = distance(key.toLowerCase(), known.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [known, d];
  }
  return best;
}

function unknownKeyError(key: string): ConfigError {
  const guess = closestKey(key);
  const hint = guess ? `did you mean ${JSON.stringify(guess)}?` : `known keys: ${Object.keys(RULES).join(", ")}`;
  return new ConfigError(`unknown config key ${JSON.stringify(key)}; ${hint}`);
}

/** The config with defaults filled in; a ConfigError names the first bad key. */
export function resolveConfig(raw: unknown): PluginConfig {
  if (raw === undefined || raw === null) return { ...DEFAULT_CONFIG, daemonCommand: [...DEFAULT_CONFIG.daemonCommand] };
  if (typeof raw !== "object" || Array.isArray(raw)) throw new ConfigError(`the plugin config must be an object, got ${JSON.stringify(raw)}`);
  const out: Record<string, unknown> = { ...DEFAULT_CONFIG, daemonCommand: [...DEFAULT_CONFIG.daemonCommand] };
  for (const [key, value] of Object.entries(raw as Record<string, unknown>)) {
    const rule = (RULES as Record<string, Rule | undefined>)[key];
    if (!rule) throw unknownKeyError(key);
    if (value !== undefined) out[key] = rule(value, key);
  }
  const cfg = out as unknown as PluginConfig;
  if (cfg.reconnectMaxMs < cfg.reconnectInitialMs) {
    throw new ConfigError(`reconnectMaxMs (${cfg.reconnectMaxMs}) must be >= reconnectInitialMs (${cfg.reconnectInitialMs})`);
  }
  return cfg;
}

/**
 * The values of a raw config checked, its unknown keys left out: what OpenClaw may
 * validate before the plugin loads. The plugin itself refuses unknown keys at load
 * (resolveConfig), with a warning instead of stopping the host.
 */
export function checkValues(raw: unknown): PluginConfig {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) return resolveConfig(raw);
  return resolveConfig(Object.fromEntries(Object.entries(raw as Record<string, unknown>).filter(([key]) => key in RULES)));
}
