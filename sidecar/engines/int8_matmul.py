"""Run the matrix products of an int8-weight ONNX model in int8.

The default embedding model stores each linear layer as an int8 weight with one float scale per
output column, dequantized inside the graph (``Cast`` to float, ``Mul`` by the scale) before a
float ``MatMul``. onnxruntime folds that into float32 constants when it loads the model, so every
run streams 42 MB of float weights: a 16-token query spent three quarters of its time in those
products, bound by memory rather than arithmetic (docs/engines.md).

:func:`rewrite_int8_matmuls` replaces each such ``MatMul`` by ``com.microsoft.MatMulNBits`` with
8-bit weights and ``accuracy_level`` 4: the weights stay int8 (a quarter of the bytes) and the
activations are quantized per block of ``block_size`` values along the inner dimension, so the
products run on the CPU's int8 dot-product instructions. The weight values are carried over
exactly (``q + 128`` with the default zero point 128, the column scale repeated per block); the
only change is the activations' rounding: over the 1,948 texts of the LoCoMo dev split the vectors
agree with the float path's at a median cosine of 0.99988, the worst 0.9985 (a two-word turn).

Nothing else in the graph is touched. A model without the pattern comes back unchanged (``None``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnx
from onnx import helper, numpy_helper

MS_DOMAIN = "com.microsoft"
DEFAULT_BLOCK_SIZE = 16
# Parsing a large float model only to find nothing to rewrite costs seconds at every load.
MAX_MODEL_BYTES = 256 * 1024 * 1024
_INT8 = onnx.TensorProto.INT8
_FLOAT = onnx.TensorProto.FLOAT


@dataclass(frozen=True)
class Rewritten:
    model: bytes  # the serialized model to load instead of the file
    matmuls: int  # products now computed in int8
    block_size: int


@dataclass(frozen=True)
class _Dequantized:
    weight: str  # int8 initializer [K, N]
    scale: str  # float initializer: N column scales, or one for the whole tensor


def rewrite_int8_matmuls(path: Path, block_size: int = DEFAULT_BLOCK_SIZE) -> Rewritten | None:
    """The model at ``path`` with its dequantized int8 matmuls in int8, or None when it has none
    (or is too large to be worth parsing, or keeps its weights in external files)."""
    if block_size < 16 or block_size & (block_size - 1):
        raise ValueError(f"block_size must be a power of two >= 16, got {block_size}")
    if path.stat().st_size > MAX_MODEL_BYTES:
        return None
    model = onnx.load(str(path), load_external_data=False)
    if any(_is_external(t) for t in model.graph.initializer):
        return None
    count = rewrite_graph(model.graph, block_size)
    if not count:
        return None
    if not any(o.domain == MS_DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    return Rewritten(model.SerializeToString(), count, block_size)


def rewrite_graph(graph: onnx.GraphProto, block_size: int) -> int:
    """Rewrite ``graph`` in place; returns the number of matmuls replaced."""
    inits = {t.name: t for t in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    consumers = Counter(name for node in graph.node for name in node.input)
    consumers.update(o.name for o in graph.output)

    packed: dict[_Dequantized, tuple[str, str, int, int]] = {}
    new_inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []
    count = 0
    for node in graph.node:
        deq = _dequantized_weight(node, producer, inits) if node.op_type == "MatMul" else None
        if deq is None:
            nodes.append(node)
            continue
        if deq not in packed:
            q = numpy_helper.to_array(inits[deq.weight])
            scale = numpy_helper.to_array(inits[deq.scale]).astype(np.float32).reshape(-1)
            k, n = q.shape
            blob, scales = _pack(q, scale, block_size)
            base = f"{deq.weight}_nbits8"
            new_inits += [
                numpy_helper.from_array(blob, f"{base}_b"),
                numpy_helper.from_array(scales, f"{base}_scales"),
            ]
            packed[deq] = (f"{base}_b", f"{base}_scales", k, n)
        blob_name, scales_name, k, n = packed[deq]
        nodes.append(
            helper.make_node(
                "MatMulNBits",
                [node.input[0], blob_name, scales_name],
                list(node.output),
                name=f"{node.name or node.output[0]}_int8",
                domain=MS_DOMAIN,
                K=k,
                N=n,
                bits=8,
                block_size=block_size,
                accuracy_level=4,
            )
        )
        consumers[node.input[1]] -= 1
        count += 1
    if not count:
        return 0
    nodes = _without_dead(nodes, consumers)
    used = {name for node in nodes for name in node.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept + new_inits)
    return count


def _dequantized_weight(
    matmul: onnx.NodeProto,
    producer: dict[str, onnx.NodeProto],
    inits: dict[str, onnx.TensorProto],
) -> _Dequantized | None:
    """MatMul(A, Mul(Cast(int8 W[K, N]), scale)) with a per-column or per-tensor scale."""
    mul = producer.get(matmul.input[1])
    if mul is None or mul.op_type != "Mul" or len(mul.input) != 2:
        return None
    for cast_in, scale_in in ((mul.input[0], mul.input[1]), (mul.input[1], mul.input[0])):
        cast = producer.get(cast_in)
        if cast is None or cast.op_type != "Cast" or _cast_to(cast) != _FLOAT:
            continue
        weight, scale = inits.get(cast.input[0]), inits.get(scale_in)
        if weight is None or scale is None or weight.data_type != _INT8 or len(weight.dims) != 2:
            continue
        n = int(weight.dims[1])
        size = int(np.prod(scale.dims)) if scale.dims else 1
        per_column = list(scale.dims) in ([n], [1, n])
        if scale.data_type != _FLOAT or not (per_column or size == 1):
            continue
        return _Dequantized(weight.name, scale.name)
    return None


def _pack(
    q: npt.NDArray[np.int8], scale: npt.NDArray[np.float32], block_size: int
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float32]]:
    """MatMulNBits' layout: B [N, blocks, block_size] of q + 128 (zero point 128), K padded with
    the zero point; one scale per (column, block)."""
    k, n = q.shape
    blocks = -(-k // block_size)
    padded = np.full((blocks * block_size, n), 128, dtype=np.uint8)
    padded[:k] = (q.astype(np.int16) + 128).astype(np.uint8)
    blob = np.ascontiguousarray(padded.T.reshape(n, blocks, block_size))
    column = np.broadcast_to(scale, (n,)) if scale.size == 1 else scale
    scales = np.repeat(column.astype(np.float32)[:, None], blocks, axis=1).reshape(-1)
    return blob, scales


def _without_dead(nodes: list[onnx.NodeProto], consumers: Counter[str]) -> list[onnx.NodeProto]:
    """Drop the dequantizing Cast/Mul nodes nothing reads any more (a weight also read elsewhere
    keeps its float path for that reader)."""
    kept = list(nodes)
    changed = True
    while changed:
        changed = False
        for node in list(kept):
            if node.op_type in ("Cast", "Mul") and all(consumers[o] <= 0 for o in node.output):
                kept.remove(node)
                for name in node.input:
                    consumers[name] -= 1
                changed = True
    return kept


def _cast_to(node: onnx.NodeProto) -> int:
    for attr in node.attribute:
        if attr.name == "to":
            return int(attr.i)
    return -1


def _is_external(t: onnx.TensorProto) -> bool:
    return t.data_location == onnx.TensorProto.EXTERNAL
