// The parts of the OpenClaw plugin SDK (openclaw@2026.9.6, dist/plugin-sdk/*.d.ts) this
// plugin uses, written structurally: the plugin builds and its tests run on Node 20, where
// the host package (Node >= 24.16) cannot be installed. The e2e suite checks them against
// the real host.

/** A transcript message (pi-agent AgentMessage): role, content parts, optional timestamp. */
export interface AgentMessage {
  role: string;
  content?: unknown;
  timestamp?: number;
  id?: string;
  [key: string]: unknown;
}

export interface ContextEngineInfo {
  id: string;
  name: string;
  version?: string;
  acceptedHostParams?: string[];
  transcriptSemantics?: {
    currentTurnFence?: "before-current-turn-entry-v1";
    turnAdvancementIdempotency?: "atomic-idempotent-v1";
  };
  ownsCompaction?: boolean;
  turnMaintenanceMode?: "foreground" | "background";
}

export interface AssembleResult {
  messages: AgentMessage[];
  estimatedTokens: number;
  systemPromptAddition?: string;
}

export interface CompactResult {
  ok: boolean;
  compacted: boolean;
  reason?: string;
  result?: { summary?: string; tokensBefore: number; tokensAfter?: number; details?: unknown };
}

export interface MaintenanceResult {
  changed: boolean;
  bytesFreed: number;
  rewrittenEntries: number;
  reason?: string;
}

/** ContextEngineSessionTarget: the runtime session, with the agent that owns it. */
export interface SessionTarget {
  agentId?: string;
  sessionId?: string;
  sessionKey?: string;
  [key: string]: unknown;
}

export interface SessionParams {
  sessionId: string;
  sessionKey?: string;
  /** Not in the SDK's types; some hosts and the reference's callers pass it. */
  userId?: string;
  /** compact's caller-resolved owner agent. */
  agentId?: string;
  sessionTarget?: SessionTarget;
  runtimeContext?: Record<string, unknown>;
}

export interface AssembleParams extends SessionParams {
  messages: AgentMessage[];
  tokenBudget?: number;
  prompt?: string;
  model?: string;
}

export interface CompactParams extends SessionParams {
  force?: boolean;
  tokenBudget?: number;
  currentTokenCount?: number;
  compactionTarget?: "budget" | "threshold";
  customInstructions?: string;
  abortSignal?: AbortSignal;
  [key: string]: unknown;
}

export interface CommitTurnParams extends SessionParams {
  advancementKey: string;
  messages: AgentMessage[];
  isHeartbeat?: boolean;
}

export interface ContextEngine {
  readonly info: ContextEngineInfo;
  bootstrap(params: SessionParams & { sessionFile?: string }): Promise<{ bootstrapped: boolean; importedMessages?: number; reason?: string }>;
  maintain(params: SessionParams): Promise<MaintenanceResult>;
  ingest(params: SessionParams & { message: AgentMessage; isHeartbeat?: boolean }): Promise<{ ingested: boolean }>;
  ingestBatch(params: SessionParams & { messages: AgentMessage[]; isHeartbeat?: boolean }): Promise<{ ingestedCount: number }>;
  afterTurn(params: SessionParams & { messages: AgentMessage[]; prePromptMessageCount: number; isHeartbeat?: boolean }): Promise<void>;
  commitTurn(params: CommitTurnParams): Promise<{ status: "committed" | "duplicate" }>;
  assemble(params: AssembleParams): Promise<AssembleResult>;
  compact(params: CompactParams): Promise<CompactResult>;
  prepareSubagentSpawn(params: {
    parentSessionKey: string;
    childSessionKey: string;
    contextMode?: "isolated" | "fork";
    parentSessionId?: string;
    childSessionId?: string;
  }): Promise<{ rollback: () => void | Promise<void> } | undefined>;
  onSubagentEnded(params: { childSessionKey: string; reason: string }): Promise<void>;
  dispose(): Promise<void>;
}

/** MemorySearchResult of the SDK. */
export interface MemorySearchResult {
  path: string;
  startLine: number;
  endLine: number;
  score: number;
  snippet: string;
  source: "memory" | "sessions";
  citation?: string;
}

export interface MemoryReadResult {
  status?: "ok" | "not_found";
  text: string;
  path: string;
  truncated?: boolean;
  from?: number;
  lines?: number;
  nextFrom?: number;
}

