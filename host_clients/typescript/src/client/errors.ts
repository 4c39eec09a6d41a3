// The client's error hierarchy, mirroring the Python client (libravdb_client.errors):
// transport failures, timeouts and protocol violations are not daemon errors, and every
// JSON-RPC error code the daemon sends has one class. The code -> class table is the
// only place where the two meet.

/** Codes of protocol/codes.py (the daemon's ErrorCode). */
export const ErrorCode = {
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
  SERVER_ERROR: -32000,
  FRAME_TOO_LARGE: -32001,
  NOT_FOUND: -32002,
  CONFLICT: -32003,
  MODEL_UNAVAILABLE: -32004,
  STORAGE_ERROR: -32005,
  FINGERPRINT_MISMATCH: -32006,
  SHUTTING_DOWN: -32007,
  CANCELLED: -32008,
  INVALID_INPUT: -32009,
  BUSY: -32010,
  UNAUTHORIZED: -32011,
  WRONG_NAMESPACE: -32012,
} as const;
export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Base of every error this client raises. */
export class LibravdbError extends Error {
  override name = "LibravdbError";
}

/** The connection could not be made or was lost. */
export class TransportError extends LibravdbError {
  override name = "TransportError";
}

/** Connecting (or spawning the daemon) failed. */
export class ConnectError extends TransportError {
  override name = "ConnectError";
}

/** The connection closed while the call was in flight, or before it was sent. */
export class ConnectionClosed extends TransportError {
  override name = "ConnectionClosed";
}

/** No reply within the call's deadline. The daemon may still finish the work. */
export class RpcTimeout extends LibravdbError {
  override name = "RpcTimeout";
  constructor(
    readonly method: string,
    readonly timeoutMs: number,
  ) {
    super(`${method}: no reply within ${timeoutMs} ms`);
  }
}

/** The caller aborted the call (AbortSignal). The daemon may still finish the work. */
export class CallAborted extends LibravdbError {
  override name = "CallAborted";
  constructor(readonly method: string) {
    super(`${method}: aborted by the caller`);
  }
}

/** The daemon sent something that is not a valid reply (bad JSON, wrong shape). */
export class ProtocolError extends LibravdbError {
  override name = "ProtocolError";
}

/** A JSON-RPC error reply. `code` is always the code sent. */
export class RpcError extends LibravdbError {
  override name = "RpcError";
  constructor(
    readonly code: number,
    readonly rpcMessage: string,
    readonly data?: unknown,
  ) {
    super(`${rpcMessage} (code ${code})`);
  }
}

export class ParseError extends RpcError {
  override name = "ParseError";
}
export class InvalidRequest extends RpcError {
  override name = "InvalidRequest";
}
export class MethodNotFound extends RpcError {
  override name = "MethodNotFound";
}
export class InvalidParams extends RpcError {
  override name = "InvalidParams";
}
export class InternalError extends RpcError {
  override name = "InternalError";
}
export class FrameTooLarge extends RpcError {
  override name = "FrameTooLarge";
}
export class NotFound extends RpcError {
  override name = "NotFound";
}
export class Conflict extends RpcError {
  override name = "Conflict";
}
export class ModelUnavailable extends RpcError {
  override name = "ModelUnavailable";
}
export class StorageError extends RpcError {
  override name = "StorageError";
}
export class FingerprintMismatch extends RpcError {
  override name = "FingerprintMismatch";
}
export class ShuttingDown extends RpcError {
  override name = "ShuttingDown";
}
export class Cancelled extends RpcError {
  override name = "Cancelled";
}
export class InvalidInput extends RpcError {
  override name = "InvalidInput";
}
/** The daemon is at its request or connection limit: retry later. */
export class Busy extends RpcError {
  override name = "Busy";
}
export class Unauthorized extends RpcError {
  override name = "Unauthorized";
}
/** The session belongs to another namespace than the one the request named. */
export class WrongNamespace extends RpcError {
  override name = "WrongNamespace";
}

type RpcErrorClass = new (code: number, message: string, data?: unknown) => RpcError;

/** The one place where codes meet classes. */
export const ERROR_CLASSES: ReadonlyMap<number, RpcErrorClass> = new Map<number, RpcErrorClass>([
  [ErrorCode.PARSE_ERROR, ParseError],
  [ErrorCode.INVALID_REQUEST, InvalidRequest],
  [ErrorCode.METHOD_NOT_FOUND, MethodNotFound],
  [ErrorCode.INVALID_PARAMS, InvalidParams],
  [ErrorCode.INTERNAL_ERROR, InternalError],
  [ErrorCode.FRAME_TOO_LARGE, FrameTooLarge],
  [ErrorCode.NOT_FOUND, NotFound],
  [ErrorCode.CONFLICT, Conflict],
  [ErrorCode.MODEL_UNAVAILABLE, ModelUnavailable],
  [ErrorCode.STORAGE_ERROR, StorageError],
  [ErrorCode.FINGERPRINT_MISMATCH, FingerprintMismatch],
  [ErrorCode.SHUTTING_DOWN, ShuttingDown],
  [ErrorCode.CANCELLED, Cancelled],
  [ErrorCode.INVALID_INPUT, InvalidInput],
  [ErrorCode.BUSY, Busy],
  [ErrorCode.UNAUTHORIZED, Unauthorized],
  [ErrorCode.WRONG_NAMESPACE, WrongNamespace],
]);

/** The error for a JSON-RPC error object; RpcError itself for codes without a class. */
export function rpcError(code: number, message: string, data?: unknown): RpcError {
  const cls = ERROR_CLASSES.get(code) ?? RpcError;
  return new cls(code, message, data);
}
