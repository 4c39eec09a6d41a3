"""The memory layer's input errors: the caller asked for something the memory refuses.

The dispatcher's error table (``sidecar.api.errors``) answers :class:`MemoryInputError` (and
its subclasses) with JSON-RPC -32009 "invalid input", :class:`SessionNamespaceError` with
-32012 and :class:`MemoryNotFound` with -32002. Any other exception from the memory layer
is a fault in the daemon: -32603, with the stack trace logged; a plain ``ValueError`` is
never taken for the client's mistake.
"""

from __future__ import annotations


class MemoryInputError(ValueError):
    """Refused input; nothing was written."""


class SessionNamespaceError(MemoryInputError):
    """A request names another namespace than the one its session was created in."""


class MemoryNotFound(MemoryInputError):
    """The record asked for is not in the namespace (absent, or another namespace's: the
    answer is the same, so existence is not revealed)."""
