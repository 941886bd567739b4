"""Evaluates a Core AI program (coreai_ir.py) with numpy, for the parity gate on platforms without Core AI.

Each operation follows its definition in coreai-core's dialect (coreai/_compiler/dialects/_coreai_ops_gen.py).
The program is compiled once into a list of numpy steps: constants and everything computed from constants
alone (weight transposes, position ids) are folded at load, composite graphs (invoke) are inlined (but fused
attention, one step from coreai-torch's definition of the composite), and each step holds its operands' slots
and resolved attributes, so a prediction is one pass of plain numpy calls.

Batching: a program is specialized to shape (1, n). Sequences of one length are evaluated together by giving
every value computed from the inputs one more leading axis, the batch; an operation's axes move by one on those
values and constants broadcast against them unchanged. Each row is computed as it would be alone.

Precision (evaluators/numeric.py): an f16 value is held as an f32 array whose every element is an f16 number: each
operation computes in f32 and rounds its result to f16 where the program's type says f16.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from pocketbert.core.errors import ExportError
from pocketbert.export.evaluators.coreai_ir import Graph, Operation, Program, TensorType
from pocketbert.export.evaluators.numeric import (ACTIVATIONS, GELU, REDUCTIONS, aligner, computing_form,
                                                  pointwise_conv, pointwise_matrix, round_to_fp16, softmax,
                                                  take_along_axis)
from pocketbert.export.evaluators.plan import Plan, PlanBuilder
from pocketbert.export.evaluators.threads import one_thread


@dataclass
class Operand:
    """An operation's operand at compile time: a constant value, or a slot filled at run time (batched)."""

    slot: int | None
    value: np.ndarray | None
    kind: TensorType

    @property
    def constant(self) -> bool:
        return self.slot is None


def _store(x, kind: TensorType) -> np.ndarray:
    """A result as the program's type holds it: f16 rounded (held in f32), other types converted."""
    if kind.element == "f16":
        return round_to_fp16(np.asarray(x))
    return np.asarray(x).astype(kind.dtype, copy=False)


def _axis(value: np.ndarray, rank: int, batched: bool) -> int:
    axis = int(np.asarray(value).reshape(-1)[0])
    return (axis + rank if axis < 0 else axis) + batched


def _axes(value: np.ndarray, rank: int, batched: bool) -> tuple[int, ...]:
    return tuple((int(a) + rank if int(a) < 0 else int(a)) + batched for a in np.asarray(value).reshape(-1))


# ---------------------------------------------------------------- kernels
# A kernel gets the operation, its operands (compile time) and the result type, and returns the function of the
# operands' run-time arrays (batched values first axis B) that computes the result.

_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "pow": np.power,
    # comparisons give i1 (the static student leaves its special tokens out of its mean with not_equal)
    "equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
    "greater": np.greater, "greater_equal": np.greater_equal,
}


def _binary(name):
    ufunc = _BINARY[name]

    def kernel(op, operands, out):
        rank = len(out.shape)
        a_rank, b_rank = (len(o.kind.shape) for o in operands)
        align_a, align_b = (aligner(not o.constant, r, rank) for o, r in zip(operands, (a_rank, b_rank)))
        return lambda a, b: _store(ufunc(align_a(computing_form(a)), align_b(computing_form(b))), out)
    return kernel


def _matmul(op, operands, out):
    rank = len(out.shape)
    # a batched operand of rank 2 under a rank-3 result still needs its batch axis apart from the matrix axes
    align_a, align_b = (aligner(not o.constant and len(o.kind.shape) > 1, len(o.kind.shape), rank) for o in operands)
    return lambda a, b: _store(np.matmul(align_a(computing_form(a)), align_b(computing_form(b))), out)


def _unary(function):
    def kernel(op, operands, out):
        return lambda x: _store(function(computing_form(x)), out)
    return kernel


_GELU_APPROXIMATIONS = {"none": "exact", "tanh": "tanh", "sigmoid": "sigmoid"}


def _gelu(op, operands, out):
    approximate = op.attributes.get("approximate", "none")
    if approximate not in _GELU_APPROXIMATIONS:
        raise ExportError(f"line {op.line} of the Core AI program: gelu approximation '{approximate}' is unknown")
    return _unary(GELU[_GELU_APPROXIMATIONS[approximate]])(op, operands, out)


