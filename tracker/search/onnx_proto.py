"""The few ONNX messages an encoder graph needs, in protobuf's wire format, without the onnx package.

onnxruntime loads a model from its serialized ``ModelProto``; building one
with the ``onnx`` package would install 35 MB (and import it) for a graph of
a few hundred nodes. These functions write the fields used here, with the
field numbers of ``onnx.proto``: a message is the concatenation of its
fields, each a key (field number and wire type) then a varint, a
length-delimited value or four bytes of float.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

FLOAT, INT64 = 1, 7  # TensorProto.DataType
_ATTRIBUTE_FLOAT, _ATTRIBUTE_INT, _ATTRIBUTE_INTS = 1, 2, 7  # AttributeProto.AttributeType
_EXTERNAL = 1  # TensorProto.DataLocation
_VARINT, _LENGTH, _FIXED32 = 0, 2, 5


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # a negative int64 is written as its two's complement
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _int(field: int, value: int) -> bytes:
    return _varint(field << 3 | _VARINT) + _varint(value)


def _bytes(field: int, value: bytes) -> bytes:
    return _varint(field << 3 | _LENGTH) + _varint(len(value)) + value


def _text(field: int, value: str) -> bytes:
    return _bytes(field, value.encode())


def _attribute(name: str, value: float | int | Sequence[int]) -> bytes:
    """AttributeProto: name 1, f 2, i 3, ints 8, type 20."""
    if isinstance(value, float):
        body = _varint(2 << 3 | _FIXED32) + struct.pack("<f", value) + _int(20, _ATTRIBUTE_FLOAT)
    elif isinstance(value, int):
        body = _int(3, value) + _int(20, _ATTRIBUTE_INT)
    else:
        body = b"".join(_int(8, item) for item in value) + _int(20, _ATTRIBUTE_INTS)
    return _text(1, name) + body


def node(
    op_type: str, inputs: Sequence[str], outputs: Sequence[str], **attributes: float | Sequence[int]
) -> bytes:
    """NodeProto: input 1, output 2, op_type 4, attribute 5 (in the default domain)."""
    fields = [_text(1, name) for name in inputs] + [_text(2, name) for name in outputs] + [_text(4, op_type)]
    fields += [_bytes(5, _attribute(name, value)) for name, value in sorted(attributes.items())]
    return b"".join(fields)


def tensor(name: str, data_type: int, dims: Sequence[int], raw: bytes) -> bytes:
    """TensorProto with its data: dims 1, data_type 2, name 8, raw_data 9 (little-endian)."""
    return b"".join(_int(1, dim) for dim in dims) + _int(2, data_type) + _text(8, name) + _bytes(9, raw)


def external_tensor(name: str, dims: Sequence[int]) -> bytes:
    """A float TensorProto whose data the session is given apart (external_data 13, data_location 14)."""
    location = _text(1, "location") + _text(2, "caller")  # required by the format, never read
    return (
        b"".join(_int(1, dim) for dim in dims)
        + _int(2, FLOAT)
        + _text(8, name)
        + _bytes(13, location)
        + _int(14, _EXTERNAL)
    )


def value_info(name: str, elem_type: int, shape: Sequence[int | str]) -> bytes:
    """ValueInfoProto (name 1, type 2) of a tensor; a str dimension is symbolic (dim_param)."""
    dims = b"".join(_bytes(1, _int(1, d) if isinstance(d, int) else _text(2, d)) for d in shape)
    tensor_type = _int(1, elem_type) + _bytes(2, dims)  # TypeProto.Tensor: elem_type 1, shape 2
    return _text(1, name) + _bytes(2, _bytes(1, tensor_type))


def model(
    *,
    name: str,
    nodes: Sequence[bytes],
    initializers: Sequence[bytes],
    inputs: Sequence[bytes],
    outputs: Sequence[bytes],
    ir_version: int,
    opset: int,
) -> bytes:
    """ModelProto (ir_version 1, graph 7, opset_import 8) of one GraphProto (node 1, name 2,
    initializer 5, input 11, output 12) in the default operator set."""
    graph = b"".join(
        [
            *(_bytes(1, n) for n in nodes),
            _text(2, name),
            *(_bytes(5, t) for t in initializers),
            *(_bytes(11, i) for i in inputs),
            *(_bytes(12, o) for o in outputs),
        ]
    )
    return _int(1, ir_version) + _bytes(7, graph) + _bytes(8, _text(1, "") + _int(2, opset))
