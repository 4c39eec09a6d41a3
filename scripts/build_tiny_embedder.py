"""Build the tiny Nomic-like embedding fixture used by the embedder tests.

Writes ``tests/fixtures/tiny_embed``: ``model.onnx``, ``tokenizer.json`` and an ``embedding.json``
declaring the ``nomic-embed-text-v1.5`` profile (768 dimensions, ``search_document: `` /
``search_query: `` prefixes, 512-token windows with stride 256, Matryoshka 64/256/768), so the
Nomic code path of the embedder (prefixes, windows, re-normalized window means, tiers) runs
without the real 500 MB model.

The model is not a language model: it is token embedding + position embedding + token-type
embedding (32 dims), a dense projection to 768 dims and tanh, masked by ``attention_mask``,
output ``last_hidden_state`` [batch, seq, 768]. Position embeddings stop at 512, like a 512-token
window, so feeding a longer sequence fails loudly. Weights are seeded numpy draws, so a rebuild is
byte-for-byte identical. Only needs the ``onnx`` and ``tokenizers`` packages (no torch).

The tokenizer is BERT-like (lower-casing normalizer, BERT pre-tokenizer, WordPiece with every
letter and digit as a word-start and ``##`` piece, so any ASCII text tokenizes without
``[UNK]``), ``[CLS] $A [SEP]`` template, no truncation (like Nomic's tokenizer).

Usage:  .venv/bin/python scripts/build_tiny_embedder.py [--out tests/fixtures/tiny_embed]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import string
from pathlib import Path

import numpy as np

SEED = 7
HIDDEN = 32
DIMS = 768
MAX_POSITIONS = 512
WORDS = [
    "search",
    "document",
    "query",
    "the",
    "a",
    "an",
    "of",
    "to",
    "and",
    "in",
    "is",
    "it",
    "that",
    "for",
    "on",
    "with",
    "as",
    "was",
    "be",
    "by",
    "this",
    "are",
    "or",
    "from",
    "at",
    "which",
    "but",
    "not",
    "have",
    "has",
    "had",
    "you",
    "your",
    "we",
    "they",
    "he",
    "she",
    "memory",
    "agent",
    "user",
    "daemon",
    "model",
    "embed",
    "vector",
    "window",
    "cat",
    "dog",
    "deploy",
    "friday",
    "release",
    "notes",
    "team",
    "python",
    "code",
    "test",
]


def build_tokenizer(out: Path) -> int:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = list(string.ascii_lowercase + string.digits)
    punct = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
    vocab: dict[str, int] = {}
    for piece in [*specials, *chars, *punct, *(f"##{c}" for c in chars), *WORDS]:
        vocab.setdefault(piece, len(vocab))
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens(specials)
    tok.save(str(out / "tokenizer.json"))
    return len(vocab)


def build_model(out: Path, vocab_size: int) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(SEED)
    tok_emb = rng.normal(0, 1, (vocab_size, HIDDEN)).astype(np.float32)
    pos_emb = rng.normal(0, 0.3, (MAX_POSITIONS, HIDDEN)).astype(np.float32)
    type_emb = rng.normal(0, 0.1, (2, HIDDEN)).astype(np.float32)
    proj = rng.normal(0, 1 / np.sqrt(HIDDEN), (HIDDEN, DIMS)).astype(np.float32)
    bias = rng.normal(0, 0.05, (DIMS,)).astype(np.float32)
    inits = [
        numpy_helper.from_array(tok_emb, "tok_emb"),
        numpy_helper.from_array(pos_emb, "pos_emb"),
        numpy_helper.from_array(type_emb, "type_emb"),
        numpy_helper.from_array(proj, "proj"),
        numpy_helper.from_array(bias, "bias"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "one_idx"),
        numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"),
        numpy_helper.from_array(np.array(1, dtype=np.int64), "one"),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "last_axis"),
    ]
    nodes = [
        helper.make_node("Gather", ["tok_emb", "input_ids"], ["e_tok"]),
        helper.make_node("Gather", ["type_emb", "token_type_ids"], ["e_type"]),
        helper.make_node("Shape", ["input_ids"], ["shape"]),
        helper.make_node("Gather", ["shape", "one_idx"], ["seq_len_1"]),
        helper.make_node("Squeeze", ["seq_len_1"], ["seq_len"]),
        helper.make_node("Range", ["zero", "seq_len", "one"], ["positions"]),
        helper.make_node("Gather", ["pos_emb", "positions"], ["e_pos"]),
        helper.make_node("Add", ["e_tok", "e_type"], ["s1"]),
        helper.make_node("Add", ["s1", "e_pos"], ["s2"]),
        helper.make_node("MatMul", ["s2", "proj"], ["m1"]),
        helper.make_node("Add", ["m1", "bias"], ["m2"]),
        helper.make_node("Tanh", ["m2"], ["h"]),
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask_f", "last_axis"], ["mask_3"]),
        helper.make_node("Mul", ["h", "mask_3"], ["last_hidden_state"]),
    ]
    ints = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
        for n in ("input_ids", "attention_mask", "token_type_ids")
    ]
    output = helper.make_tensor_value_info(
        "last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", DIMS]
    )
    graph = helper.make_graph(nodes, "tiny_nomic_like", ints, [output], initializer=inits)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="build_tiny_embedder"
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(out / "model.onnx"))


def main(argv: list[str] | None = None) -> int:
    root = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=root / "tests" / "fixtures" / "tiny_embed")
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    vocab_size = build_tokenizer(out)
    build_model(out, vocab_size)
    manifest = {
        "backend": "onnx-local",
        "profile": "nomic-embed-text-v1.5",
        "family": "tiny-nomic-like-test",
        "model": "model.onnx",
        "tokenizer": "tokenizer.json",
        "dimensions": DIMS,
        "normalize": True,
        "inputNames": ["input_ids", "attention_mask", "token_type_ids"],
        "outputName": "last_hidden_state",
        "pooling": "mean",
        "addSpecialTokens": True,
        "documentPrefix": "search_document: ",
        "queryPrefix": "search_query: ",
        "maxContextTokens": 8192,
        "windowTokens": 512,
        "windowStride": 256,
        "matryoshkaDims": [64, 256, 768],
        "sha256": {
            name: hashlib.sha256((out / name).read_bytes()).hexdigest()
            for name in ("model.onnx", "tokenizer.json")
        },
    }
    (out / "embedding.json").write_text(json.dumps(manifest, indent=2) + "\n")
    total = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    print(f"wrote {out} ({total / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
