"""Errors raised by the model engines.

Every message names what is wrong, the file or setting involved, and how to fix it, because these
messages reach operators through ``health``/``status`` and through RPC errors.
"""

from __future__ import annotations


class EngineError(Exception):
    """Base class of every engine error."""


class EngineConfigError(EngineError):
    """A setting selects something that does not exist or contradicts another setting."""


class AssetError(EngineError):
    """A model asset (ONNX file, tokenizer, manifest) is missing, unreadable or corrupt."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class AssetNotFoundError(AssetError):
    """A required model asset does not exist."""


class AssetHashMismatchError(AssetError):
    """A model asset's sha256 differs from the pinned value (corrupt or replaced file)."""


class ManifestError(AssetError):
    """An ``embedding.json`` / ``summarizer.json`` manifest is malformed or inconsistent."""


class ModelLoadError(EngineError):
    """The model could not be loaded (the reason is in the message)."""


class ModelUnavailableError(EngineError):
    """The engine is not configured or its model failed; the message says why."""


class InvalidInputError(EngineError, ValueError):
    """The caller's input cannot be processed (empty text, wrong type, bad parameter)."""


class CancelledError(EngineError):
    """The operation was cancelled through its cancellation token."""
