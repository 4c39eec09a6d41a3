// Host messages -> the daemon's ingest messages, and names the daemon accepts.
import { createHash } from "node:crypto";

import type { IngestMessage } from "../generated/protocol.js";
import type { AgentMessage } from "./host-types.js";

const KEPT_ROLES = new Set(["user", "assistant"]);
const TEXT_PARTS = new Set(["text", "input_text", "output_text"]);

/** The text of a message's content: a string, or the text parts of a list. */
export function messageText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  const parts: string[] = [];
  for (const part of content) {
    if (typeof part === "string") parts.push(part);
    else if (part && typeof part === "object") {
      const p = part as { type?: unknown; text?: unknown };
      if (typeof p.text === "string" && (p.type === undefined || TEXT_PARTS.has(String(p.type)))) parts.push(p.text);
    }
  }
  return parts.join("\n").trim();
}

/**
 * A stable id from what the message is (role, host timestamp, text): the same message
 * reaching the daemon through ingest, ingestBatch, afterTurn or a commitTurn retry is
 * stored once.
 */
export function messageId(message: AgentMessage, text: string): string {
  if (typeof message.id === "string" && message.id.trim()) return message.id.trim().slice(0, 256);
  const ts = typeof message.timestamp === "number" && Number.isFinite(message.timestamp) ? Math.trunc(message.timestamp) : "";
  const digest = createHash("sha256").update(`${message.role}\u0000${ts}\u0000${text}`).digest("hex");
  return `oc-${digest.slice(0, 32)}`;
}

/**
 * What the daemon stores of a turn: user and assistant messages with text. Tool calls,
 * tool results and system messages are the host's bookkeeping, not conversation.
 */
export function toIngestMessages(messages: readonly AgentMessage[]): IngestMessage[] {
  const out: IngestMessage[] = [];
  for (const m of messages) {
    if (!m || typeof m !== "object" || !KEPT_ROLES.has(m.role)) continue;
    const text = messageText(m.content);
    if (!text.trim()) continue;
    const item: IngestMessage = { role: m.role, content: text, id: messageId(m, text) };
    if (typeof m.timestamp === "number" && Number.isFinite(m.timestamp) && m.timestamp >= 0) item.ts = Math.trunc(m.timestamp);
    out.push(item);
  }
  return out;
}

/** The daemon's name rules (no control characters, no / or \): replaced, not refused. */
export function safeName(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f/\\]/g, "_").slice(0, 200);
}

/** A host session id as the daemon accepts it. */
export function safeSessionId(sessionId: string): string {
  return safeName(sessionId.trim()) || "default";
}

/** Rough token count of messages the host keeps when the daemon is away (4 chars/token). */
export function estimateTokens(messages: readonly AgentMessage[]): number {
  let chars = 0;
  for (const m of messages) chars += messageText(m?.content).length;
  return Math.ceil(chars / 4);
}
