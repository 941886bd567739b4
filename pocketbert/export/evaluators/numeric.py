"""The numbers both evaluators compute with: how a value is held (precision), and the math of the operations the
MIL and Core AI programs share (activations, GELU, reductions, softmax, gathers, pointwise convolutions), each
defined once.

Values are held in their computing form: fp16 as float32 arrays whose every element is an fp16 number. Arithmetic
runs in float32 and a result is rounded to fp16 where the program's type says fp16, as fp16 hardware with float32
accumulation does. Constants are float32 too (np.float32, never a float64 scalar), so no step widens to float64:
PyTorch's own GELU, the reference the gate compares with, computes erf in float32.

numpy converts to and from fp16 and computes erf one element at a time; those two run through torch's vectorized
kernels on the same memory (torch.from_numpy), the only use of torch here.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

# ---------------------------------------------------------------- precision


def round_to_fp16(x) -> np.ndarray:
    """float32 values rounded to the nearest fp16 number, held as float32."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).half().float().numpy()


def computing_form(value):
    """A value as arithmetic reads it: fp16 widened (exactly) to float32, other values as they are."""
    if isinstance(value, np.ndarray) and value.dtype == np.float16:
        return value.astype(np.float32)
    if isinstance(value, np.float16):
        return np.float32(value)
    return value


def convert_to(numpy_type) -> Callable:
    """How a result is held as a non-fp16 type: converted (float to integer truncates toward zero)."""
    return lambda x: np.asarray(x).astype(numpy_type, copy=False)


# ---------------------------------------------------------------- elementwise math


def erf(x) -> np.ndarray:
    import torch

    return torch.erf(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))).numpy()


ACTIVATIONS: dict[str, Callable] = {
    "tanh": np.tanh, "exp": np.exp, "exp2": np.exp2, "sqrt": np.sqrt, "abs": np.abs, "square": np.square,
    "sin": np.sin, "cos": np.cos, "floor": np.floor, "ceil": np.ceil, "sign": np.sign, "erf": erf,
    "relu": lambda x: np.maximum(x, 0), "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "silu": lambda x: x / (1.0 + np.exp(-x)),  # coremltools has no value inference for it
}

# GELU by its approximation: exact (erf), tanh, sigmoid
GELU: dict[str, Callable] = {
    "exact": lambda x: 0.5 * x * (1.0 + erf(x / np.float32(np.sqrt(2.0)))),
    "tanh": lambda x: 0.5 * x * (1.0 + np.tanh(np.float32(np.sqrt(2.0 / np.pi)) * (x + np.float32(0.044715) * x ** 3))),
    "sigmoid": lambda x: x / (1.0 + np.exp(np.float32(-1.702) * x)),
}

REDUCTIONS: dict[str, Callable] = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max,
                                   "reduce_min": np.min, "reduce_prod": np.prod}


def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def pointwise_matrix(weight: np.ndarray, strides, dilations, groups) -> np.ndarray | None:
    """The (out, in) matrix of a convolution that is pointwise (a 1x1 kernel, stride and dilation 1, one group:
    the Linear of the Neural Engine layout); None for any other convolution."""
    weight = np.asarray(weight)
    pointwise = (weight.ndim == 4 and weight.shape[2:] == (1, 1) and int(np.asarray(groups).reshape(-1)[0]) == 1
                 and all(int(v) == 1 for v in np.atleast_1d(strides))
                 and all(int(v) == 1 for v in np.atleast_1d(dilations)))
    return weight[:, :, 0, 0] if pointwise else None


def pointwise_conv(x: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """A pointwise convolution of (..., C, H, W) values: at every (H, W) position alone, its C channels mixed by
    the (out, in) matrix; any leading axes (the batch, the evaluator's rows) kept."""
    rows = x.reshape((-1,) + x.shape[-3:-2] + (x.shape[-2] * x.shape[-1],))  # (rows, C, H*W)
    return np.matmul(matrix, rows).reshape(x.shape[:-3] + (matrix.shape[0],) + x.shape[-2:])


# ---------------------------------------------------------------- batched values


def aligner(batched: bool, rank: int, out_rank: int) -> Callable:
    """A batched value of rank `rank` given ones after its batch axis up to the result's rank, so that numpy's
    right-aligned broadcasting is the program's and the batch axis stays first."""
    if batched and rank < out_rank:
        ones = (1,) * (out_rank - rank)
        return lambda x: x.reshape((x.shape[0],) + ones + x.shape[1:])
    return lambda x: x


def take_along_axis(x: np.ndarray, indices: np.ndarray, axis: int, size: int, x_batched: bool,
                    indices_batched: bool) -> np.ndarray:
    """gather_along_axis: negative indices wrap once (size: the gathered axis's); an unbatched side broadcast to
    the other's batch."""
    indices = indices.astype(np.int64)
    indices = np.where(indices < 0, indices + size, indices)
    if indices_batched and not x_batched:
        x = np.broadcast_to(x, (indices.shape[0],) + x.shape)
    if x_batched and not indices_batched:
        indices = np.broadcast_to(indices, (x.shape[0],) + indices.shape)
    return np.take_along_axis(x, indices, axis=axis)
