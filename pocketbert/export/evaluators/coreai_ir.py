"""A saved Core AI program (.aimodel/main.mlirb) read back as plain data: graphs, operations, constants.

Core AI runs only on Apple platforms. Elsewhere its program is printed as textual MLIR by coreai-core's own
loader, and this module parses the part of that text the exported students use: `coreai.graph` bodies of
`%result = coreai.<op> operands : types` lines, inline `dense<...>` constants and the `dense_resource` blobs of
the `dialect_resources` section. What it does not understand it refuses by line, so the evaluator
(coreai_eval.py) never runs a program it misread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pocketbert.core.errors import ExportError, require

PROGRAM_FILE = "main.mlirb"  # the program inside a .aimodel folder, as coreai-core's save_asset writes it

# MLIR element types -> numpy. Sub-byte integers (palette indices, int4) are read into a byte each.
ELEMENT_TYPES = {
    "f32": np.float32, "f16": np.float16, "f64": np.float64,
    "si64": np.int64, "si32": np.int32, "si16": np.int16, "si8": np.int8,
    "ui64": np.uint64, "ui32": np.uint32, "ui16": np.uint16, "ui8": np.uint8,
    "i64": np.int64, "i32": np.int32, "i16": np.int16, "i8": np.int8, "i1": np.bool_,
    **{f"ui{bits}": np.uint8 for bits in range(2, 8)}, **{f"si{bits}": np.int8 for bits in range(2, 8)},
}
# Sub-byte element types and their width: a blob holds them packed, the first value in the lowest bits of the
# first byte (coreai-opt's palettes: 6-bit indices of a 32 x 64 weight take 1,536 bytes).
SUB_BYTE_BITS = {f"{sign}{bits}": bits for sign in ("ui", "si") for bits in range(2, 8)}


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int | None, ...]  # None: a dynamic dimension
    element: str

    @property
    def dtype(self):
        if self.element not in ELEMENT_TYPES:
            raise ExportError(f"the Core AI program holds {self.element} tensors, which pocketbert cannot evaluate")
        return np.dtype(ELEMENT_TYPES[self.element])


@dataclass
class Operation:
    kind: str                       # e.g. "reshape", "decomposable.broadcasting_add" (without "coreai.")
    results: list[str]
    operands: list[str]
    result_types: list[TensorType]
    callee: str | None = None       # invoke: the graph it calls
    attributes: dict = field(default_factory=dict)
    value: np.ndarray | None = None  # constant: its value
    line: int = 0


@dataclass
class Graph:
    name: str
    arguments: list[str]            # SSA names, in order
    input_names: list[str]          # coreai.name of each argument
    input_types: list[TensorType]
    output_names: list[str]
    operations: list[Operation]
    outputs: list[str] = field(default_factory=list)  # SSA names the graph returns
    private: bool = False           # called by invoke (a composite such as layer_norm), not an entry point
    # A composite's declaration (coreai-torch's composite_decl): the operation the graph's body decomposes, by
    # name ("scaled_dot_product_attention"), and its attributes (op_attrs: scale, is_causal, ...). None: a plain graph.
    composite: str | None = None
    composite_attributes: dict = field(default_factory=dict)

    def called_as_one(self, call: Operation) -> Operation:
        """An invoke of this composite as one operation of the composite's kind, its attributes the
        declaration's: what a runtime with a fused kernel for it runs, instead of the body."""
        return Operation(self.composite, call.results, call.operands, call.result_types,
                         attributes=dict(self.composite_attributes), line=call.line)


@dataclass
class Program:
    graphs: dict[str, Graph]
    stored_bytes: int = 0  # of the dense_resource blobs: the weights as the file stores them, each once

    @property
    def entry_points(self) -> list[Graph]:
        return [g for g in self.graphs.values() if not g.private]


