"""Batched numpy kernels of MIL ops, for the compiled evaluator (mil_eval.py).

A kernel is compiled once per op and input shape: given the op and what is known of its inputs (Operands: which are
constants and their values, which are computed at run time and their shapes), it returns a function of the run-time
arrays and the variables it reads, in order. Each follows the op's definition in coremltools.converters.mil.mil.ops.
defs, on arrays that carry one more leading axis, the batch, wherever a value is computed from the program's
inputs; constants have none and broadcast against them. Axes move by one on batched values, so kernels take axes in
their negative form, which the batch axis does not move.

Values are held in their computing form: fp16 as float32 arrays whose every element is an fp16 number. A kernel
computes in float32; the evaluator rounds its result to the type the program gives it (`storer`), as fp16 hardware
with float32 accumulation does.

A kernel that cannot take the op as compiled (an attribute computed at run time, a form it does not cover) raises
NotCovered, and the op is evaluated row by row by coremltools' value inference instead.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pocketbert.export.evaluators.numeric import (ACTIVATIONS, GELU, REDUCTIONS, aligner, convert_to,
                                                  pointwise_conv, pointwise_matrix, round_to_fp16, softmax,
                                                  take_along_axis)


class NotCovered(Exception):
    """This op, as the program has it, is outside the kernel: evaluate it row by row by value inference."""


class Operands:
    """What is known of an op's inputs when it is compiled: constants by variable name, and the arrays computed
    from the program's inputs for the rows being compiled (batch axis first), whose shapes hold for every batch."""

    def __init__(self, constants: dict, traced: dict):
        self.constants = constants
        self.traced = traced

    def batched(self, var) -> bool:
        return var is not None and var.name in self.traced

    def value(self, var, default=None):
        """A constant input's value (default when the op leaves the input out)."""
        if var is None:
            return default
        if var.name in self.traced:
            raise NotCovered(f"{var.name} is computed at run time")
        return self.constants[var.name]

    def shape(self, var) -> tuple[int, ...]:
        """The shape the program gives the value, without the batch axis."""
        if var.name in self.traced:
            return tuple(self.traced[var.name].shape[1:])
        return tuple(np.shape(self.constants[var.name]))

    def rank(self, var) -> int:
        return len(self.shape(var))


# ---------------------------------------------------------------- precision

def storer(var) -> Callable | None:
    """How a result is held as the program types `var`: fp16 rounded (held in float32), other numbers converted
    (float to integer truncates toward zero, as MIL's cast does); None for a string or a dictionary (classify)."""
    from coremltools.converters.mil.mil import types

    dtype = var.dtype
    if types.is_str(dtype) or types.is_dict(dtype) or types.is_list(var.sym_type):
        return None
    if dtype == types.fp16:
        return round_to_fp16
    return convert_to(np.float32 if types.is_float(dtype) else types.nptype_from_builtin(dtype))


# ---------------------------------------------------------------- helpers

def _negative(axis: int, rank: int) -> int:
    """An axis counted from the end: the same axis with or without a leading batch axis."""
    axis = int(axis)
    if not -rank <= axis < rank:
        raise NotCovered(f"axis {axis} of a rank-{rank} value")
    return axis - rank if axis >= 0 else axis


def _aligned(operands: Operands, var, rank: int) -> Callable:
    return aligner(operands.batched(var), operands.rank(var), rank)


def _reshaper(program_shape: tuple[int, ...]) -> Callable:
    """A batched value given this program shape, its batch axis kept."""
    shape = tuple(int(d) for d in program_shape)
    return lambda x: x.reshape((x.shape[0],) + shape)


def _proxy(shape: tuple[int, ...]) -> np.ndarray:
    """A zero-byte array of a shape, to work out shapes with numpy's own rules."""
    return np.broadcast_to(np.zeros((), dtype=np.int8), shape)


# ---------------------------------------------------------------- elementwise

def _binary(op, operands: Operands):
    """add, sub, mul, real_div, pow, maximum, minimum, comparisons, logical ops: the op's own operator."""
    function = op.get_operator()
    rank = max(operands.rank(op.x), operands.rank(op.y))
    x, y = _aligned(operands, op.x, rank), _aligned(operands, op.y, rank)
    return (lambda a, b: function(x(a), y(b))), [op.x, op.y]


_UNARY_WITH_EPSILON = {  # the op adds its epsilon input before the function
    "rsqrt": lambda x, e: 1.0 / np.sqrt(x + e), "log": lambda x, e: np.log(x + e),
    "inverse": lambda x, e: 1.0 / (x + e),
}


