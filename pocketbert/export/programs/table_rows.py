"""The word-piece table of the int8 ONNX model, quantized per row, the rarest rows optionally in 4 bits.

ONNX Runtime's dynamic quantization gives a Gather's table one scale: the few rows of large values set it for every
row, and the rows of small values lose most. One scale per row keeps each row's own range (the default student's
table alone quantized, PyTorch, 2026-11-26: 99.95 % of 2,000 IMDb answers kept with a scale a row, 99.5 % with
one). The table is most of a small student's file, and most of its rows are rare in the app's text, so
export.embedding_int4_share stores that share of the rows, the least frequent in the recipe's text, in 4 bits with
a scale per EMBEDDING_INT4_GROUP values: a rare row's coarser values move few answers, and each such row costs half
its bytes.

Standard operators only (Gather, Cast, Mul, Div, Sub, Max, Less, Concat, Reshape, Where), so every runtime that
reads the int8 model, ORT Mobile included, reads the table: each looked-up row is dequantized from its own table
and the 4-bit or 8-bit one chosen per token.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pocketbert.core.errors import ConfigError, ExportError

# Values per 4-bit scale. Every row of the default student's table in 4 bits cost 1.4 points of IMDb accuracy with
# one scale a row, 0.35 with one per 64 values (2,000 reviews, 2026-11-26).
EMBEDDING_INT4_GROUP = 64
PREFIX = "word_table/"      # names of the nodes and initializers this module adds
# its initializers with a row (or a row's scales) for each word piece: what a larger vocabulary grows
ROW_TENSORS = tuple(PREFIX + name for name in ("int8", "int8_scale", "int4", "int4_scale", "slot"))


def word_table(graph):
    """(the Gather that looks word pieces up, its table's initializer): of the Gathers reading a 2-D float
    initializer, the one with the most rows (positions and token types are the smaller tables)."""
    from onnx import TensorProto

    initializers = {t.name: t for t in graph.initializer}
    tables = [(n, initializers[n.input[0]]) for n in graph.node if n.op_type == "Gather" and n.input[0] in initializers
              and len(initializers[n.input[0]].dims) == 2 and initializers[n.input[0]].data_type == TensorProto.FLOAT]
    if not tables:
        raise ExportError("the ONNX model has no word-piece table to quantize (no Gather of a 2-D float initializer)")
    return max(tables, key=lambda pair: pair[1].dims[0])


def table_gather_name(path: Path) -> str:
    """The name of the word-table Gather of the fp32 model at `path` (left to quantize_rows by the dynamic
    quantizer)."""
    import onnx

    return word_table(onnx.load(str(path), load_external_data=False).graph)[0].name


def int4_rows(commonness: np.ndarray, share: float) -> np.ndarray:
    """The `share` of the rows least common by `commonness` (a count or share per row; ties: the higher id), as a
    sorted id array."""
    n = int(round(share * len(commonness)))
    order = sorted(range(len(commonness)), key=lambda i: (float(commonness[i]), -i))
    return np.sort(np.asarray(order[:n], dtype=np.int64))


def _int8_rows(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scale = np.abs(table).max(axis=1, keepdims=True) / 127.0
    scale[scale == 0] = 1.0
    return np.clip(np.round(table / scale), -127, 127).astype(np.int8), scale.astype(np.float32)


def _int4_rows(table: np.ndarray, group: int) -> tuple[np.ndarray, np.ndarray]:
    """(two values a byte, low nibble first, each stored +8 in [0, 15]; a float scale per `group` values)."""
    rows, width = table.shape
    grouped = table.reshape(rows, width // group, group)
    scale = np.abs(grouped).max(axis=2, keepdims=True) / 7.0
    scale[scale == 0] = 1.0
    q = (np.clip(np.round(grouped / scale), -8, 7) + 8).astype(np.uint8).reshape(rows, width)
    return (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8), scale.astype(np.float32)


def int4_group(width: int) -> int:
    """The values that share a 4-bit scale: EMBEDDING_INT4_GROUP, or the largest even divisor of the table's width
    below it (a narrow student's)."""
    fits = [g for g in range(2, EMBEDDING_INT4_GROUP + 1, 2) if width % g == 0]
    if not fits:
        raise ConfigError(f"export.embedding_int4_share: the word-piece table's width {width} is odd, so its rows "
                          "cannot be packed two values a byte: set it to 0")
    return max(fits)


def quantize_rows(path: Path, int4_ids: np.ndarray | None = None) -> dict:
    """Rewrite the model at `path` in place: its float word-piece table stored per row in int8, the rows
    `int4_ids` in 4 bits. What was stored, for the manifest."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(path))
    graph = model.graph
    gather, init = word_table(graph)
    table = numpy_helper.to_array(init).astype(np.float32)
    rows, width = table.shape
    four = np.zeros(rows, dtype=bool)
    group = None
    if int4_ids is not None and len(int4_ids):
        group = int4_group(width)
        four[int4_ids] = True
    ids, out = gather.input[1], gather.output[0]
    added_init, nodes = [], []

    def const(name: str, array: np.ndarray) -> str:
        added_init.append(numpy_helper.from_array(array, PREFIX + name))
        return PREFIX + name

    def node(op: str, inputs: list[str], name: str, **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [PREFIX + name], name=PREFIX + name, **attrs))
        return PREFIX + name

    q8, s8 = _int8_rows(table[~four])
    if not four.any():
        row8 = node("Cast", [node("Gather", [const("int8", q8), ids], "gather_int8")], "int8_float",
                    to=TensorProto.FLOAT)
        node("Mul", [row8, node("Gather", [const("int8_scale", s8), ids], "gather_int8_scale")], "rows")
    else:
        # One map, 4 bytes a row: an int8 row's place in its table, or -1 less a 4-bit row's place in its own.
        slot = np.zeros(rows, dtype=np.int32)
        slot[~four] = np.arange(int((~four).sum()))
        slot[four] = -1 - np.arange(int(four.sum()))
        zero = const("zero", np.array(0, dtype=np.int32))
        place = node("Gather", [const("slot", slot), ids], "place")
        at8 = node("Max", [place, zero], "slot8")  # the other table's reads go to its row 0, and are not chosen
        at4 = node("Max", [node("Sub", [const("minus_one", np.array(-1, dtype=np.int32)), place], "flipped"), zero],
                   "slot4")
        row8 = node("Mul", [node("Cast", [node("Gather", [const("int8", q8), at8], "gather_int8")], "int8_float",
                                 to=TensorProto.FLOAT),
                            node("Gather", [const("int8_scale", s8), at8], "gather_int8_scale")], "rows8")
        packed, s4 = _int4_rows(table[four], group)
        byte = node("Cast", [node("Gather", [const("int4", packed), at4], "gather_int4")], "int4_int32",
                    to=TensorProto.INT32)
        high = node("Div", [byte, const("sixteen", np.array(16, dtype=np.int32))], "high")
        low = node("Sub", [byte, node("Mul", [high, const("sixteen", np.array(16, dtype=np.int32))], "high16")], "low")
        shape = node("Shape", [ids], "ids_shape")

        def values(nibble: str, name: str) -> str:
            as_float = node("Cast", [nibble], f"{name}_float", to=TensorProto.FLOAT)
            centred = node("Sub", [as_float, const("eight", np.array(8.0, dtype=np.float32))], f"{name}_centred")
            return node("Unsqueeze", [centred, const("last_axis", np.array([-1], dtype=np.int64))], f"{name}_axis")

        pairs = node("Concat", [values(low, "low"), values(high, "high")], "pairs", axis=-1)
        groups = node("Reshape", [pairs, node("Concat", [shape, const("groups", np.array([width // group, group]))],
                                             "group_shape", axis=0)], "grouped")
        scaled = node("Mul", [groups, node("Gather", [const("int4_scale", s4), at4], "gather_int4_scale")], "scaled4")
        row_shape = node("Concat", [shape, const("width", np.array([width]))], "row_shape", axis=0)
        row4 = node("Reshape", [scaled, row_shape], "rows4")
        is4 = node("Unsqueeze", [node("Less", [place, zero], "is_int4"),
                                 const("last_axis", np.array([-1], dtype=np.int64))], "is_int4_axis")
        node("Where", [is4, row4, row8], "rows")
    nodes[-1].output[0] = out  # the last node writes the Gather's output, which the graph reads on
    at = list(graph.node).index(gather)
    del graph.node[at]
    for offset, new in enumerate(nodes):
        graph.node.insert(at + offset, new)
    graph.initializer.remove(init)
    unique = {t.name: t for t in added_init}  # a constant used twice is stored once
    graph.initializer.extend(unique.values())
    onnx.save(model, str(path))
    return {"rows": rows, "int8_rows": int(rows - four.sum()), "int4_rows": int(four.sum()),
            "int4_group": group}


def size_with_rows(path: Path, rows: int, full_rows: int) -> int:
    """The size in bytes of the ONNX model at `path` had its word-piece table `full_rows` rows instead of `rows`:
    its table (a 2-D initializer of `rows` rows, in whatever precision) or the per-row tensors of quantize_rows,
    each grown in proportion with zero rows, saved and measured. The file's size, not its answers."""
    import tempfile

    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    grown = 0
    for i, tensor in enumerate(model.graph.initializer):
        if tensor.name in ROW_TENSORS or (len(tensor.dims) == 2 and tensor.dims[0] == rows):
            values = numpy_helper.to_array(tensor)
            more = round(values.shape[0] * full_rows / rows) - values.shape[0]
            extra = np.zeros((more, *values.shape[1:]), dtype=values.dtype)
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(np.concatenate([values, extra]), tensor.name))
            grown += 1
    if not grown:
        raise ExportError(f"{path.name} holds no word-piece table of {rows} rows to measure with the full vocabulary")
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / path.name
        onnx.save(model, str(target))
        return target.stat().st_size
