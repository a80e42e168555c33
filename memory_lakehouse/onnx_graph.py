"""A memory-saving edit of the default embedding model's ONNX graph, with no onnx package.

The int8 all-MiniLM-L6-v2 file dequantizes its whole word-embedding table before the
lookup; onnxruntime folds that into a float32 table at load (47 MB resident, as much
again while folding). `lookup_then_dequantize` moves the lookup first. The edit needs
only the nodes' inputs, outputs and op types, so it reads and writes just enough
protobuf for that; every other field passes through byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

_WORD_TABLE = "inner.embeddings.word_embeddings.weight"


def lookup_then_dequantize(model: bytes) -> bytes:
    """The model with its word-embedding lookup moved before the int8 -> float32 step.

    The file keeps the 30522 x 384 word-embedding table as int8 rows and a scale per
    row, turned into float32 by ``Cast`` and ``Mul`` before the ``Gather`` that looks
    rows up. onnxruntime folds those constants at load into a float32 table: 47 MB kept
    resident, and as much again while folding. Gathering the int8 rows and their scales
    first, then casting and scaling only the rows a run looks up, does the same single
    multiplication per element, so vectors are bit-identical (a test compares them) and
    the table stays int8 (11.7 MB). *model* comes back unchanged if its graph is not
    that shape.
    """
    top = list(_pb_fields(model))
    graph_at = next((i for i, (num, _, _) in enumerate(top) if num == 7), None)  # ModelProto.graph
    if graph_at is None:
        return model
    graph = list(_pb_fields(top[graph_at][2]))
    nodes = {i: _pb_node(value) for i, (num, _, value) in enumerate(graph) if num == 1}  # GraphProto.node
    uses = [i for i, node in nodes.items() if _WORD_TABLE in node["in"]]
    cast = [i for i, node in nodes.items() if node["op"] == "Cast" and node["in"] == [_WORD_TABLE + "_q"]]
    scale = [i for i, node in nodes.items() if node["op"] == "Mul" and node["out"] == [_WORD_TABLE]]
    if len(uses) != 1 or len(cast) != 1 or len(scale) != 1:
        return model
    gather, cast_node, mul_node = nodes[uses[0]], nodes[cast[0]], nodes[scale[0]]
    if (
        gather["op"] != "Gather"
        or gather["in"][0] != _WORD_TABLE
        or len(gather["in"]) != 2
        or mul_node["in"] != [cast_node["out"][0], _WORD_TABLE + "_scale"]
        or [i for i, node in nodes.items() if cast_node["out"][0] in node["in"]] != scale
    ):
        return model
    rows, out = gather["in"][1], gather["out"][0]
    name = _WORD_TABLE + ".rows"
    replacement = [
        _pb_renamed(graph[uses[0]][2], [_WORD_TABLE + "_q", rows], [name + "_q"], name + "_q"),
        _pb_renamed(graph[uses[0]][2], [_WORD_TABLE + "_scale", rows], [name + "_scale"], name + "_scale"),
        _pb_renamed(graph[cast[0]][2], [name + "_q"], [name + "_f"], name + "_f"),
        _pb_renamed(graph[scale[0]][2], [name + "_f", name + "_scale"], [out], name),
    ]
    new_graph: list[tuple[int, int, Any]] = []
    for i, field_ in enumerate(graph):
        if i == uses[0]:
            new_graph += [(1, 2, node) for node in replacement]
        elif i not in (cast[0], scale[0]):
            new_graph.append(field_)
    top[graph_at] = (7, 2, _pb_encode(new_graph))
    return _pb_encode(top)


# Just enough protobuf to edit an ONNX graph's nodes; every other field passes through.


def _pb_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def _pb_fields(data: bytes | memoryview) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of a message; length-delimited values as memoryviews."""
    buf = memoryview(data)
    pos = 0
    value: int | memoryview  # a varint, or the bytes of a length-delimited field
    while pos < len(buf):
        key, pos = _pb_varint(buf, pos)
        wire = key & 7
        if wire == 0:
            value, pos = _pb_varint(buf, pos)
        elif wire == 2:
            size, pos = _pb_varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, pos = buf[pos : pos + size], pos + size
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield key >> 3, wire, value


def _pb_varint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _pb_encode(fields: Sequence[tuple[int, int, Any]]) -> bytes:
    parts: list[Any] = []
    for number, wire, value in fields:
        parts.append(_pb_varint_bytes(number << 3 | wire))
        if wire == 0:
            parts.append(_pb_varint_bytes(value))
        elif wire == 2:
            parts += [_pb_varint_bytes(len(value)), value]
        else:
            parts.append(value)
    return b"".join(parts)


def _pb_node(data: memoryview) -> dict[str, Any]:
    node: dict[str, Any] = {"in": [], "out": [], "op": ""}
    for number, _, value in _pb_fields(data):  # NodeProto: 1 input, 2 output, 4 op_type
        if number in (1, 2):
            node["in" if number == 1 else "out"].append(bytes(value).decode())
        elif number == 4:
            node["op"] = bytes(value).decode()
    return node


def _pb_renamed(data: memoryview, inputs: list[str], outputs: list[str], name: str) -> bytes:
    """A copy of a NodeProto (its op, attributes, domain) with new inputs, outputs and name."""
    kept = [f for f in _pb_fields(data) if f[0] not in (1, 2, 3)]
    return _pb_encode(
        [(1, 2, i.encode()) for i in inputs] + [(2, 2, o.encode()) for o in outputs] + [(3, 2, name.encode())] + kept
    )