def _cast(op, operands, out):
    target = out.dtype

    def run(x):
        if x.dtype.kind == "f" and target.kind in "iu":
            return np.trunc(x).astype(target)  # float to integer truncates toward zero
        if target == np.bool_:
            return x != 0
        return _store(x, out)
    return run


def _constant_operand(op, operands, index: int, what: str) -> np.ndarray:
    if not operands[index].constant:
        raise ExportError(f"line {op.line} of the Core AI program: {op.kind}'s {what} is computed at run time; "
                          "pocketbert evaluates it only as a constant")
    return operands[index].value


def _reshape(op, operands, out):
    if any(d is None for d in out.shape):
        raise ExportError(f"line {op.line} of the Core AI program: a reshape to a dynamic shape")
    shape = tuple(out.shape)
    batched = not operands[0].constant
    return lambda x, _shape: x.reshape((x.shape[0],) + shape if batched else shape)


def _transpose(op, operands, out):
    perm = tuple(int(p) for p in _constant_operand(op, operands, 1, "permutation").reshape(-1))
    if not operands[0].constant:
        perm = (0,) + tuple(p + 1 for p in perm)
    return lambda x, _perm: np.transpose(x, perm)


def _reduce(function):
    def kernel(op, operands, out):
        rank = len(operands[0].kind.shape)
        axes = _axes(_constant_operand(op, operands, 1, "axes"), rank, not operands[0].constant)
        return lambda x, _axes_value: _store(function(computing_form(x), axis=axes, keepdims=True), out)
    return kernel


def _softmax(op, operands, out):
    rank = len(operands[0].kind.shape)
    axis = _axis(_constant_operand(op, operands, 1, "axis"), rank, not operands[0].constant)

    return lambda x, _axis_value: _store(softmax(computing_form(x), axis), out)


def _gather_nd(op, operands, out):
    data_batched, index_batched = (not o.constant for o in operands)
    sizes = operands[0].kind.shape

    def run(data, indices):
        indices = indices.astype(np.int64)
        q = indices.shape[-1]
        index = []
        for k in range(q):
            i = indices[..., k]
            size = sizes[k]
            index.append(np.where(i < 0, i + size, i))  # negative indices wrap once
        if data_batched:
            rows = np.arange(data.shape[0]).reshape((-1,) + (1,) * (indices.ndim - 1 - index_batched))
            return data[(rows, *index)]
        return data[tuple(index)]
    return run


def _gather_along_axis(op, operands, out):
    rank = len(operands[0].kind.shape)
    data_batched, index_batched = (not o.constant for o in operands[:2])
    batched = data_batched or index_batched
    axis = _axis(_constant_operand(op, operands, 2, "axis"), rank, batched)
    size = operands[0].kind.shape[axis - batched]

    return lambda data, indices, _axis_value: take_along_axis(data, indices, axis, size, data_batched, index_batched)


def _slice(op, operands, out):
    starts, ends, strides = (_constant_operand(op, operands, i, what).reshape(-1).astype(np.int64)
                             for i, what in ((1, "start"), (2, "end"), (3, "strides")))
    sizes = operands[0].kind.shape
    index = []
    for size, start, end, stride in zip(sizes, starts, ends, strides):
        if stride == 0:
            raise ExportError(f"line {op.line} of the Core AI program: a slice with stride 0")
        low = 0 if stride > 0 else -1
        start = start + size if start < (0 if stride > 0 else 0) else start
        end = end + size if end < low else end
        if stride > 0:
            start, end = min(max(start, 0), size), min(max(end, 0), size)
        else:
            start, end = min(max(start, 0), size - 1), min(max(end, -1), size - 1)
        index.append(slice(int(start), None if end < 0 else int(end), int(stride)))
    if not operands[0].constant:
        index.insert(0, slice(None))
    index = tuple(index)
    return lambda x, *_bounds: x[index]


