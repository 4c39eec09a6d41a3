"""Exit statuses of every command of ``libravdb`` and ``libravdbd``, defined once.

Each command documents the ones it uses (its ``--help`` epilog, docs/operations.md); the
numbers mean the same everywhere: 0 done, 1 the command ran and what it did failed (the
daemon answered with an error, a check found a problem, a copy did not complete), 2 it
could not run (no daemon answered, or unusable arguments or settings).
"""

from __future__ import annotations

from typing import Final

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_RPC_ERROR: Final = EXIT_FAILED  # the daemon answered with an error
EXIT_PROBLEM: Final = EXIT_FAILED  # doctor: a check failed
EXIT_NO_ANSWER: Final = 2  # cannot connect, connection lost, timeout, malformed reply
EXIT_UNUSABLE: Final = 2  # unusable arguments or settings
EXIT_BROKEN_PIPE: Final = 141  # the reader of stdout went away (``| head``), as SIGPIPE would
