"""Evaluates a saved ML Program with numpy, compiled once per input shape into a plan of batched kernels, for the
parity gate on platforms without Core ML.

Compiling: the program's main function is walked once for each input shape it is given (a flexible program: each
sequence length; a fixed or enumerated one: each of its lengths), on the first rows of that shape. Constants and
compressed weights are resolved once, when the program loads (fp16 widened exactly to float32). An op whose inputs
are all constants once the shape is known (shape arithmetic, position ids, token-type rows) is folded by coremltools'
own value inference; `shape` of a computed value is its known shape. Every other op becomes a step: the kernel of
mil_kernels.KERNELS compiled over the op's resolved attributes, or, where none covers it, coremltools' value
inference run row by row (mil_reference.infer) — an op that neither evaluates is refused in one line. Running a
plan is one pass of its steps over the rows' arrays: no types, shapes or attributes are looked at again.

Batching: rows of one shape are evaluated together, every value computed from the inputs carrying one more leading
axis; each row is computed as it would be alone. Precision: each result is rounded to the type the program gives
it (mil_kernels.storer), so an fp16 program computes in fp16 at every op boundary.
A plan runs with BLAS and torch on one thread (evaluators/threads.py says why).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from pocketbert.core.errors import ExportError
from pocketbert.export.evaluators import mil_kernels
from pocketbert.export.evaluators.mil_kernels import NotCovered, Operands, storer
from pocketbert.export.evaluators.mil_reference import SavedProgram, bound, infer, input_vars
from pocketbert.export.evaluators.numeric import computing_form
from pocketbert.export.evaluators.plan import Plan, PlanBuilder
from pocketbert.export.evaluators.threads import one_thread


def _declared(value, var):
    """A value as value inference reads it: of the variable's declared type (fp16 back from its computing form)."""
    from coremltools.converters.mil.mil import types

    if var.dtype == types.fp16 and not isinstance(value, (str, dict, list)):
        return np.asarray(value, dtype=np.float16)
    return value


def _is_program_constant(var) -> bool:
    """A const op's output: value inference reads its own value."""
    return var.op is not None and var.op.op_type == "const"