def _split(op, operands, out_types):
    rank = len(operands[0].kind.shape)
    batched = not operands[0].constant
    axis = _axis(_constant_operand(op, operands, 2, "axis"), rank, batched)
    sizes = np.asarray(_constant_operand(op, operands, 1, "sizes")).reshape(-1).astype(int)
    total = operands[0].kind.shape[axis - batched]
    if sizes.size == 1 and np.asarray(operands[1].value).ndim == 0:  # a chunk size: equal chunks, the last shorter
        sizes = np.array([min(int(sizes[0]), total - start) for start in range(0, total, int(sizes[0]))])
    if sizes.sum() != total or len(sizes) != len(out_types):
        raise ExportError(f"line {op.line} of the Core AI program: a split into {list(sizes)} of {total}")
    bounds = np.cumsum(sizes)[:-1]
    return lambda x, _sizes, _axis_value: tuple(np.split(x, bounds, axis=axis))


def _concat(op, operands, out):
    """concat: the axis first (a 0-D constant), then the values joined along it; a constant among computed values
    repeated over their batch."""
    rank = len(out.shape)
    batched = any(not o.constant for o in operands[1:])
    axis = _axis(_constant_operand(op, operands, 0, "dimension"), rank, batched)
    constant = [o.constant for o in operands[1:]]

    def run(_axis_value, *values):
        rows = next((v.shape[0] for v, c in zip(values, constant) if not c), None)
        if batched:
            values = [np.broadcast_to(v, (rows,) + v.shape) if c else v for v, c in zip(values, constant)]
        return _store(np.concatenate(values, axis=axis), out)
    return run


def _conv2d(op, operands, out):
    """conv2d (input (N, C_in, H, W), weight (C_out, C_in / groups, kH, kW), stride, dilation, groups; no bias
    and no padding: coreai-torch adds them as their own operations), pointwise only: the Linear of the Neural Engine
    layout (export/programs/ane_layout.py)."""
    matrix = pointwise_matrix(*(_constant_operand(op, operands, i, what) for i, what in
                                ((1, "weight"), (2, "stride"), (3, "dilation"), (4, "groups"))))
    if matrix is None:
        raise ExportError(f"line {op.line} of the Core AI program: a convolution other than 1x1 (stride and dilation "
                          "1, one group), which pocketbert's evaluator does not implement")
    return lambda x, _weight, *_attributes: _store(pointwise_conv(computing_form(x), matrix), out)


