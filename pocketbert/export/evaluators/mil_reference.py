"""A saved ML Program evaluated op by op with coremltools' own numpy value inference: the reference the compiled
evaluator (mil_eval.py) is tested against, and its fallback for an op it has no kernel for.

Value inference reads each input's value and symbolic type from the program's variables, so a value is bound by
setting both on the variable and restored afterwards (`bound`). Where coremltools has no value inference (lstm,
classify) or its inference fails under numpy 2 (reduce_*), a kernel of REFERENCE_KERNELS stands in, following the
op's definition in coremltools.converters.mil.mil.ops.defs.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import numpy as np

from pocketbert.core.students.inference import import_coremltools
from pocketbert.core.process.quiet import quiet_tools
from pocketbert.core.errors import ExportError
from pocketbert.export.evaluators.numeric import ACTIVATIONS, REDUCTIONS


class SavedProgram:
    """One function of a saved .mlpackage (`main`, or a multifunction package's named one), its metadata, and its
    constant values (compressed weights decompressed once, as coremltools' constexpr ops define them)."""

    def __init__(self, mlpackage: Path, function: str = "main"):
        ct = import_coremltools()
        from coremltools.converters.mil.frontend.milproto.load import load as load_mil

        with quiet_tools():
            mlmodel = ct.models.MLModel(str(mlpackage), skip_model_load=True)
            spec = mlmodel.get_spec()
            self.metadata = dict(mlmodel.user_defined_metadata)
            program = load_mil(spec, spec.specificationVersion, file_weights_dir=mlmodel.weights_dir)
        if function not in program.functions:
            raise ExportError(f"{Path(mlpackage).name} has no function {function} (it has "
                              f"{', '.join(program.functions)}): export it again")
        self.function = program.functions[function]
        self.constants = {}
        for op in self.function.operations:
            if op.op_type == "const":
                self.constants[op.outputs[0].name] = op.outputs[0].val
            elif op.op_type.startswith("constexpr_"):
                self.constants[op.outputs[0].name] = op.materialized_val_inference()

    @property
    def input_names(self) -> list[str]:
        return list(self.function.inputs)

    @property
    def output_names(self) -> list[str]:
        """In the order the program returns them."""
        return [v.name for v in self.function.outputs]


class _Value:
    """Stands in for a MIL symbolic value: Var.val reads `.val` from it."""

    __slots__ = ("val",)

    def __init__(self, val):
        self.val = val


def _concrete_type(value):
    from coremltools.converters.mil.mil import types

    arr = np.asarray(value)
    dtype = types.numpy_type_to_builtin_type(arr.dtype)
    return dtype if arr.ndim == 0 else types.tensor(dtype, arr.shape)


@contextmanager
def bound(values: dict):
    """Variables (keys) given these values for the time of the block, with the concrete types value inference
    reads from them; their symbolic values and types restored afterwards."""
    saved = [(var, var._sym_val, var._sym_type) for var in values]
    try:
        for var, value in values.items():
            var._sym_val = _Value(value)
            if not isinstance(value, (str, dict)):  # a classifier's label and probabilities keep their types
                var._sym_type = _concrete_type(value)
        yield
    finally:
        for var, sym_val, sym_type in saved:
            var._sym_val = sym_val
            var._sym_type = sym_type


def infer(op) -> tuple:
    """The op's outputs from the values bound to its inputs: its kernel in REFERENCE_KERNELS, else coremltools'
    value inference. Refuses, in one line, an op that neither evaluates."""
    kernel = REFERENCE_KERNELS.get(op.op_type)
    try:
        result = kernel(op) if kernel else op.value_inference()
    except NotImplementedError:
        result = None
    if result is None:
        raise ExportError(f"op {op.name} of the Core ML program is a {op.op_type}, which neither pocketbert's MIL "
                          "evaluator nor coremltools' value inference can evaluate: leave the Core ML variants out "
                          "of export.coreml_variants, or report the op")
    return result if len(op.outputs) > 1 else (result,)


def input_vars(op) -> list:
    """Every variable an op reads (an input may be a tuple of them, as concat's values are)."""
    found = []
    for value in op.inputs.values():
        found.extend(value if isinstance(value, (list, tuple)) else [value])
    return found


class ValueInferenceInterpreter:
    """The program's main function evaluated one sequence at a time, op by op, with value inference: slow (each
    op re-reads types and shapes), kept as the reference."""

    def __init__(self, mlpackage: Path):
        self.saved = SavedProgram(mlpackage)
        self.metadata = self.saved.metadata
        self.function = self.saved.function

    def predict(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from coremltools.converters.mil.mil import types

        values = {}
        for name, var in self.function.inputs.items():
            if name not in inputs:
                raise ExportError(f"the Core ML model needs input '{name}'")
            values[var] = np.asarray(inputs[name]).astype(types.nptype_from_builtin(var.dtype))
        for op in self.function.operations:
            if op.op_type == "const":
                continue
            if op.outputs[0].name in self.saved.constants:
                values[op.outputs[0]] = self.saved.constants[op.outputs[0].name]
                continue
            with bound({var: values[var] for var in input_vars(op) if var in values}):
                results = infer(op)
            values.update(zip(op.outputs, results))
        return {v.name: values[v] if isinstance(values[v], (str, dict)) else np.asarray(values[v], dtype=np.float32)
                for v in self.function.outputs}


# ---------------------------------------------------------------- kernels value inference lacks

def _value(op, name: str, default=None):
    var = getattr(op, name, None)
    return default if var is None or var.val is None else var.val


def _reduce(op):
    axes = _value(op, "axes")
    axis = None if axes is None else tuple(int(a) for a in np.atleast_1d(axes))
    return REDUCTIONS[op.op_type](op.x.val, axis=axis, keepdims=bool(_value(op, "keep_dims", False)))


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
    activations = tuple(ACTIVATIONS[_value(op, name, default)] for name, default in
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


REFERENCE_KERNELS = {"lstm": _lstm, "classify": _classify, **{name: _reduce for name in REDUCTIONS}}
