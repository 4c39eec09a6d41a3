"""The memory layer's input errors: the caller asked for something the memory refuses.

Handlers map :class:`MemoryInputError` (and its subclasses) to JSON-RPC -32009 "invalid
input". Any other exception from the memory layer is a fault in the daemon and reaches
the dispatcher, which answers -32603 and logs the stack trace: a plain ``ValueError`` is
never taken for the client's mistake.
"""

from __future__ import annotations


class MemoryInputError(ValueError):
    """Refused input; nothing was written."""