def program_text(aimodel: Path) -> str:
    """The program of a saved .aimodel as textual MLIR, through coreai-core's own bytecode reader."""
    path = Path(aimodel) / PROGRAM_FILE
    if not path.is_file():
        raise ExportError(f"{aimodel} holds no {PROGRAM_FILE}: export the Core AI variant again")
    asset = require("coreai.authoring.asset", "coreai")
    context = require("coreai.authoring.context", "coreai").Context()
    # The loader makes a context of its own when given none and lets it go while the module still lives in it
    # (a crash once a conversion ran in the same process): this one is held until the text is printed.
    return str(asset.AIProgram._load_bytecode(path, context._mlir_context)._module)


def load_program(aimodel: Path) -> Program:
    return parse_program(program_text(aimodel))


# ---------------------------------------------------------------- parsing

_TENSOR = re.compile(r"tensor<([^<>]*)>")
_GRAPH = re.compile(r"^\s*coreai\.graph\s+(private\s+)?(?:noinline\s+)?@([\w.$-]+)\((.*)\)\s*->\s*(.*)\{\s*$")
_ARGUMENT = re.compile(r"(%[\w#]+):\s*tensor<([^<>]*)>\s*(?:\{[^{}]*coreai\.name\s*=\s*\"([^\"]*)\"[^{}]*\})?")
_OUTPUT_NAME = re.compile(r"coreai\.name\s*=\s*\"([^\"]*)\"")
# `composite_declaration<"scaled_dot_product_attention" = {input_names = [...], op_attrs = {scale = 2.5e-01 : f32,
# ...}, output_names = [...]}>`: its name and op_attrs
_COMPOSITE = re.compile(r"composite_declaration<\"([\w.]+)\"\s*=\s*\{.*?op_attrs\s*=\s*\{([^{}]*)\}")
_RESULTS = re.compile(r"^\s*((?:%[\w]+(?::\d+)?)(?:\s*,\s*%[\w]+)*)\s*=\s*coreai\.([\w.]+)\s*(.*)$")
_SSA = re.compile(r"%[\w#]+")
_RESOURCE = re.compile(r"^\s*([\w.$-]+):\s*\"0x([0-9A-Fa-f]*)\",?\s*$")
_NUMBER = re.compile(r"0x[0-9A-Fa-f]+|[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|inf|nan)|true|false")


def tensor_type(text: str) -> TensorType:
    parts = text.split(",")[0].strip().split("x")
    element = parts[-1]
    shape = tuple(None if d == "?" else int(d) for d in parts[:-1])
    return TensorType(shape, element)


def _top_level_split(text: str, separator: str) -> tuple[str, str] | None:
    """text split at the first `separator` outside brackets and quotes."""
    depth, quoted, i = 0, False, 0
    while i < len(text):
        c = text[i]
        if c == '"':
            quoted = not quoted
        elif not quoted:
            if c in "([{<":
                depth += 1
            elif c in ")]}>" and not (c == ">" and text[i - 1] == "-"):
                depth -= 1
            elif depth == 0 and text.startswith(separator, i):
                return text[:i], text[i + len(separator):]
        i += 1
    return None


def _result_types(type_text: str) -> list[TensorType]:
    after = _top_level_split(type_text, "->") or _top_level_split(type_text, " to ")
    part = after[1] if after else type_text
    return [tensor_type(t) for t in _TENSOR.findall(part)]


def _attributes(text: str) -> dict:
    """`{key = value, ...}` of an operation, values kept as strings (unquoted)."""
    found = {}
    for key, value in re.findall(r"(\w+)\s*=\s*(\"[^\"]*\"|[^,{}]+)", text):
        found[key] = value.strip().strip('"')
    return found