export interface MemoryProviderStatus {
  backend: "builtin";
  provider: string;
  model?: string;
  chunks?: number;
  custom?: Record<string, unknown>;
}

export interface MemorySearchManager {
  search(query: string, opts?: { maxResults?: number; minScore?: number; sessionKey?: string; signal?: AbortSignal }): Promise<MemorySearchResult[]>;
  readFile(params: { relPath: string; from?: number; lines?: number }): Promise<MemoryReadResult>;
  status(): MemoryProviderStatus;
  probeEmbeddingAvailability(): Promise<{ ok: boolean; error?: string }>;
  probeVectorAvailability(): Promise<boolean>;
  close?(): Promise<void>;
}

/** The SDK's MemoryOriginClass: `owner` and `agent` may enter the automatic context. */
export type MemoryOriginClass = "owner" | "agent" | "untrusted" | "system";

export interface WorkspaceMemoryClassifyParams {
  cfg?: unknown;
  agentId: string;
  workspaceDir: string;
  relativePaths: string[];
  /** Files the host already read (a remote workspace); an absent canonical path stays untrusted. */
  readSources?: readonly { relativePath: string; canonicalRelativePath?: string }[];
}

export interface WorkspaceMemoryClassification {
  relativePath: string;
  originClass: MemoryOriginClass;
}

export interface MemoryPluginRuntime {
  getMemorySearchManager(params: { cfg?: unknown; agentId: string; purpose?: string }): Promise<{ manager: MemorySearchManager | null; error?: string }>;
  resolveMemoryBackendConfig(params: { cfg?: unknown; agentId: string }): { backend: "builtin" };
  authorizeSearchHits?(params: { cfg?: unknown; agentId: string; requesterSessionKey: string | undefined; sandboxed: boolean; hits: MemorySearchResult[] }): Promise<MemorySearchResult[]>;
  /** The runtime answers for files the host read itself (remote workspaces) too. */
  supportsWorkspaceMemoryReadSources?: true;
  classifyWorkspaceMemoryPaths?(params: WorkspaceMemoryClassifyParams): Promise<WorkspaceMemoryClassification[]>;
  closeAllMemorySearchManagers?(): Promise<void>;
}

export interface MemoryPluginCapability {
  promptBuilder?: (params: { availableTools: Set<string>; citationsMode?: string; agentId?: string; agentSessionKey?: string }) => string[];
  runtime?: MemoryPluginRuntime;
}

export interface ToolResult {
  content: { type: "text"; text: string }[];
  details?: unknown;
}

export interface ToolContext {
  sessionKey?: string;
  sessionId?: string;
  agentId?: string;
  [key: string]: unknown;
}

export interface AgentTool {
  name: string;
  label?: string;
  description: string;
  parameters: Record<string, unknown>;
  execute(toolCallId: string, params: Record<string, unknown>, signal?: AbortSignal): Promise<ToolResult>;
}

export interface PluginLogger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
  debug?(message: string): void;
}

/** The CLI registrar receives a commander `program`. */
export interface CliCommand {
  command(name: string): CliCommand;
  description(text: string): CliCommand;
  option(flags: string, description?: string, defaultValue?: unknown): CliCommand;
  argument(name: string, description?: string): CliCommand;
  action(fn: (...args: unknown[]) => unknown): CliCommand;
  allowUnknownOption?(allow?: boolean): CliCommand;
  allowExcessArguments?(allow?: boolean): CliCommand;
  commands?: readonly { name(): string }[];
}

export interface CliDescriptor {
  name: string;
  description: string;
  hasSubcommands: boolean;
}

export interface PluginApi {
  id?: string;
  pluginConfig?: unknown;
  registrationMode?: string;
  logger?: PluginLogger;
  registerContextEngine(id: string, factory: (ctx?: unknown) => ContextEngine | Promise<ContextEngine>): void;
  registerMemoryCapability?(capability: MemoryPluginCapability): void;
  registerTool?(tool: AgentTool | ((ctx: ToolContext) => AgentTool | AgentTool[] | null | undefined), opts?: { name?: string; names?: string[] }): void;
  registerCli?(registrar: (ctx: { program: CliCommand }) => void | Promise<void>, opts?: { parentPath?: string[]; commands?: string[]; descriptors?: CliDescriptor[] }): void;
  on?(event: string, handler: (...args: unknown[]) => unknown): void;
}