def _blocks(param: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A blockwise parameter (one value per block of `shape`) repeated over each block's elements."""
    for axis, (size, blocks) in enumerate(zip(shape, param.shape)):
        if size % blocks:
            raise ExportError(f"a blockwise parameter of shape {param.shape} does not divide shape {shape}")
        param = np.repeat(param, size // blocks, axis=axis)
    return param


def _blockwise_shift_scale(op, operands, out):
    """Dequantization (coreai-opt's int8 weights): scale * (data - offset1) + offset2, each of the three given
    per block of data (block size along an axis: data's size over the parameter's)."""
    for i, what in ((1, "scale"), (2, "offset1"), (3, "offset2")):
        _constant_operand(op, operands, i, what)
    batched = not operands[0].constant

    def run(data, scale, offset1, offset2):
        shape = data.shape[batched:]
        scale, offset1, offset2 = (_blocks(computing_form(np.asarray(v)).astype(np.float32), shape)
                                   for v in (scale, offset1, offset2))
        return _store(scale * (data.astype(np.float32) - offset1) + offset2, out)
    return run


def _lut_to_dense(op, operands, out):
    """A palettized weight rebuilt (coreai-opt's 6- and 4-bit weights): each index replaced by its entry in the
    palette of its block. indices [a0..aK-1]; lut [b0..bK-1, P, V]: position p reads lut[p0 // (a0/b0), ...,
    indices[p], :]; a vector of V entries (V > 1) widens dimension `axis` V times."""
    _constant_operand(op, operands, 0, "indices")
    _constant_operand(op, operands, 2, "axis")

    def run(indices, lut, axis_value):
        indices = np.asarray(indices).astype(np.int64)
        lut = computing_form(np.asarray(lut))
        rank = indices.ndim
        if lut.ndim != rank + 2 or lut.shape[-2] <= int(indices.max(initial=0)):
            raise ExportError(f"line {op.line} of the Core AI program: a palette of shape {lut.shape} for indices "
                              f"of shape {indices.shape}")
        blocks = []
        for i, (size, groups) in enumerate(zip(indices.shape, lut.shape[:rank])):
            if size % groups:
                raise ExportError(f"line {op.line} of the Core AI program: {groups} palettes along an axis of {size}")
            blocks.append((np.arange(size) // (size // groups)).reshape((-1,) + (1,) * (rank - 1 - i)))
        values = lut[(*blocks, indices)]  # indices.shape + (V,)
        vector = lut.shape[-1]
        axis = int(np.asarray(axis_value).reshape(-1)[0]) % rank
        values = np.moveaxis(values, -1, axis + 1)  # each vector right after its position along axis
        shape = list(indices.shape)
        shape[axis] *= vector
        return _store(values.reshape(shape), out)
    return run


# Composites with a kernel of their own (coreai-torch's composite ops): a call runs as one operation, as the
# device's fused kernel runs it, not through the decomposition in the composite's body. Any other composite
# (layer_norm) is inlined and its body evaluated.
SDPA = "scaled_dot_product_attention"
SDPA_BOOLEAN_MASK_VALUE = -1e4  # what a false entry of a boolean mask adds (coreai-torch's _vanilla_sdpa)


def _scaled_dot_product_attention(op, operands, out):
    """coreai-torch's attention composite (coreai_torch/composite_ops/_sdpa.py, _vanilla_sdpa, which its converter's
    _sdpa_decompose spells out): softmax(scale * q @ k^T + mask) @ v over rank-4 (batch, heads, length, head size)
    values, scale the declaration's or 1/sqrt(head size), the mask added as it is or, boolean, -1e4 where false,
    the softmax over the keys (the last axis), key and value heads repeated for grouped queries. One operation:
    computed in f32, rounded once to the result's type (a fused kernel holds its scores inside)."""
    if op.attributes.get("is_causal") or op.attributes.get("window_size"):
        raise ExportError(f"line {op.line} of the Core AI program: an attention composite with a causal or sliding "
                          "window mask of its own, which pocketbert evaluates only as an explicit mask")
    query = operands[0].kind.shape
    scale = op.attributes.get("scale")
    scale = np.float32(1.0 / np.sqrt(query[-1]) if scale is None else scale)
    heads = query[-3]
    mask = operands[3] if len(operands) > 3 else None
    rank = len(query)

    def grouped(x):  # grouped-query attention: each key/value head serves heads / its heads query heads
        return x if x.shape[-3] == heads else np.repeat(x, heads // x.shape[-3], axis=-3)

    def run(q, k, v, m=None):
        scores = (scale * computing_form(q)) @ np.swapaxes(grouped(computing_form(k)), -1, -2)
        if m is not None:
            m = aligner(not mask.constant, len(mask.kind.shape), rank)(m)
            scores = scores + (np.where(m, 0.0, SDPA_BOOLEAN_MASK_VALUE).astype(np.float32) if m.dtype == np.bool_
                               else computing_form(m))
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        return _store((e / e.sum(axis=-1, keepdims=True)) @ grouped(computing_form(v)), out)
    return run


# Operations of several results: their kernels get every result type and return a tuple.
MULTI_RESULT = {"split"}

KERNELS: dict[str, Callable] = {
    **{f"decomposable.broadcasting_{name}": _binary(name) for name in _BINARY},
    **{f"broadcasting_{name}": _binary(name) for name in _BINARY},
    "decomposable.broadcasting_batch_matmul": _matmul,
    "broadcasting_batch_matmul": _matmul,
    "reshape": _reshape,
    "transpose": _transpose,
    "cast": _cast,
    "softmax": _softmax,
    **{name: _reduce(REDUCTIONS[name]) for name in ("reduce_mean", "reduce_sum", "reduce_max")},
    "gelu": _gelu,
    **{name: _unary(ACTIVATIONS[name]) for name in ("tanh", "relu", "sqrt", "exp", "erf")},
    "rsqrt": _unary(lambda x: 1.0 / np.sqrt(x)),
    "gather_nd": _gather_nd,
    "gather_along_axis": _gather_along_axis,
    "slice": _slice,
    "split": _split,
    "concat": _concat,
    "conv2d": _conv2d,
    "blockwise_shift_scale": _blockwise_shift_scale,
    "lut_to_dense": _lut_to_dense,
    SDPA: _scaled_dot_product_attention,  # a composite's declared name never spells a coreai operation
}


# ---------------------------------------------------------------- compiling and running

class CoreAIEvaluator:
    """One entry point of a program, compiled to numpy steps; predict takes a batch of rows of its shape."""

    def __init__(self, program: Program, entry: str, kernels: dict[str, Callable] | None = None):
        if entry not in program.graphs or program.graphs[entry].private:
            raise ExportError(f"the Core AI program has no entry point '{entry}' "
                              f"(it has {', '.join(g.name for g in program.entry_points)})")
        self.program = program
        self.kernels = KERNELS if kernels is None else kernels
        self.graph = program.graphs[entry]
        self._builder = PlanBuilder()
        scope: dict[str, Operand] = {}
        inputs = {}
        for ssa, name, kind in zip(self.graph.arguments, self.graph.input_names, self.graph.input_types):
            scope[ssa] = Operand(self._builder.slot(), None, kind)
            inputs[name] = (scope[ssa].slot, lambda value, kind=kind: _store(value, kind))
        outputs = self._compile(self.graph, scope)
        self.plan: Plan = self._builder.plan(inputs, {name: (o.slot, o.value) for name, o in
                                                      zip(self.graph.output_names, outputs)})

    @property
    def input_types(self) -> dict[str, TensorType]:
        return dict(zip(self.graph.input_names, self.graph.input_types))

    def _compile(self, graph: Graph, scope: dict[str, Operand]) -> list[Operand]:
        for op in graph.operations:
            results = self._compile_op(op, scope)
            for name, operand in zip(op.results, results):
                scope[name] = operand
        missing = [o for o in graph.outputs if o not in scope]
        if missing:
            raise ExportError(f"graph {graph.name} of the Core AI program returns undefined values {missing}")
        return [scope[o] for o in graph.outputs]

    def _compile_op(self, op: Operation, scope: dict[str, Operand]) -> list[Operand]:
        if op.kind == "constant":  # f16 weights widened once, exactly: arithmetic reads f32
            return [Operand(None, computing_form(op.value), op.result_types[0])]
        try:
            operands = [scope[name] for name in op.operands]
        except KeyError as missing:
            raise ExportError(f"line {op.line} of the Core AI program reads {missing} before it is defined") from None
        if op.kind == "invoke":
            callee = self.program.graphs.get(op.callee)
            if callee is None:
                raise ExportError(f"line {op.line} of the Core AI program calls an unknown graph @{op.callee}")
            if callee.composite not in self.kernels:
                return self._compile(callee, dict(zip(callee.arguments, operands)))
            op = callee.called_as_one(op)
        kernel = self.kernels.get(op.kind)
        if kernel is None:
            raise ExportError(f"line {op.line} of the Core AI program uses coreai.{op.kind}, an operation pocketbert's "
                              f"evaluator does not implement: export the Core ML variants instead, or report it")
        several = op.kind in MULTI_RESULT
        if len(op.result_types) != 1 and not several:
            raise ExportError(f"line {op.line} of the Core AI program: coreai.{op.kind} with several results")
        run = kernel(op, operands, op.result_types if several else op.result_types[0])
        if all(o.constant for o in operands):  # folded once here: weight transposes, position ids, shapes
            values = run(*[o.value for o in operands])
            values = values if several else (values,)
            return [Operand(None, _store(v, t), t) for v, t in zip(values, op.result_types)]
        # the kernels round their own results (_store): the step stores them as they are
        step = self._builder.step(run, [self._builder.constant(o.value) if o.constant else o.slot for o in operands],
                                  [None] * len(op.result_types), several)
        return [Operand(slot, None, t) for slot, t in zip(step.writes, op.result_types)]

    def predict(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Outputs for a batch: each input of shape (B,) + the entry point's input shape."""
        for name, kind in self.input_types.items():
            if name not in inputs:
                raise ExportError(f"the Core AI program needs input '{name}'")
            shape = np.shape(inputs[name])[1:]
            if shape != kind.shape:
                raise ExportError(f"input '{name}' has shape {shape} per row; the program takes {kind.shape}")
        with one_thread():  # evaluators/threads.py: BLAS's and torch's pools otherwise spin against each other
            return self.plan.run({name: np.asarray(inputs[name]) for name in self.input_types})