def _unary(op, operands: Operands):
    if op.op_type in _UNARY_WITH_EPSILON:
        function, epsilon = _UNARY_WITH_EPSILON[op.op_type], np.float32(operands.value(op.epsilon))
        return (lambda x: function(x, epsilon)), [op.x]
    return ACTIVATIONS[op.op_type], [op.x]


_GELU_MODES = {"EXACT": "exact", "TANH_APPROXIMATION": "tanh", "SIGMOID_APPROXIMATION": "sigmoid"}


def _gelu(op, operands: Operands):
    mode = operands.value(op.mode, "EXACT")
    if mode not in _GELU_MODES:
        raise NotCovered(f"gelu mode {mode}")
    return GELU[_GELU_MODES[mode]], [op.x]


def _cast(op, operands: Operands):
    """The conversion is the result's storer (the op's dtype is the result's type)."""
    return (lambda x: x), [op.x]


def _select(op, operands: Operands):
    rank = max(operands.rank(v) for v in (op.cond, op.a, op.b))
    cond, a, b = (_aligned(operands, v, rank) for v in (op.cond, op.a, op.b))
    return (lambda c, x, y: np.where(cond(c), a(x), b(y))), [op.cond, op.a, op.b]


# ---------------------------------------------------------------- normalization, products, reductions

def _softmax(op, operands: Operands):
    axis = _negative(operands.value(op.axis, -1), operands.rank(op.x))
    return (lambda x: softmax(x, axis)), [op.x]


def _layer_norm(op, operands: Operands):
    shape = operands.shape(op.x)
    rank = len(shape)
    axes_value = operands.value(op.axes, None)
    axes = tuple(sorted({_negative(a, rank) for a in (range(rank) if axes_value is None else
                                                         np.atleast_1d(axes_value))}))
    normalized = [shape[i] if i - rank in axes else 1 for i in range(rank)]
    gamma, beta = operands.value(op.gamma, None), operands.value(op.beta, None)
    gamma = None if gamma is None else np.reshape(gamma, normalized)
    beta = None if beta is None else np.reshape(beta, normalized)
    epsilon = np.float32(operands.value(op.epsilon, 1e-5))

    def run(x):
        centred = x - np.mean(x, axis=axes, keepdims=True)
        y = centred / np.sqrt(np.mean(np.square(centred), axis=axes, keepdims=True) + epsilon)
        if gamma is not None:
            y = y * gamma
        return y if beta is None else y + beta
    return run, [op.x]


def _batch_norm(op, operands: Operands):
    """Per-channel (axis 1 of (N, C, *D)) normalisation by constant statistics: what coremltools makes of a constant
    scale and shift of a channels-first value (its fuse_elementwise_to_batchnorm pass)."""
    rank = operands.rank(op.x)
    channels = (-1,) + (1,) * (rank - 2)
    mean, variance = (np.reshape(operands.value(v), channels) for v in (op.mean, op.variance))
    gamma = np.reshape(operands.value(op.gamma, np.float32(1.0)), (-1,) * (op.gamma is not None) + channels[1:])
    beta = np.reshape(operands.value(op.beta, np.float32(0.0)), (-1,) * (op.beta is not None) + channels[1:])
    scale = (gamma / np.sqrt(variance + np.float32(operands.value(op.epsilon, 1e-5)))).astype(np.float32)
    shift = (beta - mean * scale).astype(np.float32)
    return (lambda x: x * scale + shift), [op.x]


def _linear(op, operands: Operands):
    weight = operands.value(op.weight)
    bias = operands.value(op.bias, None)
    transposed = weight.T  # BLAS reads the transposed layout directly: no copy
    features = weight.shape[0]

    def run(x):
        # every row of every sequence in one product: one large GEMM runs twice as fast as a stack of small ones
        y = (x.reshape(-1, x.shape[-1]) @ transposed).reshape(x.shape[:-1] + (features,))
        return y if bias is None else y + bias
    return run, [op.x]


def _matmul(op, operands: Operands):
    ranks = [operands.rank(op.x), operands.rank(op.y)]
    if min(ranks) < 2:
        raise NotCovered("matmul of a vector")  # numpy would read a batched vector as a matrix
    rank = max(ranks)
    x, y = _aligned(operands, op.x, rank), _aligned(operands, op.y, rank)
    swap_x, swap_y = bool(operands.value(op.transpose_x, False)), bool(operands.value(op.transpose_y, False))

    def run(a, b):
        a, b = x(a), y(b)
        return np.matmul(np.swapaxes(a, -1, -2) if swap_x else a, np.swapaxes(b, -1, -2) if swap_y else b)
    return run, [op.x, op.y]


