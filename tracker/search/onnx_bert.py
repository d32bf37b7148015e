"""A BERT encoder as an ONNX graph over weights the caller holds, run by onnxruntime.

The graph (written by :mod:`tracker.search.onnx_proto`) takes the summed
embeddings of a packed batch of tokens (``embedded``: tokens by hidden) and
an additive attention mask (tokens by tokens), and gives the last hidden
state of every token. Its weights are external initializers: onnxruntime
reads them from the caller's arrays (views of the safetensors file, in their
(out, in) layout, hence Gemm with ``transB``) and packs each matrix for its
GEMM kernels once, when the session is created. Fusing Q, K and V into one
product was measured and gained nothing at one thread; keeping the file's
tensors as they are avoids a copy.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from tracker.search import onnx_proto as proto

# Else onnxruntime keeps a device id and an event database under ~/.cache/Microsoft at its first session.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
from onnxruntime import GraphOptimizationLevel, InferenceSession, OrtValue, SessionOptions

Array = npt.NDArray[np.float32]
Weights = dict[str, Array]
OPSET = 20  # Gelu (exact, with erf, as BERT's) is an operator from opset 20 on
IR_VERSION = 10


class _Graph:
    """Nodes, external initializers and small constants, in the order they are added."""

    def __init__(self) -> None:
        self.nodes: list[bytes] = []
        self.external: dict[str, tuple[int, ...]] = {}  # name: shape
        self.constants: list[bytes] = []

    def node(self, op: str, inputs: list[str], **attributes: Any) -> str:
        output = f"{op}_{len(self.nodes)}"
        self.nodes.append(proto.node(op, inputs, [output], **attributes))
        return output

    def constant(self, name: str, value: npt.NDArray[Any]) -> str:
        kind, dtype = (proto.INT64, "<i8") if value.dtype == np.int64 else (proto.FLOAT, "<f4")
        self.constants.append(proto.tensor(name, kind, value.shape, value.astype(dtype).tobytes()))
        return name

    def linear(self, x: str, prefix: str, weights: Weights) -> str:
        names = [f"{prefix}.weight", f"{prefix}.bias"]
        self.external.update({name: weights[name].shape for name in names})
        return self.node("Gemm", [x, *names], transB=1)

    def layer_norm(self, x: str, prefix: str, weights: Weights, eps: float) -> str:
        names = [f"{prefix}.LayerNorm.weight", f"{prefix}.LayerNorm.bias"]
        self.external.update({name: weights[name].shape for name in names})
        return self.node("LayerNormalization", [x, *names], axis=-1, epsilon=eps)

    def model(self, output: str, hidden: int) -> bytes:
        external = [proto.external_tensor(name, shape) for name, shape in self.external.items()]
        return proto.model(
            name="bert",
            nodes=self.nodes,
            initializers=[*self.constants, *external],
            inputs=[
                proto.value_info("embedded", proto.FLOAT, ["tokens", hidden]),
                proto.value_info("mask", proto.FLOAT, ["tokens", "tokens"]),
            ],
            outputs=[proto.value_info(output, proto.FLOAT, ["tokens", hidden])],
            ir_version=IR_VERSION,
            opset=OPSET,
        )


def _attention(graph: _Graph, x: str, prefix: str, weights: Weights) -> str:
    """Scaled dot-product attention of every head, under the ``mask`` input."""

    def heads(projection: str, perm: list[int]) -> str:
        split = graph.node(
            "Reshape", [graph.linear(x, f"{prefix}.self.{projection}", weights), "heads_shape"]
        )
        return graph.node("Transpose", [split], perm=perm)  # (heads, tokens, size), or (heads, size, tokens)

    query, key, value = heads("query", [1, 0, 2]), heads("key", [1, 2, 0]), heads("value", [1, 0, 2])
    scores = graph.node("Mul", [graph.node("MatMul", [query, key]), "scale"])
    attention = graph.node("Softmax", [graph.node("Add", [scores, "mask"])], axis=-1)
    context = graph.node("Transpose", [graph.node("MatMul", [attention, value])], perm=[1, 0, 2])
    return graph.node("Reshape", [context, "hidden_shape"])


def _encoder_graph(weights: Weights, config: dict[str, Any]) -> tuple[_Graph, str]:
    graph = _Graph()
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    eps = float(config["layer_norm_eps"])
    graph.constant("heads_shape", np.array([0, heads, hidden // heads], dtype=np.int64))
    graph.constant("hidden_shape", np.array([0, hidden], dtype=np.int64))
    graph.constant("scale", np.array(1 / np.sqrt(hidden // heads), dtype=np.float32))
    x = graph.layer_norm("embedded", "embeddings", weights, eps)
    for n in range(int(config["num_hidden_layers"])):
        layer = f"encoder.layer.{n}"
        context = _attention(graph, x, f"{layer}.attention", weights)
        attended = graph.node("Add", [graph.linear(context, f"{layer}.attention.output.dense", weights), x])
        x = graph.layer_norm(attended, f"{layer}.attention.output", weights, eps)
        inner = graph.node("Gelu", [graph.linear(x, f"{layer}.intermediate.dense", weights)])
        out = graph.node("Add", [graph.linear(inner, f"{layer}.output.dense", weights), x])
        x = graph.layer_norm(out, f"{layer}.output", weights, eps)
    return graph, x


@dataclass(frozen=True)
class Encoder:
    """The session, and the values it reads its weights from (they must outlive it)."""

    session: InferenceSession
    values: tuple[OrtValue, ...]

    def run(self, embedded: Array, mask: Array) -> Array:
        """The last hidden state of each token of ``embedded``; ``mask`` adds to the attention scores."""
        hidden = self.session.run(None, {"embedded": embedded, "mask": mask})[0]
        return np.asarray(hidden, dtype=np.float32)


def bert_encoder(weights: Weights, config: dict[str, Any], *, threads: int = 1) -> Encoder:
    """The encoder of ``config`` (a BERT ``config.json``) with ``weights`` (named as in its safetensors)."""
    if config.get("hidden_act") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError("not a BERT encoder this graph computes (gelu activation, absolute positions)")
    graph, output = _encoder_graph(weights, config)
    options = SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
    names = list(graph.external)
    values = tuple(OrtValue.ortvalue_from_numpy(weights[name]) for name in names)
    options.add_external_initializers(names, list(values))
    model = graph.model(output, int(config["hidden_size"]))
    session = InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return Encoder(session=session, values=values)
