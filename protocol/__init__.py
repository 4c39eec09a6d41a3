"""Wire types of the libravdbd JSON-RPC protocol, shared by the daemon and its clients."""

from protocol.base import MethodSchema, WireStruct
from protocol.codes import ErrorCode
from protocol.jsonrpc import ErrorObject, ErrorResponse, Request, SuccessResponse

__all__ = [
    "ErrorCode",
    "ErrorObject",
    "ErrorResponse",
    "MethodSchema",
    "Request",
    "SuccessResponse",
    "WireStruct",
]
