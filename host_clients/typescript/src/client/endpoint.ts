// Endpoint strings, as the daemon and the Python client spell them: `unix:/path`,
// `tcp:host:port` (IPv6 hosts in brackets), and `stdio` (spawn `libravdbd serve --stdio`).
import { homedir } from "node:os";
import { isAbsolute, join, resolve } from "node:path";

export const ENDPOINT_ENV = "LIBRAVDB_RPC_ENDPOINT";
export const WINDOWS_DEFAULT = "tcp:127.0.0.1:37421";

export type Endpoint =
  | { kind: "unix"; path: string }
  | { kind: "tcp"; host: string; port: number }
  | { kind: "stdio" };

function expandHome(path: string): string {
  if (path === "~") return homedir();
  if (path.startsWith("~/")) return join(homedir(), path.slice(2));
  return path;
}

/** Parse an endpoint string. Throws TypeError naming what is wrong. */
export function parseEndpoint(text: string): Endpoint {
  const raw = text.trim();
  if (raw === "stdio") return { kind: "stdio" };
  if (raw.startsWith("unix:")) {
    const path = raw.slice("unix:".length).trim();
    if (!path) throw new TypeError("unix endpoint requires a socket path");
    const expanded = expandHome(path);
    return { kind: "unix", path: isAbsolute(expanded) ? expanded : resolve(expanded) };
  }
  if (raw.startsWith("tcp:")) {
    const rest = raw.slice("tcp:".length).trim();
    const colon = rest.lastIndexOf(":");
    const host = colon > 0 ? rest.slice(0, colon).replace(/^\[|\]$/g, "") : "";
    const portText = colon > 0 ? rest.slice(colon + 1) : "";
    if (!host) throw new TypeError(`tcp endpoint must be tcp:host:port, got ${JSON.stringify(raw)}`);
    const port = Number(portText);
    if (!/^\d+$/.test(portText) || port < 1 || port > 65535) {
      throw new TypeError(`tcp endpoint port must be 1-65535, got ${JSON.stringify(portText)}`);
    }
    return { kind: "tcp", host, port };
  }
  throw new TypeError(
    `unsupported endpoint ${JSON.stringify(raw)}; expected unix:/path/to/socket, tcp:host:port or stdio`,
  );
}

export function formatEndpoint(endpoint: Endpoint): string {
  switch (endpoint.kind) {
    case "unix":
      return `unix:${endpoint.path}`;
    case "tcp":
      return `tcp:${endpoint.host.includes(":") ? `[${endpoint.host}]` : endpoint.host}:${endpoint.port}`;
    case "stdio":
      return "stdio";
  }
}

/** `$LIBRAVDB_RPC_ENDPOINT`, else the daemon's default socket under `~/.clawdb`. */
export function defaultEndpoint(env: NodeJS.ProcessEnv = process.env): string {
  const configured = (env[ENDPOINT_ENV] ?? "").trim();
  if (configured) return configured;
  if (process.platform === "win32") return WINDOWS_DEFAULT;
  const home = env["HOME"] ?? homedir();
  return `unix:${join(home, ".clawdb", "run", "libravdb.sock")}`;
}