def _conv(op, operands: Operands):
    """A pointwise (1x1) convolution, the Linear of the Neural Engine layout ((N, C, H, W): C mixed at every H, W
    alone); any other convolution is left to value inference."""
    weight, bias = operands.value(op.weight), operands.value(op.bias, None)
    matrix = pointwise_matrix(weight, operands.value(op.strides, 1), operands.value(op.dilations, 1),
                              operands.value(op.groups, 1))
    if matrix is None or np.any(operands.value(op.pad, 0)) or operands.rank(op.x) != 4:
        raise NotCovered("a convolution other than 1x1")
    shift = None if bias is None else np.reshape(bias, (-1, 1, 1))

    def run(x):
        y = pointwise_conv(x, matrix)
        return y if shift is None else y + shift
    return run, [op.x]


# einsum's one form (coremltools' einsum op): [*D, C, H, W1] x [*D, W1, H, W2] -> [*D, C, H, W2], the matrices on
# axes -3 and -1, every other axis a batch axis (H and D broadcast).
_EINSUM_FORMS = {4: ([0, 1, 2, 3], [0, 3, 2, 4], [0, 1, 2, 4]), 3: ([0, 1, 2], [2, 1, 3], [0, 1, 3])}


def _einsum(op, operands: Operands):
    from coremltools.converters.mil.frontend._utils import parse_einsum_equation

    a_var, b_var = op.values
    rank = max(operands.rank(a_var), operands.rank(b_var))
    if tuple(parse_einsum_equation(operands.value(op.equation))) != _EINSUM_FORMS.get(rank):
        raise NotCovered(f"einsum {operands.value(op.equation)}")
    a_aligned, b_aligned = _aligned(operands, a_var, rank), _aligned(operands, b_var, rank)

    def run(a, b):
        # H next to the batch axes, each (C, W1) @ (W1, W2) one matrix product
        product = np.matmul(np.moveaxis(a_aligned(a), -2, -3), np.moveaxis(b_aligned(b), -2, -3))
        return np.moveaxis(product, -3, -2)
    return run, [a_var, b_var]


def _reduce(op, operands: Operands):
    function, rank = REDUCTIONS[op.op_type], operands.rank(op.x)
    axes_value = operands.value(op.axes, None)
    axes = tuple(_negative(a, rank) for a in (range(rank) if axes_value is None else np.atleast_1d(axes_value)))
    keep = bool(operands.value(op.keep_dims, False))
    return (lambda x: function(x, axis=axes, keepdims=keep)), [op.x]


# ---------------------------------------------------------------- shapes and indexing

def _reshape(op, operands: Operands):
    source = list(operands.shape(op.x))
    target = [int(d) for d in np.atleast_1d(operands.value(op.shape))]
    target = type(op).replace_zeros_in_shape(source, target)  # 0s as this opset version defines them
    return _reshaper(_proxy(tuple(source)).reshape(target).shape), [op.x]


def _expand_dims(op, operands: Operands):
    shape = list(operands.shape(op.x))
    axes = [int(a) for a in np.atleast_1d(operands.value(op.axes))]
    out_rank = len(shape) + len(axes)
    for axis in sorted(out_rank + a if a < 0 else a for a in axes):
        shape.insert(axis, 1)
    return _reshaper(tuple(shape)), [op.x]


def _squeeze(op, operands: Operands):
    shape = operands.shape(op.x)
    axes = operands.value(op.axes, None)
    squeezed = _proxy(shape).squeeze() if axes is None else _proxy(shape).squeeze(
        tuple(int(a) for a in np.atleast_1d(axes)))
    return _reshaper(squeezed.shape), [op.x]


def _transpose(op, operands: Operands):
    rank = operands.rank(op.x)
    perm = [int(p) % rank for p in np.atleast_1d(operands.value(op.perm))]
    if operands.batched(op.x):
        perm = [0] + [p + 1 for p in perm]
    return (lambda x: np.transpose(x, perm)), [op.x]


def _slice_by_index(op, operands: Operands):
    from coremltools.converters.mil.mil.ops.defs._utils import get_squeeze_axes, solve_slice_by_index_slice

    shape = operands.shape(op.x)
    masks = [operands.value(getattr(op, name, None), None) for name in ("begin_mask", "end_mask", "squeeze_mask")]
    stride = operands.value(op.stride, None)
    slices = solve_slice_by_index_slice(shape, operands.value(op.begin), operands.value(op.end),
                                        None if stride is None else list(stride), *masks)
    squeezed = tuple(a - len(shape) for a in get_squeeze_axes(masks[2], len(shape)))
    index = (slice(None),) + tuple(slices)

    def run(x):
        y = x[index]
        return np.squeeze(y, axis=squeezed) if squeezed else y
    return run, [op.x]


