"""Model engines: ONNX embedder, seq2seq + extractive summarizers, model lifecycle.

See docs/engines.md. The daemon uses :class:`EngineHub`; the memory and store layers use the
:class:`Embedder` (``await embed(...)`` on the loop, ``embed_sync(...)`` in worker threads) and
the :class:`Summarizer`.
"""

from .embedder import Embedder, EmbedResult
from .embedding_spec import EmbeddingSpec, resolve_embedding
from .errors import (
    AssetError,
    AssetHashMismatchError,
    AssetNotFoundError,
    CancelledError,
    EngineConfigError,
    EngineError,
    InvalidInputError,
    ManifestError,
    ModelLoadError,
    ModelUnavailableError,
)
from .hub import EngineHub
from .lifecycle import ModelSlot, ModelState
from .seq2seq import Seq2SeqSpec, Seq2SeqSummarizer, resolve_summarizer
from .summarizer import Summarizer, SummaryResult
from .vectors import l2_normalize, masked_mean, tier_vector, tiers

__all__ = [
    "AssetError",
    "AssetHashMismatchError",
    "AssetNotFoundError",
    "CancelledError",
    "EmbedResult",
    "Embedder",
    "EmbeddingSpec",
    "EngineConfigError",
    "EngineError",
    "EngineHub",
    "InvalidInputError",
    "ManifestError",
    "ModelLoadError",
    "ModelSlot",
    "ModelState",
    "ModelUnavailableError",
    "Seq2SeqSpec",
    "Seq2SeqSummarizer",
    "Summarizer",
    "SummaryResult",
    "l2_normalize",
    "masked_mean",
    "resolve_embedding",
    "resolve_summarizer",
    "tier_vector",
    "tiers",
]
