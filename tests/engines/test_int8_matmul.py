"""int8 products for int8-weight models (sidecar/engines/int8_matmul.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from sidecar.engines import Embedder, embedder
from sidecar.engines.embedding_spec import EmbeddingSpec
from sidecar.engines.int8_matmul import rewrite_int8_matmuls

TEXTS = [
    "What did Caroline do after the support group meeting?",
    "I went hiking with my dog last weekend and it rained the whole time.",
    "Remind me about the dentist appointment on Tuesday at 3pm.",
    "The quarterly report shows revenue grew 12% while costs fell.",
    "ok",
    " ".join(["a long document about gardening, tomatoes and the summer heat"] * 30),
]


def _ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


def _run(
    model: bytes | str, feed: dict[str, npt.NDArray[np.float32]]
) -> list[npt.NDArray[np.float32]]:
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return [np.asarray(x) for x in sess.run(None, feed)]


def _synthetic(path: Path) -> dict[str, npt.NDArray[np.float32]]:
    """Three dequantized weights: per-column scale read by two MatMuls, per-tensor scale, and a
    per-column one whose float value is also a graph output (its dequantization must stay)."""
    rng = np.random.default_rng(7)
    k, n = 40, 24  # K not a multiple of the block: the padding must not change the result
    qs = {name: rng.integers(-127, 128, (k, n)).astype(np.int8) for name in ("w1", "w2", "w3")}
    scales = {
        "w1": rng.uniform(0.001, 0.01, (1, n)).astype(np.float32),
        "w2": np.array(0.004, dtype=np.float32),
        "w3": rng.uniform(0.001, 0.01, (n,)).astype(np.float32),
    }
    inits = [numpy_helper.from_array(q, f"{w}_q") for w, q in qs.items()]
    inits += [numpy_helper.from_array(s, f"{w}_s") for w, s in scales.items()]
    nodes = []
    for w in qs:
        nodes.append(helper.make_node("Cast", [f"{w}_q"], [f"{w}_f"], to=TensorProto.FLOAT))
        nodes.append(helper.make_node("Mul", [f"{w}_f", f"{w}_s"], [w]))
    nodes += [
        helper.make_node("MatMul", ["a", "w1"], ["y1"]),
        helper.make_node("MatMul", ["b", "w1"], ["y2"]),
        helper.make_node("MatMul", ["a", "w2"], ["y3"]),
        helper.make_node("MatMul", ["a", "w3"], ["y4"]),
    ]
    outs = [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None) for i in range(1, 5)]
    outs.append(helper.make_tensor_value_info("w3", TensorProto.FLOAT, [k, n]))
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [None, k]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 3, k]),
        ],
        outs,
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return {
        "a": rng.standard_normal((5, k)).astype(np.float32),
        "b": rng.standard_normal((2, 3, k)).astype(np.float32),
    }


def test_synthetic_graph_is_rewritten_and_agrees(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    feed = _synthetic(path)
    expected = _run(str(path), feed)
    rewritten = rewrite_int8_matmuls(path)
    assert rewritten is not None and rewritten.matmuls == 4 and rewritten.block_size == 16
    model = onnx.load_from_string(rewritten.model)
    ops = _ops(model)
    assert ops.count("MatMulNBits") == 4 and "MatMul" not in ops
    # w1 and w2 lost their float path; w3's stays because the graph outputs it
    assert ops.count("Cast") == 1 and ops.count("Mul") == 1
    names = {t.name for t in model.graph.initializer}
    assert "w1_q" not in names and "w2_q" not in names and "w3_q" in names
    # two readers of w1 share one packed copy
    assert sum(1 for t in model.graph.initializer if t.name.startswith("w1_q_nbits8")) == 2
    got = _run(rewritten.model, feed)
    np.testing.assert_array_equal(got[4], expected[4])  # the float weight itself is untouched
    for g, e in zip(got[:4], expected[:4], strict=True):
        # int8 activations (blocks of 16): error a small fraction of the output's scale
        assert np.abs(g - e).max() <= 0.02 * np.abs(e).max()
        cos = float((g.ravel() @ e.ravel()) / np.linalg.norm(g) / np.linalg.norm(e))
        assert cos > 0.9995


def test_a_model_without_the_pattern_is_left_alone(tmp_path: Path) -> None:
    w = numpy_helper.from_array(np.ones((4, 3), dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [w],
    )
    path = tmp_path / "float.onnx"
    onnx.save(helper.make_model(graph), str(path))
    assert rewrite_int8_matmuls(path) is None


def test_block_size_must_be_a_power_of_two(tmp_path: Path) -> None:
    for bad in (8, 24):
        with pytest.raises(ValueError, match="power of two"):
            rewrite_int8_matmuls(tmp_path / "unused.onnx", block_size=bad)


def test_default_model_runs_its_products_in_int8(minilm_spec: EmbeddingSpec) -> None:
    rewritten = rewrite_int8_matmuls(minilm_spec.model.path)
    assert rewritten is not None
    # six layers: Q, K, V, attention output, two feed-forward products
    assert rewritten.matmuls == 36
    ops = _ops(onnx.load_from_string(rewritten.model))
    assert ops.count("MatMulNBits") == 36
    assert ops.count("Cast") < 10  # the 36 weight dequantizations are gone


def test_int8_vectors_agree_with_the_float_path(minilm_spec: EmbeddingSpec) -> None:
    fast, exact = Embedder(minilm_spec), Embedder(minilm_spec, int8_matmul=False)
    try:
        for kind in ("document", "query"):
            a = fast.embed_sync(TEXTS, kind).vectors
            b = exact.embed_sync(TEXTS, kind).vectors
            # short texts agree least (a two-word turn: 0.9985 of 1,948 LoCoMo texts)
            assert float((a * b).sum(axis=1).min()) > 0.998
            assert float(np.median((a * b).sum(axis=1))) > 0.9995
        compute = fast.status()["compute"]
        assert compute["matmul"] == "int8" and compute["matmuls"] == 36
        assert compute["probeCosine"] > embedder.INT8_MIN_COSINE
        assert exact.status()["compute"] == {
            "matmul": "float32",
            "reason": "disabled by embedding.int8_matmul",
        }
        # the same neighbours either way
        docs = fast.embed_sync(TEXTS[:4], "document").vectors
        q = fast.embed_sync(["a walk with the dog in the rain"], "query").vectors[0]
        q_exact = exact.embed_sync(["a walk with the dog in the rain"], "query").vectors[0]
        assert int(np.argmax(docs @ q)) == int(np.argmax(docs @ q_exact)) == 1
    finally:
        fast.close()
        exact.close()


def test_disagreeing_int8_products_keep_the_float_path(
    minilm_spec: EmbeddingSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The load-time guard: int8 products that do not reproduce the float probe vector are not
    used (here by demanding an agreement no rounding can reach)."""
    monkeypatch.setattr(embedder, "INT8_MIN_COSINE", 1.5)
    emb = Embedder(minilm_spec)
    try:
        vec = emb.embed_sync(["hello there"], "query").vectors[0]
        compute = emb.status()["compute"]
        assert compute["matmul"] == "float32"
        assert "disagree" in compute["reason"]
        exact = Embedder(minilm_spec, int8_matmul=False)
        try:
            np.testing.assert_array_equal(
                vec, exact.embed_sync(["hello there"], "query").vectors[0]
            )
        finally:
            exact.close()
    finally:
        emb.close()


def test_a_float_model_keeps_its_graph_and_says_why(nomic_like: Embedder) -> None:
    nomic_like.embed_sync(["x"], "query")
    assert nomic_like.status()["compute"] == {
        "matmul": "float32",
        "reason": "the model has no int8-weight products",
    }