def _gather(op, operands: Operands):
    if int(operands.value(op.batch_dims, 0)) != 0:
        raise NotCovered("gather with batch_dims")
    data_rank = operands.rank(op.x)
    axis = int(operands.value(op.axis, 0))
    axis = axis + data_rank if axis < 0 else axis
    data_batched, index_batched = operands.batched(op.x), operands.batched(op.indices)
    if data_batched and index_batched:
        def each_row(x, indices):
            return np.stack([np.take(x[b], indices[b].astype(np.int64), axis=axis) for b in range(x.shape[0])])
        return each_row, [op.x, op.indices]
    if data_batched:
        return (lambda x, indices: np.take(x, np.asarray(indices, dtype=np.int64), axis=axis + 1)), [op.x, op.indices]
    # a constant table looked up by batched indices: the batch axis lands where the gathered axis was
    return (lambda x, indices: np.moveaxis(np.take(x, indices.astype(np.int64), axis=axis), axis, 0)
            ), [op.x, op.indices]


def _gather_along_axis(op, operands: Operands):
    rank = operands.rank(op.x)
    axis = _negative(operands.value(op.axis, 0), rank)
    data_batched, index_batched = operands.batched(op.x), operands.batched(op.indices)
    size = operands.shape(op.x)[axis]
    return (lambda x, indices: take_along_axis(x, indices, axis, size, data_batched, index_batched)
            ), [op.x, op.indices]


def _concat(op, operands: Operands):
    values = list(op.values)
    rank = operands.rank(values[0])
    if rank == 0 or bool(operands.value(op.interleave, False)):
        raise NotCovered("concat of scalars or interleaved")
    axis = _negative(operands.value(op.axis), rank)
    batched = [operands.batched(v) for v in values]

    def run(*arrays):
        rows = next(a.shape[0] for a, b in zip(arrays, batched) if b)
        return np.concatenate([a if b else np.broadcast_to(a, (rows,) + a.shape) for a, b in zip(arrays, batched)],
                              axis=axis)
    return run, values


def _split(op, operands: Operands):
    shape = operands.shape(op.x)
    axis = _negative(operands.value(op.axis), len(shape))
    sizes = operands.value(getattr(op, "split_sizes", None), None)
    if sizes is None:
        parts = int(operands.value(op.num_splits))
        if shape[axis] % parts:
            raise NotCovered("split into unequal parts")
        sizes = [shape[axis] // parts] * parts
    bounds = np.cumsum([int(s) for s in np.atleast_1d(sizes)])[:-1]
    return (lambda x: tuple(np.split(x, bounds, axis=axis))), [op.x]


def _tile(op, operands: Operands):
    reps = tuple(int(r) for r in np.atleast_1d(operands.value(op.reps)))
    if len(reps) != operands.rank(op.x):
        raise NotCovered("tile reps of another rank")
    return (lambda x: np.tile(x, (1,) + reps)), [op.x]


def _classify(op, operands: Operands):
    """Each row's label of highest probability, and every label's probability."""
    classes = list(operands.value(op.classes))

    def run(probabilities):
        rows = np.asarray(probabilities, dtype=np.float32).reshape(probabilities.shape[0], -1)
        return ([classes[int(np.argmax(row))] for row in rows],
                [{c: float(p) for c, p in zip(classes, row)} for row in rows])
    return run, [op.probabilities]


KERNELS: dict[str, Callable] = {
    **{name: _unary for name in (*ACTIVATIONS, *_UNARY_WITH_EPSILON)},
    **{name: _binary for name in ("add", "sub", "mul", "real_div", "floor_div", "mod", "pow", "maximum", "minimum",
                                  "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
                                  "logical_and", "logical_or", "logical_xor")},
    **{name: _reduce for name in REDUCTIONS},
    "gelu": _gelu, "cast": _cast, "select": _select,
    "softmax": _softmax, "layer_norm": _layer_norm, "batch_norm": _batch_norm, "linear": _linear, "matmul": _matmul,
    "conv": _conv, "einsum": _einsum,
    "reshape": _reshape, "expand_dims": _expand_dims, "squeeze": _squeeze, "transpose": _transpose,
    "slice_by_index": _slice_by_index, "gather": _gather, "gather_along_axis": _gather_along_axis,
    "concat": _concat, "split": _split, "tile": _tile, "classify": _classify,
}
# Ops whose results are some of their input's elements, unchanged: a result of the input's type needs no rounding.
MOVES_VALUES = {"reshape", "expand_dims", "squeeze", "transpose", "slice_by_index", "gather", "gather_along_axis",
                "concat", "split", "tile"}
