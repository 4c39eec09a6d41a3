"""A thin sync and async client for the libravdbd JSON-RPC daemon.

::

    from libravdb_client import Client, AsyncClient

    with Client("unix:/home/me/.clawdb/run/libravdb.sock") as client:
        print(client.health().ok)

    async with AsyncClient.spawn(data_dir="/tmp/data") as client:   # a private daemon
        print(await client.call("status"))
"""

from libravdb_client import errors
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

# the exception classes and the code table: errors.__all__ names them once
from libravdb_client.errors import *  # noqa: F403
from protocol.jsonrpc import ProgressParams

__version__ = CLIENT_VERSION

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "DEFAULT_TIMEOUT",
    "USE_CLIENT_DEFAULT",
    "AsyncClient",
    "Client",
    "Endpoint",
    "NotificationCallback",
    "ProgressCallback",
    "ProgressParams",
    "StderrTarget",
    "UseClientDefault",
    "__version__",
    "default_endpoint",
    "parse_endpoint",
]
__all__ += errors.__all__
