"""A saved Apple program as the placement rules read it: per function, the operations that compute at run time,
each with the types and shapes it reads and writes, its FLOPs, and who feeds whom.

Both formats come down to the same view. A Core ML package is read with coremltools' own MIL loader (as the MIL
evaluator reads it); a Core AI asset through coreai-core's bytecode reader (coreai_ir), its composite graphs
(`invoke` of layer_norm and the like) inlined, so that what a composite computes is checked too, except fused
attention, one operation as the device runs it. Operations whose inputs are all constants (weight transposes,
position ids) are left out: a compiler folds them before anything runs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pocketbert.export.evaluators.mil_reference import input_vars

FP16, FP32 = "fp16", "fp32"
# Fused attention, softmax(scale * q @ k^T + mask) @ v as one operation: Core ML's MIL op (iOS 18) and Core AI's
# composite (coreai-torch's, read as one operation: a device runs it as one kernel) share the name.
ATTENTION = frozenset({"scaled_dot_product_attention"})
# Operations that multiply matrices, in either format: where FLOPs are spent, and what layout rules look around.
# Convolutions as each format spells them (MIL's conv; Core AI's conv2d, the ANE layout's Linear).
CONVOLUTIONS = frozenset({"conv", "conv2d"})
MATRIX_PRODUCTS = CONVOLUTIONS | ATTENTION | frozenset({"linear", "matmul", "einsum", "batch_matmul",
                                                      "decomposable.broadcasting_batch_matmul"})
# Operations that move values without arithmetic: no FLOPs.
DATA_MOVEMENT = frozenset({"reshape", "transpose", "expand_dims", "squeeze", "slice_by_index", "slice_by_size",
                           "slice", "concat", "split", "cast", "gather", "gather_nd", "gather_along_axis", "tile",
                           "identity", "pad", "scatter", "scatter_nd", "scatter_along_axis", "shape"})
LAYOUT_CHANGES = frozenset({"reshape", "transpose"})
# Element types of Core AI's textual IR under the names MIL gives them.
_COREAI_TYPES = {"f16": FP16, "f32": FP32, "f64": "fp64", "i1": "bool", "bf16": "bf16"}


@dataclass(frozen=True)
class Tensor:
    shape: tuple[int | None, ...]  # None: a dimension known only at run time
    dtype: str                     # "fp16", "fp32", "int32", "bool", ... ("" for a non-tensor such as a dictionary)

    @property
    def elements(self) -> int:
        return int(np.prod([d or 1 for d in self.shape])) if self.shape else 1


@dataclass
class Operand:
    name: str
    tensor: Tensor
    constant: bool  # a weight, or computed from weights alone


@dataclass
class Op:
    name: str
    op_type: str              # as the program spells it ("linear", "decomposable.broadcasting_batch_matmul")
    reads: list[Operand]
    writes: list[Operand]
    flops: int = 0
    attributes: dict = field(default_factory=dict)

    @property
    def computed_reads(self) -> list[Operand]:
        return [r for r in self.reads if not r.constant]


@dataclass
class Function:
    """One function (entry point) of a program: its inputs, how flexible their shapes are, its operations."""

    name: str
    inputs: dict[str, Tensor]
    input_shapes: dict[str, str]  # input -> "fixed", "range" or "enumerated"
    ops: list[Op]
    # weights stored compressed, by the name of the value they decompress to: "palettized-<bits>bit" or "int8"
    compressed_weights: dict[str, str] = field(default_factory=dict)
    ios_target: int | None = None  # the iOS version the program's specification targets (Core ML); None: unknown

    @functools.cached_property
    def producers(self) -> dict[str, int]:
        return {w.name: i for i, op in enumerate(self.ops) for w in op.writes}

    @functools.cached_property
    def consumers(self) -> dict[str, list[int]]:
        found: dict[str, list[int]] = {}
        for i, op in enumerate(self.ops):
            for r in op.computed_reads:
                found.setdefault(r.name, []).append(i)
        return found

    @functools.cached_property
    def computes_in_fp16(self) -> bool:
        return any(w.tensor.dtype == FP16 for op in self.ops for w in op.writes)


def flops(op_type: str, reads: list[Operand], writes: list[Operand], attributes: dict) -> int:
    """Multiply-adds count two; other arithmetic one per element of its largest operand; data movement none."""
    out = writes[0].tensor if writes else Tensor((), "")
    if op_type in ("linear",):
        return 2 * out.elements * (reads[1].tensor.shape[-1] or 1)
    if op_type in CONVOLUTIONS:
        weight = reads[1].tensor.shape
        return 2 * out.elements * int(np.prod([d or 1 for d in weight[1:]]))
    if op_type in ATTENTION:
        return _attention_flops(reads, out)
    if op_type in MATRIX_PRODUCTS:
        x = reads[0].tensor.shape
        inner = x[-2] if attributes.get("transpose_x") else x[-1] if x else 1
        return 2 * out.elements * (inner or 1)
    if op_type in DATA_MOVEMENT or op_type.startswith("constexpr_"):
        return 0
    return max([t.tensor.elements for t in (*reads, *writes) if not t.constant] or [0])


def _attention_flops(reads: list[Operand], out: Tensor) -> int:
    """As its decomposition counts them: the query scaled, scores q @ k^T, the mask added, the softmax, the
    weighted sum of values. reads: query (..., length, head size), key (..., keys, head size), value[, mask]."""
    query, key = reads[0].tensor, reads[1].tensor
    keys, head = key.shape[-2] or 1, query.shape[-1] or 1
    scores = query.elements // head * keys
    return query.elements + 2 * scores * head + scores * (2 if len(reads) > 3 else 1) + 2 * out.elements * keys


# ---------------------------------------------------------------- Core ML

def _mil_tensor(var) -> Tensor:
    from coremltools.converters.mil.mil import types

    try:
        dtype = types.builtin_to_string(var.dtype) or ""
    except Exception:  # a dictionary or list value (a classifier's probabilities) has no element type
        dtype = ""
    shape = tuple(int(d) if isinstance(d, (int, np.integer)) else None for d in (var.shape or ()))
    return Tensor(shape, dtype)


# Core ML specification versions and the iOS release that introduced each (coremltools' target enum)
SPEC_TO_IOS = {4: 13, 5: 14, 6: 15, 7: 16, 8: 17, 9: 18, 10: 26}


def _compression(op) -> str | None:
    """What a constexpr operation decompresses: a palette of 2^bits entries, or int8 values scaled to floats."""
    if op.op_type == "constexpr_lut_to_dense":
        lut = op.inputs["lut"].shape
        entries = lut[0] if len(lut) == 1 else lut[-2]  # iOS 16: (entries,); iOS 18: (..., entries, vector size)
        return f"palettized-{int(entries).bit_length() - 1}bit"
    if op.op_type in ("constexpr_affine_dequantize", "constexpr_blockwise_shift_scale"):
        data = op.inputs.get("quantized_data") or op.inputs.get("data")
        from coremltools.converters.mil.mil import types

        if data is not None and types.builtin_to_string(data.dtype) in ("int8", "uint8"):
            return "int8"
    return None


def _input_shapes(description) -> dict[str, str]:
    kinds = {"shapeRange": "range", "enumeratedShapes": "enumerated"}
    return {i.name: kinds.get(i.type.multiArrayType.WhichOneof("ShapeFlexibility"), "fixed")
            for i in description.input}


def read_mlpackage(path: Path) -> list[Function]:
    """Every function of a saved .mlpackage (a multifunction package has several), as the rules read them."""
    from coremltools.converters.mil.frontend.milproto.load import load as load_mil

    from pocketbert.core.students.inference import import_coremltools
    from pocketbert.core.process.quiet import quiet_tools

    ct = import_coremltools()
    with quiet_tools():
        model = ct.models.MLModel(str(path), skip_model_load=True)
        spec = model.get_spec()
        program = load_mil(spec, spec.specificationVersion, file_weights_dir=model.weights_dir)
    described = {f.name: f for f in spec.description.functions} or {"main": spec.description}
    functions = []
    # in the order the package describes them: the loaded program's map of functions has no fixed order (two
    # processes reading one package list them differently)
    names = [n for n in described if n in program.functions] + [n for n in program.functions if n not in described]
    for name in names:
        function = program.functions[name]
        shapes = _input_shapes(described.get(name, spec.description))
        constant: set[str] = set()
        compressed: dict[str, str] = {}
        ops = []
        for op in function.operations:
            reads = [Operand(v.name, _mil_tensor(v), v.name in constant) for v in input_vars(op)]
            if op.op_type == "const" or op.op_type.startswith("constexpr_") or (reads and all(
                    r.constant for r in reads)):
                constant.update(v.name for v in op.outputs)
                kind = _compression(op) if op.op_type.startswith("constexpr_") else None
                if kind:
                    compressed.update((v.name, kind) for v in op.outputs)
                continue
            writes = [Operand(v.name, _mil_tensor(v), False) for v in op.outputs]
            attributes = {k: v.val for k, v in op.inputs.items()
                          if not isinstance(v, (list, tuple)) and v.name in constant and np.ndim(v.val) == 0}
            ops.append(Op(op.name, op.op_type, reads, writes, flops(op.op_type, reads, writes, attributes),
                          attributes))
        functions.append(Function(name, {k: _mil_tensor(v) for k, v in function.inputs.items()}, shapes, ops,
                                  compressed, SPEC_TO_IOS.get(spec.specificationVersion)))
    return functions


# ---------------------------------------------------------------- Core AI

def _coreai_tensor(kind) -> Tensor:
    element = kind.element
    dtype = _COREAI_TYPES.get(element) or (f"int{element.lstrip('su')[1:]}" if element.lstrip("su").startswith("i")
                                           else element)
    return Tensor(tuple(kind.shape), dtype)


def read_aimodel(path: Path) -> list[Function]:
    """Every entry point of a saved .aimodel, its composites inlined."""
    from pocketbert.export.evaluators import coreai_ir

    program = coreai_ir.load_program(Path(path))
    functions = []
    for graph in program.entry_points:
        types = {a: _coreai_tensor(t) for a, t in zip(graph.arguments, graph.input_types)}
        ops: list[Op] = []
        _inline(program, graph, {}, "", types, set(), ops)
        inputs = {n: _coreai_tensor(t) for n, t in zip(graph.input_names, graph.input_types)}
        shapes = {n: "range" if None in t.shape else "fixed" for n, t in zip(graph.input_names, graph.input_types)}
        functions.append(Function(graph.name, inputs, shapes, ops))
    return functions


def _inline(program, graph, bound: dict[str, str], prefix: str, types: dict[str, Tensor], constant: set[str],
            ops: list[Op]) -> list[str]:
    """Append the graph's operations (a composite's under the name of its call), its arguments bound to the names
    of the caller's values; returns the names of what it outputs."""
    aliases: dict[str, str] = {}  # a call's results: the names of what the composite outputs

    def name(ssa: str) -> str:
        return aliases.get(ssa) or bound.get(ssa, prefix + ssa)

    for op in graph.operations:
        operands = [name(o) for o in op.operands]
        if op.kind == "invoke":
            callee = program.graphs[op.callee]
            if callee.composite not in ATTENTION:
                inner = dict(zip(callee.arguments, operands))
                outputs = _inline(program, callee, inner, f"{prefix}{op.results[0]}/", types, constant, ops)
                aliases.update(zip(op.results, outputs))
                continue
            op = callee.called_as_one(op)
        results = [name(r) for r in op.results]
        for r, t in zip(results, op.result_types):
            types[r] = _coreai_tensor(t)
        if op.kind == "constant" or all(o in constant for o in operands):
            constant.update(results)
            continue
        reads = [Operand(o, types[o], o in constant) for o in operands]
        writes = [Operand(r, types[r], False) for r in results]
        ops.append(Op(results[0], op.kind, reads, writes, flops(op.kind, reads, writes, op.attributes),
                      dict(op.attributes)))
    return [name(o) for o in graph.outputs]