def dense_value(literal: str, kind: TensorType, line: int) -> np.ndarray:
    """The array of a `dense<...>` attribute of the given type: a splat, nested lists, or a hex blob."""
    body = literal.strip()
    dtype = kind.dtype
    shape = kind.shape
    if any(d is None for d in shape):
        raise ExportError(f"line {line} of the Core AI program: a constant of dynamic shape")
    if body.startswith('"0x'):
        return _from_bytes(bytes.fromhex(body[3:-1]), dtype, shape, line, SUB_BYTE_BITS.get(kind.element))
    tokens = _NUMBER.findall(body)
    if not tokens:
        raise ExportError(f"line {line} of the Core AI program: cannot read the constant {body[:60]}")
    values = [_scalar(t, dtype) for t in tokens]
    count = int(np.prod(shape)) if shape else 1
    if len(values) == 1:
        return np.full(shape, values[0], dtype=dtype)
    if len(values) != count:
        raise ExportError(f"line {line} of the Core AI program: {len(values)} values for shape {shape}")
    return np.array(values, dtype=dtype).reshape(shape)


def _scalar(token: str, dtype):
    if token in ("true", "false"):
        return token == "true"
    if token.startswith("0x"):  # MLIR prints non-finite floats by their bits
        bits = int(token, 16)
        return np.array([bits], dtype=f"u{dtype.itemsize}").view(dtype)[0]
    return float(token) if dtype.kind == "f" else int(float(token)) if "." in token or "e" in token else int(token)


def unpack_bits(blob: bytes, bits: int, count: int, signed: bool) -> np.ndarray:
    """`count` integers of `bits` bits each, packed from the lowest bit of the first byte on."""
    flat = np.unpackbits(np.frombuffer(blob, dtype=np.uint8), bitorder="little")[:count * bits]
    values = (flat.reshape(count, bits).astype(np.int16) << np.arange(bits, dtype=np.int16)).sum(axis=1)
    if signed:
        values = np.where(values >= 1 << (bits - 1), values - (1 << bits), values)
    return values.astype(np.int8 if signed else np.uint8)


def _from_bytes(blob: bytes, dtype, shape, line: int, bits: int | None = None) -> np.ndarray:
    count = int(np.prod(shape)) if shape else 1
    if bits is not None:
        if len(blob) * 8 < count * bits:
            raise ExportError(f"line {line} of the Core AI program: {len(blob)} bytes for {count} values of "
                              f"{bits} bits")
        return unpack_bits(blob, bits, count, signed=dtype == np.int8).reshape(shape)
    if dtype == np.bool_:
        values = np.frombuffer(blob, dtype=np.uint8).astype(bool)
    else:
        values = np.frombuffer(blob, dtype=dtype.newbyteorder("<"))
    if values.size == 1 and count != 1:  # a splat stored once
        return np.full(shape, values[0], dtype=dtype)
    if values.size != count:
        raise ExportError(f"line {line} of the Core AI program: {values.size} stored values for shape {shape}")
    return values.astype(dtype, copy=False).reshape(shape)


def parse_program(text: str) -> Program:
    lines = text.split("\n")
    resources: dict[str, bytes] = {}
    graphs: dict[str, Graph] = {}
    pending: list[tuple[Operation, str]] = []  # constants of dense_resource, filled once the blobs are read
    graph: Graph | None = None
    in_resources = False
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("//"):
            continue
        if in_resources:
            match = _RESOURCE.match(raw)
            if match:
                blob = bytes.fromhex(match[2])
                resources[match[1]] = blob[4:]  # the first four bytes hold the blob's alignment
            elif line == "#-}":
                in_resources = False
            continue
        if line.startswith("{-#"):
            in_resources = True
            continue
        if graph is None:
            header = _GRAPH.match(raw)
            if header:
                graph = _graph_header(header, number)
            elif line not in ("module {", "}") and not line.startswith("module"):
                raise ExportError(f"line {number} of the Core AI program is outside any graph: {line[:80]}")
            continue
        if line == "}":
            graphs[graph.name] = graph
            graph = None
            continue
        if line.startswith("coreai.output"):
            operands = _top_level_split(line[len("coreai.output"):], " : ")
            graph.outputs = _SSA.findall(operands[0] if operands else line)
            continue
        op = _operation(line, number)
        graph.operations.append(op)
        if op.kind == "constant":
            literal = _top_level_split(op.attributes.pop("_literal"), " : ")[0].strip()
            if literal.startswith("dense_resource<"):
                pending.append((op, literal[len("dense_resource<"):-1]))
            elif literal.startswith("dense<"):
                op.value = dense_value(literal[len("dense<"):-1], op.result_types[0], number)
            else:
                raise ExportError(f"line {number} of the Core AI program: a constant pocketbert cannot read: "
                                  f"{literal[:60]}")
    for op, handle in pending:
        if handle not in resources:
            raise ExportError(f"line {op.line} of the Core AI program: its weights '{handle}' are missing")
        kind = op.result_types[0]
        op.value = _from_bytes(resources[handle], kind.dtype, kind.shape, op.line, SUB_BYTE_BITS.get(kind.element))
    if graph is not None:
        raise ExportError("the Core AI program ends inside a graph: the file is cut short")
    return Program(graphs, sum(len(blob) for blob in resources.values()))


