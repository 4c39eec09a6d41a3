// The two SDK entry points src/index.ts imports. The host provides them at run time; the
// package builds on Node 20, where openclaw (Node >= 24.16) is not installed.
declare module "openclaw/plugin-sdk/plugin-entry" {
  export function definePluginEntry<T>(definition: T): T;
}
declare module "openclaw/plugin-sdk/core" {
  export function delegateCompactionToRuntime(params: unknown): Promise<unknown>;
}
