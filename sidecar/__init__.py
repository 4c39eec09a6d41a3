"""libravdbd: the local-first memory and context daemon."""

__version__ = "0.2.0"
SERVER_NAME = "libravdbd"