class MILEvaluator:
    """One function of a saved .mlpackage (`main`, or a multifunction package's named one), compiled per input
    shape; predict takes rows of one shape."""

    def __init__(self, mlpackage: Path, kernels: dict[str, Callable] | None = None, function: str = "main"):
        self.saved = SavedProgram(mlpackage, function)
        self.metadata = self.saved.metadata
        self.function = self.saved.function
        self.kernels = mil_kernels.KERNELS if kernels is None else kernels
        self.constants = {name: computing_form(value) for name, value in self.saved.constants.items()}
        for op in self.function.operations:
            if op.blocks:
                raise ExportError(f"op {op.name} of the Core ML program is a {op.op_type} with nested blocks, which "
                                  "pocketbert's MIL evaluator does not run: leave the Core ML variants out of "
                                  "export.coreml_variants, or report the op")
        self._plans: dict[tuple, Plan] = {}
        self.row_by_row: set[str] = set()  # op types a compiled plan evaluates by value inference, one row at a time

    @property
    def input_names(self) -> list[str]:
        return self.saved.input_names

    @property
    def output_names(self) -> list[str]:
        return self.saved.output_names

    def predict(self, inputs: dict[str, np.ndarray]) -> dict:
        """Outputs for rows of one shape: each input of shape (rows,) + the program's input shape; numeric outputs
        as float32 arrays (rows first), a classifier's label and probabilities as lists."""
        missing = [name for name in self.function.inputs if name not in inputs]
        if missing:
            raise ExportError(f"the Core ML model needs input '{missing[0]}'")
        arrays = {name: np.asarray(inputs[name]) for name in self.function.inputs}
        key = tuple((name, a.shape[1:]) for name, a in arrays.items())
        plan = self._plans.get(key)
        with one_thread():
            if plan is None:
                plan, env = self._compile(arrays)
                self._plans[key] = plan
                return plan.results(env, next(iter(arrays.values())).shape[0])
            return plan.run(arrays)

    # ------------------------------------------------------------ compiling

    def _compile(self, arrays: dict[str, np.ndarray]) -> tuple[Plan, list]:
        """The plan for these rows' shape, made by evaluating them op by op; also the values it computed."""
        constants = dict(self.constants)  # this shape's folded values join the program's own
        traced: dict[str, np.ndarray] = {}  # computed values of the rows being compiled, by variable name
        slots: dict[str, int] = {}
        env: list = []
        builder = PlanBuilder()
        operands = Operands(constants, traced)

        plan_inputs = {}
        for name, var in self.function.inputs.items():
            store = storer(var)
            slots[name], traced[name] = builder.slot(), store(arrays[name])
            env.append(traced[name])
            plan_inputs[name] = (slots[name], store)

        def reference(var) -> int:
            return slots[var.name] if var.name in slots else builder.constant(constants[var.name], var.name)

        for op in self.function.operations:
            if op.op_type == "const" or op.outputs[0].name in self.constants:
                continue
            if not any(operands.batched(v) for v in input_vars(op)):
                constants.update(zip((v.name for v in op.outputs), self._fold(op, constants)))
                continue
            if op.op_type == "shape":  # known once the input shape is
                constants[op.outputs[0].name] = np.array(operands.shape(op.x), dtype=np.int32)
                continue
            run, reads, stores = self._kernel(op, operands)
            step = builder.step(run, [reference(v) for v in reads], stores, len(op.outputs) > 1)
            env.extend([None] * len(op.outputs))
            step.execute(env, builder.table)
            for var, slot in zip(op.outputs, step.writes):
                slots[var.name] = slot
                traced[var.name] = env[slot]

        outputs = {v.name: (slots[v.name], None) if v.name in slots else (None, constants[v.name])
                   for v in self.function.outputs}
        return builder.plan(plan_inputs, outputs), env

    def _fold(self, op, constants: dict) -> list:
        """An op of constant inputs, evaluated once by value inference."""
        values = {v: _declared(constants[v.name], v) for v in input_vars(op) if not _is_program_constant(v)}
        with bound(values):
            results = infer(op)
        return [value if store is None else store(value)
                for value, store in zip(results, (storer(v) for v in op.outputs))]

    def _kernel(self, op, operands: Operands) -> tuple[Callable, list, list]:
        """(run, the variables it reads, a storer per result): the op's kernel, or value inference row by row."""
        stores = [storer(v) for v in op.outputs]
        kernel = self.kernels.get(op.op_type)
        if kernel is not None:
            try:
                run, reads = kernel(op, operands)
            except NotCovered:
                pass
            else:
                if op.op_type in mil_kernels.MOVES_VALUES:
                    source = reads[0].dtype
                    stores = [None if v.dtype == source else s for v, s in zip(op.outputs, stores)]
                return run, reads, stores
        self.row_by_row.add(op.op_type)
        return (*_row_by_row(op, operands), stores)


def _row_by_row(op, operands: Operands) -> tuple[Callable, list]:
    """The op evaluated on each row alone by value inference, its results stacked (lists for strings and
    dictionaries); and the variables it reads."""
    reads = [v for v in input_vars(op) if not _is_program_constant(v)]
    batched = [operands.batched(v) for v in reads]

    def run(*arrays):
        rows = next(a.shape[0] for a, b in zip(arrays, batched) if b)
        per_result = [[] for _ in op.outputs]
        for r in range(rows):
            with bound({v: _declared(a[r] if b else a, v) for v, a, b in zip(reads, arrays, batched)}):
                for collected, value in zip(per_result, infer(op)):
                    collected.append(value)
        stacked = tuple(c if isinstance(c[0], (str, dict)) else np.stack([np.asarray(v) for v in c])
                        for c in per_result)
        return stacked if len(op.outputs) > 1 else stacked[0]
    return run, reads

