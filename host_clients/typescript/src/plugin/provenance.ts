// The memory runtime's answer to OpenClaw's provenance question: may the workspace's
// MEMORY.md and USER.md enter the automatic context of a session? The host injects a file
// only when the selected memory runtime classifies it `owner` or `agent`; without an
// answer it leaves the files out and warns on every turn.
//
// OpenClaw records who wrote those files (an owner's turn, or a turn tainted by web
// content) in a store private to its own memory plugin, so this plugin cannot tell a note
// the owner kept from one an injected prompt made the agent write. By default it
// therefore classifies them `untrusted` (left out, as before, without the warning);
// `workspaceMemoryFiles: "include"` trusts them as memory-core does files it holds no
// record of: the curated files strictly inside the workspace are the agent's, dream
// reports are scaffolding, anything else is untrusted.
import { realpath } from "node:fs/promises";
import { isAbsolute, posix, relative, resolve, sep } from "node:path";

import type { WorkspaceMemoryFiles } from "./config.js";
import type { MemoryOriginClass, WorkspaceMemoryClassification, WorkspaceMemoryClassifyParams } from "./host-types.js";

const CURATED_ROOT = new Set(["MEMORY.md", "memory.md", "USER.md"]);
const PERSONAL_USER_FILE = /^users\/[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}\/USER\.md$/;

/** The class of a workspace-relative POSIX path (already known to stay inside the workspace). */
export function classOfRelativePath(path: string): MemoryOriginClass {
  const segments = path.split("/");
  if (segments.length === 1 && (segments[0] === "DREAMS.md" || segments[0] === "dreams.md")) return "system";
  if (segments[0] === "memory" && (segments[1] === "dreaming" || segments[1] === ".dreams")) return "system";
  if (segments.length === 1 && CURATED_ROOT.has(segments[0] ?? "")) return "agent";
  return PERSONAL_USER_FILE.test(path) ? "agent" : "untrusted";
}

/** A relative path the host read for us: only a plain, normalized one inside the workspace counts. */
function cleanRelative(path: string | undefined): string | null {
  if (!path || path === "." || path === ".." || path.startsWith("../") || path.includes("\\") || path.includes("\0")) return null;
  if (posix.isAbsolute(path) || posix.normalize(path) !== path) return null;
  return path;
}

/** The path of a local file relative to the workspace, symlinks resolved; null when it is not strictly inside. */
async function localRelative(workspaceDir: string, relativePath: string): Promise<string | null> {
  let root: string;
  let file: string;
  try {
    [root, file] = await Promise.all([realpath(workspaceDir), realpath(resolve(workspaceDir, relativePath))]);
  } catch {
    return null; // missing, or unreadable: nothing to vouch for
  }
  const rel = relative(root, file);
  if (!rel || rel.startsWith("..") || isAbsolute(rel)) return null;
  return rel.split(sep).join("/");
}

async function classifyOne(params: WorkspaceMemoryClassifyParams, relativePath: string): Promise<MemoryOriginClass> {
  // A remote workspace: the host read the file and says where it came from; a file it
  // cannot place stays untrusted.
  const path =
    params.readSources !== undefined
      ? cleanRelative(params.readSources.find((s) => s.relativePath === relativePath)?.canonicalRelativePath)
      : await localRelative(params.workspaceDir, relativePath);
  return path === null ? "untrusted" : classOfRelativePath(path);
}

export async function classifyWorkspaceMemoryPaths(mode: WorkspaceMemoryFiles, params: WorkspaceMemoryClassifyParams): Promise<WorkspaceMemoryClassification[]> {
  return await Promise.all(
    params.relativePaths.map(async (relativePath) => ({
      relativePath,
      originClass: mode === "include" ? await classifyOne(params, relativePath) : ("untrusted" as const),
    })),
  );
}
