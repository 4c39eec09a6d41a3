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
  /** Fixed durable namespace for every session ("" = derive: userId, session key, session). */
  namespace: string;
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

export const DEFAULT_CONFIG: Readonly<PluginConfig> = Object.freeze({
  endpoint: "auto",
  spawnDaemon: true,
  daemonCommand: ["libravdbd"],
  dataDir: "",
  daemonLogFile: "",
  authTokenFile: "",
  namespace: "",
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

/** The config with defaults filled in; a ConfigError names the first bad key. */
export function resolveConfig(raw: unknown): PluginConfig {
  if (raw === undefined || raw === null) return { ...DEFAULT_CONFIG, daemonCommand: [...DEFAULT_CONFIG.daemonCommand] };
  if (typeof raw !== "object" || Array.isArray(raw)) throw new ConfigError(`the plugin config must be an object, got ${JSON.stringify(raw)}`);
  const out: Record<string, unknown> = { ...DEFAULT_CONFIG, daemonCommand: [...DEFAULT_CONFIG.daemonCommand] };
  for (const [key, value] of Object.entries(raw as Record<string, unknown>)) {
    const rule = (RULES as Record<string, Rule | undefined>)[key];
    if (!rule) {
      const known = Object.keys(RULES).join(", ");
      throw new ConfigError(`unknown config key ${JSON.stringify(key)}; known keys: ${known}`);
    }
    if (value !== undefined) out[key] = rule(value, key);
  }
  const cfg = out as unknown as PluginConfig;
  if (cfg.reconnectMaxMs < cfg.reconnectInitialMs) {
    throw new ConfigError(`reconnectMaxMs (${cfg.reconnectMaxMs}) must be >= reconnectInitialMs (${cfg.reconnectInitialMs})`);
  }
  return cfg;
}
