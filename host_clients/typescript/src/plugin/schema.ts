// The JSON Schema of the plugin config, as openclaw.plugin.json declares it (a test keeps
// the manifest, this schema, RULES and DEFAULT_CONFIG in step). OpenClaw validates the
// config against it before the plugin loads and refuses every agent run on a mismatch, so
// it does not refuse unknown keys: a misspelled key reaches the plugin, which names it in
// a warning and runs the turn without memory (entry.ts) instead of stopping the host.
import { DEFAULT_CONFIG, NAMESPACE_RULES, WORKSPACE_MEMORY_FILES } from "./config.js";

const ms = (description: string, minimum: number, maximum: number, key: keyof typeof DEFAULT_CONFIG) => ({
  type: "integer",
  minimum,
  maximum,
  default: DEFAULT_CONFIG[key],
  description,
});

export const CONFIG_JSON_SCHEMA = {
  type: "object",
  additionalProperties: true,
  properties: {
    endpoint: {
      type: "string",
      default: DEFAULT_CONFIG.endpoint,
      description: 'Where libravdbd listens: "auto" ($LIBRAVDB_RPC_ENDPOINT, else ~/.clawdb/run/libravdb.sock), "unix:/path" or "tcp:host:port".',
    },
    spawnDaemon: { type: "boolean", default: DEFAULT_CONFIG.spawnDaemon, description: "Start libravdbd when nothing answers at a unix endpoint." },
    daemonCommand: {
      type: "array",
      items: { type: "string", minLength: 1 },
      minItems: 1,
      default: DEFAULT_CONFIG.daemonCommand,
      description: 'The daemon command; "serve --socket <path>" is appended.',
    },
    dataDir: { type: "string", default: DEFAULT_CONFIG.dataDir, description: "Data directory of a daemon the plugin starts (empty: ~/.clawdb/data)." },
    daemonLogFile: { type: "string", default: DEFAULT_CONFIG.daemonLogFile, description: "File a started daemon's JSON logs are appended to (empty: discarded)." },
    authTokenFile: { type: "string", default: DEFAULT_CONFIG.authTokenFile, description: "File holding the daemon's auth token (empty: none)." },
    namespace: { type: "string", default: DEFAULT_CONFIG.namespace, description: "One durable namespace for every session (empty: derived by namespaceRule)." },
    namespaceRule: {
      type: "string",
      enum: [...NAMESPACE_RULES],
      default: DEFAULT_CONFIG.namespaceRule,
      description: 'How a session\'s namespace is derived when namespace is empty: "agent" (agent:<agentId>, one memory per agent) or "v1" (userId, else session-key:<sessionKey>, else session:<sessionId>; installs upgraded from 0.1 or the reference plugin).',
    },
    workspaceMemoryFiles: {
      type: "string",
      enum: [...WORKSPACE_MEMORY_FILES],
      default: DEFAULT_CONFIG.workspaceMemoryFiles,
      description: 'Whether the workspace\'s MEMORY.md and USER.md enter the automatic context: "exclude" (classified untrusted) or "include" (classified as the agent\'s own).',
    },
    connectTimeoutMs: ms("Deadline of a connection attempt.", 50, 60_000, "connectTimeoutMs"),
    spawnTimeoutMs: ms("How long a started daemon may take to answer.", 1_000, 600_000, "spawnTimeoutMs"),
    assembleTimeoutMs: ms("Deadline of assemble; past it the turn goes on with the host's own messages.", 100, 120_000, "assembleTimeoutMs"),
    callTimeoutMs: ms("Deadline of ingest, commitTurn, search, get and status.", 100, 600_000, "callTimeoutMs"),
    compactTimeoutMs: ms("Deadline of compact, forget and export.", 1_000, 3_600_000, "compactTimeoutMs"),
    reconnectInitialMs: ms("First wait after the daemon failed; doubled up to reconnectMaxMs.", 10, 60_000, "reconnectInitialMs"),
    reconnectMaxMs: ms("Longest wait between reconnection attempts.", 10, 600_000, "reconnectMaxMs"),
    memoryBudgetFraction: {
      type: "number",
      exclusiveMinimum: 0,
      maximum: 1,
      default: DEFAULT_CONFIG.memoryBudgetFraction,
      description: "Share of the token budget given to recalled memory.",
    },
    defaultTokenBudget: { type: "integer", minimum: 256, maximum: 10_000_000, default: DEFAULT_CONFIG.defaultTokenBudget, description: "Token budget when the host gives none." },
    searchResults: { type: "integer", minimum: 1, maximum: 200, default: DEFAULT_CONFIG.searchResults, description: "Hits memory_search returns by default." },
    outboxDir: { type: "string", default: DEFAULT_CONFIG.outboxDir, description: "Where turns wait while the daemon is unreachable (empty: ~/.clawdb/outbox)." },
  },
} as const;
