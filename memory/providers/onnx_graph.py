"""Keep an int8 lookup table int8 once loaded: gather its rows, then dequantise them.

The int8 MiniLM export stores each weight as integers, with a Cast to float and a
Mul by its scale in the graph. onnxruntime's basic optimisations fold those into
float constants, which keeps a query fast (6 ms against 25 ms unfolded). For the
word-embedding table (30,522 x 384) that constant is 45 MB, of which one run
reads a few hundred rows. Gather commutes with the elementwise Cast and Mul::

    Gather(Mul(Cast(q), scale), ids) == Mul(Cast(Gather(q, ids)), Gather(scale, ids))

(a per-row scale, shape [rows, 1], is gathered with the rows; a scalar or
per-column one broadcasts as it is), bit for bit: each element is the same
product of the same two floats. Rewritten, nothing constant is left to fold
there, and the table stays int8 (11.7 MB).

The model's protobuf is read and written here at the wire level, field by
field, copying every untouched field's bytes as they are. NOTE: the ``onnx``
package would read more plainly, but importing it grows the serving process by
~20 MB resident (measured), more than half of what the rewrite saves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

# Wire types (protobuf encoding).
_VARINT = 0
_FIXED64 = 1
_LENGTH = 2
_FIXED32 = 5

# Field numbers of onnx.proto3 (ModelProto, GraphProto, NodeProto, AttributeProto,
# TensorProto, ValueInfoProto) that the rewrite reads.
_MODEL_GRAPH = 7
_GRAPH_NODE = 1
_GRAPH_INITIALIZER = 5
_GRAPH_INPUT = 11
_GRAPH_OUTPUT = 12
_GRAPH_VALUE_INFO = 13
_NODE_INPUT = 1
_NODE_OUTPUT = 2
_NODE_NAME = 3
_NODE_OP_TYPE = 4
_NODE_ATTRIBUTE = 5
_NODE_DOMAIN = 7
_ATTRIBUTE_NAME = 1
_ATTRIBUTE_INT = 3
_ATTRIBUTE_GRAPH = 6
_ATTRIBUTE_GRAPHS = 11
_TENSOR_DIMS = 1
_TENSOR_DATA_TYPE = 2
_TENSOR_NAME = 8
_TENSOR_EXTERNAL_DATA = 13
_TENSOR_DATA_LOCATION = 14
_VALUE_INFO_NAME = 1

# TensorProto.DataType values.
_FLOAT = 1
_UINT8 = 2
_INT8 = 3


class _Unreadable(Exception):
    """The bytes are not a protobuf message (the model is then loaded as it is)."""


class _Field(NamedTuple):
    number: int
    wire_type: int
    start: int  # of the field's tag
    end: int
    value: int  # a varint's value, else where the payload starts


def _read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise _Unreadable
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: memoryview) -> Iterator[_Field]:
    pos = 0
    while pos < len(buf):
        start = pos
        key, pos = _read_varint(buf, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == _VARINT:
            value, pos = _read_varint(buf, pos)
        elif wire_type == _LENGTH:
            length, value = _read_varint(buf, pos)
            pos = value + length
        elif wire_type in (_FIXED64, _FIXED32):
            value = pos
            pos += 8 if wire_type == _FIXED64 else 4
        else:  # groups: not in onnx.proto
            raise _Unreadable
        if pos > len(buf):
            raise _Unreadable
        yield _Field(number, wire_type, start, pos, value)


def _payload(buf: memoryview, field: _Field) -> memoryview:
    if field.wire_type != _LENGTH:
        raise _Unreadable
    return buf[field.value : field.end]


def _text(buf: memoryview, field: _Field) -> str:
    try:
        return bytes(_payload(buf, field)).decode()
    except UnicodeDecodeError as ex:
        raise _Unreadable from ex


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _length_field(number: int, payload: bytes | memoryview) -> bytes:
    return _varint(number << 3 | _LENGTH) + _varint(len(payload)) + bytes(payload)


@dataclass(frozen=True)
class _Node:
    op_type: str
    domain: str
    name: str
    inputs: list[str]
    outputs: list[str]
    #: Each attribute's AttributeProto bytes, by its name.
    attributes: dict[str, memoryview]
    #: Integer attributes, by name.
    ints: dict[str, int]
    has_subgraph: bool


def _node(buf: memoryview) -> _Node:
    op_type = domain = name = ""
    inputs: list[str] = []
    outputs: list[str] = []
    attributes: dict[str, memoryview] = {}
    ints: dict[str, int] = {}
    has_subgraph = False
    for field in _fields(buf):
        if field.number == _NODE_INPUT:
            inputs.append(_text(buf, field))
        elif field.number == _NODE_OUTPUT:
            outputs.append(_text(buf, field))
        elif field.number == _NODE_NAME:
            name = _text(buf, field)
        elif field.number == _NODE_OP_TYPE:
            op_type = _text(buf, field)
        elif field.number == _NODE_DOMAIN:
            domain = _text(buf, field)
        elif field.number == _NODE_ATTRIBUTE:
            attribute = _payload(buf, field)
            attribute_name, value, graph = _attribute(attribute)
            attributes[attribute_name] = attribute
            if value is not None:
                ints[attribute_name] = value
            has_subgraph = has_subgraph or graph
    return _Node(op_type, domain, name, inputs, outputs, attributes, ints, has_subgraph)


def _attribute(buf: memoryview) -> tuple[str, int | None, bool]:
    """An AttributeProto's (name, integer value if any, holds a graph?)."""
    name = ""
    value: int | None = None
    graph = False
    for field in _fields(buf):
        if field.number == _ATTRIBUTE_NAME:
            name = _text(buf, field)
        elif field.number == _ATTRIBUTE_INT and field.wire_type == _VARINT:
            value = _signed(field.value)
        elif field.number in (_ATTRIBUTE_GRAPH, _ATTRIBUTE_GRAPHS):
            graph = True
    return name, value, graph


