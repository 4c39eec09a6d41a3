"""Background work at the lowest CPU priority, so that it takes only what the daemon's
requests and loads leave (Linux keeps a niceness per thread; elsewhere nothing changes).

Used by the threads whose work nothing waits for: the page check of a large database
beside the start (``store/page_check.py``), the build of a view's graph from scratch
(``assembly/view_graph.py``), while the store's own index answers meanwhile, and the
saves of a view's rows and terms (``assembly/view_snapshot.py``, ``view_terms.py``),
which only a shutdown waits for.
"""

from __future__ import annotations

import contextlib
import os
import threading

#: The niceness those threads take: the lowest priority.
BACKGROUND_NICE = 19


def lower_this_thread() -> None:
    """Give the calling thread the lowest scheduling priority (for good: a thread cannot
    raise it again without privileges, so give it only to threads kept for such work)."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)
