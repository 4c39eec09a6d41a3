"""Which services the daemon runs: the store and the model engines.

Kept apart from the server so tests and tools can build an App with the same wiring.
"""

from __future__ import annotations

from sidecar.app import App


class StartupError(Exception):
    """A service could not start; the daemon exits 1 with this message."""


def install_services(app: App) -> None:
    """Register the daemon's services on ``app`` (started later by ``app.start``)."""
    # The store and the engines register here as they land (issues 3 and 4).
    return None
