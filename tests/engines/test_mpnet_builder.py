"""The optional all-mpnet-base-v2 profile: the ONNX graph scripts/build_mpnet_embedder.py
writes computes MPNet (checked against an independent numpy forward pass on a tiny
random model), the embedder runs it (int8 products included), and the daemon takes the
relevance floor chosen for the profile."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
import pytest

from scripts.build_mpnet_embedder import (
    build_model,
    quantize_columns,
    read_safetensors,
    relative_buckets,
    write_profile,
)
from sidecar.assembly.selection import DEFAULT_ASSEMBLY
from sidecar.engines import EngineHub
from sidecar.engines.embedding_spec import MINILM, MPNET, PROFILES
from sidecar.services import daemon_assembly

CONFIG = {
    "hidden_size": 16,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "layer_norm_eps": 1e-5,
    "pad_token_id": 1,
    "vocab_size": 40,
}
Arr = npt.NDArray[Any]


def _weights(seed: int = 3) -> dict[str, Arr]:
    rng = np.random.default_rng(seed)
    h, v = CONFIG["hidden_size"], CONFIG["vocab_size"]

    def r(*shape: int, s: float = 0.3) -> Arr:
        return (rng.standard_normal(shape) * s).astype(np.float32)

    w: dict[str, Arr] = {
        "embeddings.word_embeddings.weight": r(v, h),
        "embeddings.position_embeddings.weight": r(64, h),
        "embeddings.LayerNorm.weight": 1 + r(h, s=0.1),
        "embeddings.LayerNorm.bias": r(h, s=0.1),
        "encoder.relative_attention_bias.weight": r(32, CONFIG["num_attention_heads"]),
    }
    for i in range(CONFIG["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for name in "qkvo":
            w[f"{p}attention.attn.{name}.weight"] = r(h, h)
            w[f"{p}attention.attn.{name}.bias"] = r(h, s=0.1)
        w[p + "intermediate.dense.weight"] = r(4 * h, h)
        w[p + "intermediate.dense.bias"] = r(4 * h, s=0.1)
        w[p + "output.dense.weight"] = r(h, 4 * h)
        w[p + "output.dense.bias"] = r(h, s=0.1)
        for ln in ("attention.LayerNorm", "output.LayerNorm"):
            w[f"{p}{ln}.weight"] = 1 + r(h, s=0.1)
            w[f"{p}{ln}.bias"] = r(h, s=0.1)
    return w


def _reference(w: dict[str, Arr], ids: list[int]) -> Arr:
    """MPNet's forward pass for one unpadded sequence, written from the paper's model
    (HF ``modeling_mpnet``), float64, with the exact erf."""
    heads, h = CONFIG["num_attention_heads"], CONFIG["hidden_size"]
    d = h // heads

    def ln(x: Arr, p: str) -> Arr:
        m = x.mean(-1, keepdims=True)
        var = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(var + 1e-5) * w[p + ".weight"] + w[p + ".bias"]

    n = len(ids)
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][np.arange(n) + 2]
    )
    x = ln(x.astype(np.float64), "embeddings.LayerNorm")
    bias = np.zeros((heads, n, n))
    table = w["encoder.relative_attention_bias.weight"]
    for qi in range(n):
        for ki in range(n):
            rel = ki - qi
            bucket = 16 if rel > 0 else 0
            dist = abs(rel)
            if dist < 8:
                bucket += dist
            else:
                bucket += min(15, 8 + int(math.log(dist / 8) / math.log(128 / 8) * 8))
            bias[:, qi, ki] = table[bucket]
    erf = np.vectorize(math.erf)
    for i in range(CONFIG["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def lin(x: Arr, name: str, p: str = p) -> Arr:
            return np.asarray(x @ w[p + name + ".weight"].T + w[p + name + ".bias"])

        q, k, v = (
            lin(x, f"attention.attn.{c}").reshape(n, heads, d).transpose(1, 0, 2) for c in "qkv"
        )
        s = q @ k.transpose(0, 2, 1) / math.sqrt(d) + bias
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        ctx = (s @ v).transpose(1, 0, 2).reshape(n, h)
        x = ln(lin(ctx, "attention.attn.o") + x, p + "attention.LayerNorm")
        up = lin(x, "intermediate.dense")
        up = 0.5 * up * (1 + erf(up / math.sqrt(2)))
        x = ln(lin(up, "output.dense") + x, p + "output.LayerNorm")
    return x


def _session(model: Any) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_relative_buckets_follow_mpnet() -> None:
    b = relative_buckets(300)
    assert b[0, 0] == 0 and b[0, 1] == 17 and b[1, 0] == 1  # later keys in the upper half
    assert b[20, 0] == 10 and b[0, 20] == 26  # log buckets past 8 positions
    assert b[299, 0] == 15 and b[0, 299] == 31  # capped at max_distance


def test_int8_columns_round_trip() -> None:
    w = np.random.default_rng(0).standard_normal((32, 8)).astype(np.float32)
    q, scale = quantize_columns(w)
    assert q.dtype == np.int8 and scale.shape == (8,)
    assert np.abs(q.astype(np.float32) * scale - w).max() <= scale.max() / 2 + 1e-6


def test_graph_matches_the_reference_forward_pass_with_padding() -> None:
    w = _weights()
    sess = _session(build_model(w, CONFIG, max_tokens=16))
    seqs = [[0, 5, 6, 7, 8, 2], [0, 9, 2]]
    ids = np.array([s + [1] * (6 - len(s)) for s in seqs], dtype=np.int64)
    mask = (np.arange(6)[None, :] < np.array([[len(s)] for s in seqs])).astype(np.int64)
    (out,) = sess.run(None, {"input_ids": ids, "attention_mask": mask})
    assert out.shape == (2, 6, CONFIG["hidden_size"])
    for row, s in enumerate(seqs):
        ref = _reference(w, s)
        got = out[row, : len(s)]
        cos = (got * ref).sum(-1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(ref, axis=-1)
        assert cos.min() > 0.999, cos  # int8 weights: close, not equal


def test_longer_than_the_bias_table_fails_loudly() -> None:
    sess = _session(build_model(_weights(), CONFIG, max_tokens=8))
    ids = np.zeros((1, 9), dtype=np.int64)
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime raises its own type
        sess.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})


def test_safetensors_and_the_written_profile(tmp_path: Path) -> None:
    w = _weights()
    header: dict[str, Any] = {}
    body = b""
    for name, arr in w.items():
        data = arr.astype(np.float32).tobytes()
        header[name] = {
            "dtype": "F32",
            "shape": list(arr.shape),
            "data_offsets": [len(body), len(body) + len(data)],
        }
        body += data
    head = json.dumps(header).encode()
    read = read_safetensors(struct.pack("<Q", len(head)) + head + body)
    assert all(np.array_equal(read[k], w[k]) for k in w)

    path = write_profile(tmp_path, read, CONFIG, b'{"version": "1.0"}')
    manifest = json.loads(path.read_text())
    assert manifest["profile"] == "all-mpnet-base-v2"
    assert manifest["inputNames"] == ["input_ids", "attention_mask"]
    assert manifest["maxContextTokens"] == 384
    assert set(manifest["sha256"]) == {"model.onnx", "tokenizer.json"}
    assert (tmp_path / "model.onnx").stat().st_size > 0


def test_the_daemon_takes_the_profiles_relevance_floor() -> None:
    assert PROFILES["all-mpnet-base-v2"] is MPNET
    assert MINILM.relevance_floor == DEFAULT_ASSEMBLY.relevance_floor

    def hub(profile: str) -> EngineHub:
        return cast(EngineHub, SimpleNamespace(embedder=SimpleNamespace(profile=profile)))

    assert daemon_assembly(hub("all-mpnet-base-v2")).relevance_floor == MPNET.relevance_floor
    assert daemon_assembly(hub("all-minilm-l6-v2")).relevance_floor == 0.145
    assert daemon_assembly(hub("custom-model")).relevance_floor == 0.145
    assert daemon_assembly(None).render == "compact"


def test_the_daemon_takes_the_profiles_speaker_focus() -> None:
    """MiniLM's vectors are dominated by a speaker's name, MPNet's are not (LoCoMo dev:
    0.5 helps the first and costs the second): the weight follows the profile."""

    def hub(profile: str) -> EngineHub:
        return cast(EngineHub, SimpleNamespace(embedder=SimpleNamespace(profile=profile)))

    assert daemon_assembly(hub("all-minilm-l6-v2")).speaker_label_weight == 0.5
    assert daemon_assembly(hub("all-mpnet-base-v2")).speaker_label_weight == 0.0
    assert daemon_assembly(hub("custom-model")).speaker_label_weight == 0.5
    # the floor is still the profile's beside it
    assert daemon_assembly(hub("all-mpnet-base-v2")).relevance_floor == MPNET.relevance_floor