@dataclass(frozen=True)
class _Tensor:
    name: str
    data_type: int
    dims: tuple[int, ...]
    external: bool


def _tensor(buf: memoryview) -> _Tensor:
    name = ""
    data_type = 0
    dims: list[int] = []
    external = False
    for field in _fields(buf):
        if field.number == _TENSOR_NAME:
            name = _text(buf, field)
        elif field.number == _TENSOR_DATA_TYPE and field.wire_type == _VARINT:
            data_type = field.value
        elif field.number == _TENSOR_DIMS and field.wire_type == _VARINT:
            dims.append(_signed(field.value))
        elif field.number == _TENSOR_DIMS:  # packed
            packed = _payload(buf, field)
            pos = 0
            while pos < len(packed):
                dim, pos = _read_varint(packed, pos)
                dims.append(_signed(dim))
        elif field.number == _TENSOR_EXTERNAL_DATA or (
            field.number == _TENSOR_DATA_LOCATION and field.value != 0
        ):
            external = True
    return _Tensor(name, data_type, tuple(dims), external)


def _value_name(buf: memoryview) -> str:
    for field in _fields(buf):
        if field.number == _VALUE_INFO_NAME:
            return _text(buf, field)
    return ""


@dataclass(frozen=True)
class _Match:
    """Gather(Mul(Cast(table), scale), ids), and the nodes that replace it."""

    gather: int  # graph field indexes of the three nodes
    mul: int
    cast: int
    dropped_values: frozenset[str]  # the float table and its unscaled twin
    replacement: list[bytes]  # NodeProtos, in order
    new_names: frozenset[str]  # of the replacement's nodes and values: new to the graph


def gather_before_dequantise(model: bytes) -> bytes | None:
    """``model`` (ONNX bytes) with each Gather of a dequantised int8 table rewritten.

    Every ``Gather(Mul(Cast(q), scale), ids)`` on axis 0, where ``q`` is a 2-D
    int8 or uint8 initializer cast to float and ``scale`` a float initializer
    that is a scalar, per column (``[cols]``) or per row (``[rows, 1]``), each
    value used there only, becomes ``Mul(Cast(Gather(q, ids)), scale)``, the
    scale gathered too when it is per row. ``None`` when the model has no such
    pattern, or is anything the rewrite does not read (subgraphs, external
    data, bytes that are not a protobuf): the caller loads it unchanged.
    """
    try:
        return _rewrite(memoryview(model))
    except _Unreadable:
        return None


def _rewrite(buf: memoryview) -> bytes | None:
    top = list(_fields(buf))
    graph_fields = [f for f in top if f.number == _MODEL_GRAPH]
    if len(graph_fields) != 1:
        return None
    graph = _payload(buf, graph_fields[0])
    fields = list(_fields(graph))

    nodes: dict[int, _Node] = {}
    tensors: dict[str, _Tensor] = {}
    graph_inputs: set[str] = set()
    graph_outputs: set[str] = set()
    value_infos: dict[int, str] = {}
    for index, field in enumerate(fields):
        if field.number == _GRAPH_NODE:
            nodes[index] = _node(_payload(graph, field))
        elif field.number == _GRAPH_INITIALIZER:
            tensor = _tensor(_payload(graph, field))
            tensors[tensor.name] = tensor
        elif field.number == _GRAPH_INPUT:
            graph_inputs.add(_value_name(_payload(graph, field)))
        elif field.number == _GRAPH_OUTPUT:
            graph_outputs.add(_value_name(_payload(graph, field)))
        elif field.number == _GRAPH_VALUE_INFO:
            value_infos[index] = _value_name(_payload(graph, field))
    if any(node.has_subgraph for node in nodes.values()):
        return None  # a subgraph may read the float table by name
    if any(tensor.external for tensor in tensors.values()):
        return None  # external data is found next to the model's file, not its bytes

    producers = {out: index for index, node in nodes.items() for out in node.outputs}
    uses = Counter(name for node in nodes.values() for name in node.inputs)
    # Every name the graph already gives a node or value: a new value must not carry a
    # type a leftover value_info or output declares for its name.
    taken = set(tensors) | graph_inputs | graph_outputs | set(producers) | set(uses)
    taken |= {node.name for node in nodes.values()} | set(value_infos.values())

    matches: list[_Match] = []
    for index, node in nodes.items():
        match = _match(index, node, nodes, producers, tensors, uses, graph_inputs | graph_outputs)
        if match is not None and not taken & match.new_names:
            matches.append(match)
    if not matches:
        return None

    removed = {m.mul for m in matches} | {m.cast for m in matches}
    replaced = {m.gather: m.replacement for m in matches}
    dropped = frozenset().union(*(m.dropped_values for m in matches))
    parts: list[bytes | memoryview] = []
    for index, field in enumerate(fields):
        if index in removed or value_infos.get(index) in dropped:
            continue
        if index in replaced:
            parts.extend(_length_field(_GRAPH_NODE, node) for node in replaced[index])
        else:
            parts.append(graph[field.start : field.end])
    graph_size = sum(len(part) for part in parts)

    out: list[bytes | memoryview] = []
    for field in top:
        if field.number == _MODEL_GRAPH:
            out.append(_varint(_MODEL_GRAPH << 3 | _LENGTH) + _varint(graph_size))
            out.extend(parts)
        else:
            out.append(buf[field.start : field.end])
    return b"".join(out)