def _graph_header(match, number: int) -> Graph:
    arguments, names, types = [], [], []
    for ssa, kind, name in _ARGUMENT.findall(match[3]):
        arguments.append(ssa)
        names.append(name or ssa)
        types.append(tensor_type(kind))
    outputs = _OUTPUT_NAME.findall(match[4])
    graph = Graph(match[2], arguments, names, types, outputs, [], private=bool(match[1]))
    composite = _COMPOSITE.search(match[4])
    if composite:
        graph.composite = composite[1]
        graph.composite_attributes = _declared_attributes(composite[2])
    return graph


def _attribute_value(text: str):
    """A typed attribute as Python: `2.500000e-01 : f32` -> 0.25, `0 : si64` -> 0, `false` -> False,
    `[2 : si64]` -> [2]."""
    value = text.strip()
    if value.startswith("[") and value.endswith("]"):
        return [_attribute_value(v) for v in _top_level_parts(value[1:-1], ",")]
    value = value.partition(" : ")[0].strip().strip('"')
    if value in ("true", "false"):
        return value == "true"
    for number in (int, float):
        try:
            return number(value)
        except ValueError:
            pass
    return value


def _top_level_parts(text: str, separator: str) -> list[str]:
    parts = []
    while (split := _top_level_split(text, separator)) is not None:
        parts.append(split[0])
        text = split[1]
    return [p for p in (*parts, text) if p.strip()]


def _declared_attributes(text: str) -> dict:
    """`key = value, ...` of a composite declaration's op_attrs, values typed (_attribute_value)."""
    return {key.strip(): _attribute_value(value) for key, _, value in
            (part.partition("=") for part in _top_level_parts(text, ","))}


def _operation(line: str, number: int) -> Operation:
    match = _RESULTS.match(line)
    if not match:
        raise ExportError(f"line {number} of the Core AI program is not an operation pocketbert can read: {line[:80]}")
    results_text, kind, rest = match[1], match[2], match[3]
    results = []
    for part in results_text.split(","):
        name, _, count = part.strip().partition(":")
        results += [f"{name}#{i}" for i in range(int(count))] if count else [name]
    split = _top_level_split(rest, " : ")
    if split is None:
        raise ExportError(f"line {number} of the Core AI program has no types: {line[:80]}")
    operand_text, type_text = split
    op = Operation(kind, results, [], _result_types(type_text), line=number)
    if kind == "constant":
        op.attributes["_literal"] = rest
        return op
    callee = re.match(r"\s*@([\w.$-]+)\s*\(", operand_text)
    if callee:
        op.callee = callee[1]
    attributes = re.search(r"\{.*\}\s*$", operand_text)
    if attributes:
        op.attributes = _attributes(attributes[0])
        operand_text = operand_text[:attributes.start()]
    op.operands = _SSA.findall(operand_text)
    if len(op.result_types) != len(results):
        raise ExportError(f"line {number} of the Core AI program: {len(results)} results, "
                          f"{len(op.result_types)} result types")
    return op
