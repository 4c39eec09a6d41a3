"""JSON-RPC error codes: the standard ones plus this daemon's application codes.

Application codes live in the server-error range reserved by JSON-RPC 2.0
(-32000 to -32099). docs/protocol.md lists them with their meaning.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603

    SERVER_ERROR = -32000  # an application failure with no more specific code
    FRAME_TOO_LARGE = -32001  # the request line exceeded the frame size cap
    NOT_FOUND = -32002  # a named record, summary, session or document does not exist
    CONFLICT = -32003  # compare-and-swap version mismatch
    MODEL_UNAVAILABLE = -32004  # an engine failed to load or is not configured
    STORAGE_ERROR = -32005  # the store could not complete the operation (disk full, read-only)
    FINGERPRINT_MISMATCH = -32006  # the store was built with another embedding model
    SHUTTING_DOWN = -32007  # the daemon is draining and accepts no new work
    CANCELLED = -32008  # the operation was cancelled or timed out on the server
    INVALID_INPUT = -32009  # the params are well-typed but their values are not acceptable
    BUSY = -32010  # the daemon is at its request or connection limit: retry later
    UNAUTHORIZED = -32011  # authentication is required (auth token) and was not given
    WRONG_NAMESPACE = -32012  # the session belongs to another namespace than the one named
