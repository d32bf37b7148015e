"""The hand-written ONNX messages make a model onnxruntime loads and computes as numpy does."""

from __future__ import annotations

import numpy as np

from tracker.search import onnx_proto as proto

# Through the module that turns onnxruntime's telemetry off before onnxruntime is first imported.
from tracker.search.onnx_bert import InferenceSession, OrtValue, SessionOptions


def _session(nodes: list[bytes], initializers: list[bytes], options: SessionOptions | None = None):
    model = proto.model(
        name="tiny",
        nodes=nodes,
        initializers=initializers,
        inputs=[proto.value_info("x", proto.FLOAT, ["rows", 3])],
        outputs=[proto.value_info("y", proto.FLOAT, [2, "rows"])],
        ir_version=10,
        opset=20,
    )
    return InferenceSession(model, options or SessionOptions(), providers=["CPUExecutionProvider"])


def test_a_model_of_every_field_used_computes_what_numpy_does():
    """Gemm (int attribute), LayerNormalization (negative int, float), Transpose (ints), a constant and
    an external initializer."""
    weight = np.arange(6, dtype=np.float32).reshape(2, 3) / 10
    bias = np.array([0.5, -0.25], dtype=np.float32)
    options = SessionOptions()
    options.add_external_initializers(["w"], [OrtValue.ortvalue_from_numpy(weight)])
    session = _session(
        [
            proto.node("Gemm", ["x", "w", "b"], ["g"], transB=1),
            proto.node("LayerNormalization", ["g", "scale"], ["n"], axis=-1, epsilon=1e-5),
            proto.node("Transpose", ["n"], ["y"], perm=[1, 0]),
        ],
        [
            proto.tensor("b", proto.FLOAT, [2], bias.tobytes()),
            proto.tensor("scale", proto.FLOAT, [2], np.array([2.0, 3.0], dtype="<f4").tobytes()),
            proto.external_tensor("w", [2, 3]),
        ],
        options,
    )
    x = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0], [0.0, 0.0, 1.0]], dtype=np.float32)
    g = x @ weight.T + bias
    expected = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5) * [2.0, 3.0]).T
    assert np.allclose(session.run(None, {"x": x})[0], expected, atol=1e-5)


def test_long_fields_and_large_values_are_encoded_whole():
    """Field lengths and values past 127 take several varint bytes."""
    long_name = "n" * 300
    session = _session(
        [
            proto.node("Reshape", ["x", "shape"], [long_name]),
            proto.node("Transpose", [long_name], ["y"], perm=[1, 0]),
        ],
        [proto.tensor("shape", proto.INT64, [2], np.array([-1, 3], dtype="<i8").tobytes())],
    )
    x = np.arange(600, dtype=np.float32).reshape(200, 3)
    assert np.array_equal(session.run(None, {"x": x})[0], x.T)


def test_varints_are_protobufs():
    """The examples of protobuf's encoding guide: 150 in field 1, and a negative int64 in ten bytes."""
    assert proto._int(1, 150) == bytes.fromhex("089601")
    assert proto._int(1, -1) == bytes.fromhex("08ffffffffffffffffff01")