def _match(
    index: int,
    gather: _Node,
    nodes: dict[int, _Node],
    producers: dict[str, int],
    tensors: dict[str, _Tensor],
    uses: Counter[str],
    io_names: set[str],
) -> _Match | None:
    """The rewrite of ``gather``, or None unless it reads a dequantised table exactly."""
    if not (
        _is_op(gather, "Gather", 2)
        and set(gather.attributes) <= {"axis"}
        and gather.ints.get("axis", 0) == 0
    ):
        return None
    table, ids = gather.inputs
    mul_index = producers.get(table)
    if mul_index is None or not _is_op(nodes[mul_index], "Mul", 2) or nodes[mul_index].attributes:
        return None
    mul = nodes[mul_index]
    cast_sides = [i for i, name in enumerate(mul.inputs) if name in producers]
    if len(cast_sides) != 1:
        return None
    cast_side = cast_sides[0]
    cast_index = producers[mul.inputs[cast_side]]
    cast = nodes[cast_index]
    if not (
        _is_op(cast, "Cast", 1) and cast.ints == {"to": _FLOAT} and set(cast.attributes) == {"to"}
    ):
        return None
    q = tensors.get(cast.inputs[0])
    scale = tensors.get(mul.inputs[1 - cast_side])
    if q is None or scale is None or q.data_type not in (_INT8, _UINT8) or len(q.dims) != 2:
        return None
    rows, cols = q.dims
    if scale.data_type != _FLOAT:
        return None
    if scale.dims in ((), (1,), (cols,)):
        per_row = False
    elif scale.dims == (rows, 1):
        per_row = True
    else:
        return None
    own = [q.name, scale.name, cast.outputs[0], table]
    if any(uses[name] != 1 or name in io_names for name in own):
        return None  # used elsewhere, or overridable at run time

    rows_q, rows_f, rows_scale = f"{table}_rows_q", f"{table}_rows_f", f"{table}_rows_scale"
    gather_q, cast_rows = f"{table}_gather_q", f"{table}_cast_rows"
    gather_scale, mul_rows = f"{table}_gather_scale", f"{table}_mul_rows"
    new_names = {rows_q, rows_f, gather_q, cast_rows, mul_rows}
    by_axis = list(gather.attributes.values())
    replacement = [
        _node_proto("Gather", [q.name, ids], [rows_q], gather_q, by_axis),
        _node_proto("Cast", [rows_q], [rows_f], cast_rows, list(cast.attributes.values())),
    ]
    if per_row:
        replacement.append(
            _node_proto("Gather", [scale.name, ids], [rows_scale], gather_scale, by_axis)
        )
        new_names |= {rows_scale, gather_scale}
    mul_inputs = [rows_f, rows_scale if per_row else scale.name]
    if cast_side == 1:
        mul_inputs.reverse()  # the operands in their old order
    replacement.append(_node_proto("Mul", mul_inputs, gather.outputs, mul_rows, []))
    return _Match(
        gather=index,
        mul=mul_index,
        cast=cast_index,
        dropped_values=frozenset({cast.outputs[0], table}),
        replacement=replacement,
        new_names=frozenset(new_names),
    )


def _is_op(node: _Node, op_type: str, arity: int) -> bool:
    return (
        node.op_type == op_type
        and node.domain in ("", "ai.onnx")
        and len(node.inputs) == arity
        and len(node.outputs) == 1
    )


def _node_proto(
    op_type: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    name: str,
    attributes: Sequence[memoryview],
) -> bytes:
    parts = [_length_field(_NODE_INPUT, i.encode()) for i in inputs]
    parts += [_length_field(_NODE_OUTPUT, o.encode()) for o in outputs]
    parts.append(_length_field(_NODE_NAME, name.encode()))
    parts.append(_length_field(_NODE_OP_TYPE, op_type.encode()))
    parts += [_length_field(_NODE_ATTRIBUTE, attribute) for attribute in attributes]
    return b"".join(parts)
