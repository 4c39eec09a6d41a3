export * from "./errors.js";
export * from "./endpoint.js";
export { LibravdbClient, PROTOCOL_VERSION, type CallOptions, type ClientOptions } from "./client.js";
export type { SpawnOptions } from "./transport.js";
export type * from "../generated/protocol.js";
export { METHOD_NAMES } from "../generated/protocol.js";
