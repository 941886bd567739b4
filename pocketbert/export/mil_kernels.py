"""numpy kernels for MIL ops whose coremltools value inference is missing (lstm, classify) or fails under
numpy 2 (reduce_*).

Each kernel takes the operation and returns its output value(s), following the op's definition in
coremltools.converters.mil.mil.ops.defs.
"""

from __future__ import annotations

import numpy as np

_ACTIVATIONS = {
    "sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)),
    "tanh": np.tanh,
    "relu": lambda v: np.maximum(v, 0.0),
}
_REDUCTIONS = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max, "reduce_min": np.min,
               "reduce_prod": np.prod}


def _value(op, name: str, default=None):
    var = getattr(op, name, None)
    return default if var is None or var.val is None else var.val


def _reduce(op):
    axes = _value(op, "axes")
    axis = None if axes is None else tuple(int(a) for a in np.atleast_1d(axes))
    return _REDUCTIONS[op.op_type](op.x.val, axis=axis, keepdims=bool(_value(op, "keep_dims", False)))


def _lstm_direction(x, h, c, w_ih, w_hh, bias, reverse: bool, activations):
    """One direction; x is (steps, batch, input). Gate rows are ordered input, forget, output, cell."""
    recurrent, cell, output = activations
    hidden = h.shape[1]
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    projected = x @ w_ih.T + bias  # the input half of every step at once
    outputs = np.empty((x.shape[0], x.shape[1], hidden), dtype=np.float32)
    for t in steps:
        gates = projected[t] + h @ w_hh.T
        i, f, o = (recurrent(gates[:, k * hidden:(k + 1) * hidden]) for k in range(3))
        z = cell(gates[:, 3 * hidden:])
        c = f * c + i * z
        h = o * output(c)
        outputs[t] = h
    return outputs, h, c


def _lstm(op):
    if _value(op, "clip") is not None or np.any(_value(op, "peephole", 0.0)):
        raise NotImplementedError("lstm with clip or peephole weights")
    x = op.x.val.astype(np.float32)
    hidden = op.weight_hh.val.shape[1]
    h0, c0 = op.initial_h.val.astype(np.float32), op.initial_c.val.astype(np.float32)
    activations = tuple(_ACTIVATIONS[_value(op, name, default)] for name, default in
                        (("recurrent_activation", "sigmoid"), ("cell_activation", "tanh"), ("activation", "tanh")))
    direction = _value(op, "direction", "forward")
    bias = _value(op, "bias", np.zeros(4 * hidden, np.float32)).astype(np.float32)
    runs = [_lstm_direction(x, h0[:, :hidden], c0[:, :hidden], op.weight_ih.val.astype(np.float32),
                            op.weight_hh.val.astype(np.float32), bias, direction == "reverse", activations)]
    if direction == "bidirectional":
        bias_back = _value(op, "bias_back", np.zeros(4 * hidden, np.float32)).astype(np.float32)
        runs.append(_lstm_direction(x, h0[:, hidden:], c0[:, hidden:], op.weight_ih_back.val.astype(np.float32),
                                    op.weight_hh_back.val.astype(np.float32), bias_back, True, activations))
    outputs = np.concatenate([r[0] for r in runs], axis=2)
    if not _value(op, "output_sequence", False):
        outputs = outputs[-1:]  # the last step (the first, for the backward half)
        if direction == "bidirectional":
            outputs = np.concatenate([runs[0][0][-1:], runs[1][0][:1]], axis=2)
    return outputs, np.concatenate([r[1] for r in runs], axis=1), np.concatenate([r[2] for r in runs], axis=1)


def _classify(op):
    """The label with the highest probability, and every label's probability."""
    probabilities = np.asarray(op.probabilities.val, dtype=np.float32).reshape(-1)
    classes = list(op.classes.val)
    return classes[int(np.argmax(probabilities))], {c: float(p) for c, p in zip(classes, probabilities)}


KERNELS = {"lstm": _lstm, "classify": _classify, **{name: _reduce for name in _REDUCTIONS}}
