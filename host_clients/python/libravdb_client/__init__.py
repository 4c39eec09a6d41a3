"""A thin sync and async client for the libravdbd JSON-RPC daemon.

::

    from libravdb_client import Client, AsyncClient

    with Client("unix:/home/me/.clawdb/run/libravdb.sock") as client:
        print(client.health().ok)

    async with AsyncClient.spawn(data_dir="/tmp/data") as client:   # a private daemon
        print(await client.call("status"))
"""

from libravdb_client._async import AsyncClient
from libravdb_client._core import (
    CLIENT_VERSION,
    DEFAULT_MAX_FRAME_BYTES,
    DEFAULT_TIMEOUT,
    USE_CLIENT_DEFAULT,
    NotificationCallback,
    ProgressCallback,
    UseClientDefault,
)
from libravdb_client._spawn import StderrTarget
from libravdb_client._sync import Client
from libravdb_client.endpoints import Endpoint, default_endpoint, parse_endpoint
from libravdb_client.errors import (
    ERROR_CLASSES,
    Busy,
    Cancelled,
    Conflict,
    ConnectError,
    ConnectionClosed,
    FingerprintMismatch,
    FrameTooLarge,
    InternalError,
    InvalidInput,
    InvalidParams,
    InvalidRequest,
    LibravdbError,
    MethodNotFound,
    ModelUnavailable,
    NotFound,
    ParseError,
    ProtocolError,
    RpcError,
    RpcTimeout,
    ShuttingDown,
    StorageError,
    TransportError,
    Unauthorized,
    WrongNamespace,
    error_class,
)
from protocol.jsonrpc import ProgressParams

__version__ = CLIENT_VERSION

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "DEFAULT_TIMEOUT",
    "ERROR_CLASSES",
    "USE_CLIENT_DEFAULT",
    "AsyncClient",
    "Busy",
    "Cancelled",
    "Client",
    "Conflict",
    "ConnectError",
    "ConnectionClosed",
    "Endpoint",
    "FingerprintMismatch",
    "FrameTooLarge",
    "InternalError",
    "InvalidInput",
    "InvalidParams",
    "InvalidRequest",
    "LibravdbError",
    "MethodNotFound",
    "ModelUnavailable",
    "NotFound",
    "NotificationCallback",
    "ParseError",
    "ProgressCallback",
    "ProgressParams",
    "ProtocolError",
    "RpcError",
    "RpcTimeout",
    "ShuttingDown",
    "StderrTarget",
    "StorageError",
    "TransportError",
    "Unauthorized",
    "UseClientDefault",
    "WrongNamespace",
    "__version__",
    "default_endpoint",
    "error_class",
    "parse_endpoint",
]
