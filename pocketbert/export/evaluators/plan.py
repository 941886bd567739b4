"""The plan both evaluators compile a program into, and its runtime: a list of steps over numbered slots.

A step is one operation compiled for the known shapes: a function of its operands' arrays, the slots it reads
(computed values, >= 0) or constants (-1 - index in the plan's table), the slots it writes, and per result how the
program's type holds it (a storer, None: as it is). Running a plan is one pass of its steps: no types, shapes or
attributes are looked at again, and each step drops the values no later step reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np


@dataclass
class Step:
    run: Callable
    reads: list[int]
    writes: list[int]
    stores: list        # per result: how the program's type holds it (None: as it is)
    several: bool       # the run returns a tuple, one item per result
    frees: list[int] = field(default_factory=list)  # slots no later step reads

    def execute(self, env: list, table: list) -> None:
        result = self.run(*[env[i] if i >= 0 else table[-1 - i] for i in self.reads])
        for slot, store, value in zip(self.writes, self.stores, result if self.several else (result,)):
            env[slot] = value if store is None else store(value)
        for slot in self.frees:
            env[slot] = None


@dataclass
class Plan:
    inputs: dict[str, tuple[int, Callable]]         # name -> (slot, storer)
    steps: list[Step]
    table: list                                     # constants the steps read
    outputs: dict[str, tuple[int | None, object]]   # name -> (slot, None) or (None, constant value)
    slots: int

    def run(self, arrays: dict[str, np.ndarray]) -> dict:
        """The outputs for rows of one shape (inputs by name, rows first): numeric ones as float32 arrays, rows
        first (a constant output repeated per row); strings and dictionaries (a classifier's) as lists."""
        env: list = [None] * self.slots
        for name, (slot, store) in self.inputs.items():
            env[slot] = store(arrays[name])
        for step in self.steps:
            step.execute(env, self.table)
        return self.results(env, next(iter(arrays.values())).shape[0])

    def results(self, env: list, rows: int) -> dict:
        found = {}
        for name, (slot, constant) in self.outputs.items():
            value = env[slot] if slot is not None else np.broadcast_to(constant, (rows,) + np.shape(constant))
            found[name] = value if isinstance(value, list) else np.asarray(value, dtype=np.float32)
        return found


class PlanBuilder:
    """Slots, constants and steps, added as a program is walked; `plan` closes it."""

    def __init__(self):
        self.steps: list[Step] = []
        self.table: list = []
        self.slots = 0
        self._table_index: dict[str, int] = {}

    def slot(self) -> int:
        self.slots += 1
        return self.slots - 1

    def constant(self, value, key: str | None = None) -> int:
        """The reference a step reads a constant by (the same key: the same table entry)."""
        if key is None or key not in self._table_index:
            self.table.append(value)
            if key is not None:
                self._table_index[key] = len(self.table) - 1
            index = len(self.table) - 1
        else:
            index = self._table_index[key]
        return -1 - index

    def step(self, run: Callable, reads: list[int], stores: list, several: bool) -> Step:
        """A step writing one new slot per result."""
        step = Step(run, reads, [self.slot() for _ in stores], stores, several)
        self.steps.append(step)
        return step

    def plan(self, inputs: dict[str, tuple[int, Callable]], outputs: dict[str, tuple[int | None, object]]) -> Plan:
        _free_after_last_read(self.steps, {slot for slot, _ in outputs.values() if slot is not None})
        return Plan(inputs, self.steps, self.table, outputs, self.slots)


def _free_after_last_read(steps: list[Step], kept: set[int]) -> None:
    """Each step drops the computed values no later step reads (the outputs are kept)."""
    seen = set(kept)
    for step in reversed(steps):
        read = {slot for slot in step.reads if slot >= 0}
        step.frees = sorted(read - seen)
        seen |= read
