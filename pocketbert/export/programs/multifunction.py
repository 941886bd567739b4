"""Core ML multifunction packages: one static-shape function per sequence length, the weights stored once.

Why not ct.EnumeratedShapes: apple/coremltools#2730 (open, 2026-06) reports programs with enumerated or flexible
shapes that convert and save without error and then fail at prediction from every Apple API with an E5RT "unknown
strides" error. A multifunction package (coremltools >= 8: ct.utils.MultiFunctionDescriptor, save_multifunction)
holds one fixed-shape function per length instead; save_multifunction stores a weight the functions share once.
An app picks the function for its padded input with MLModelConfiguration.functionName (iOS 18 / macOS 15).

Off macOS each function is evaluated by the MIL evaluator (mil_eval.py) on its own program function.
"""

from __future__ import annotations

import platform
import shutil
import tempfile
from pathlib import Path

import numpy as np

from pocketbert.core.students.inference import import_coremltools
from pocketbert.core.process.quiet import quiet_tools
from pocketbert.core.errors import ExportError

MULTIFUNCTION_IOS = "iOS18"  # multifunction programs (and MLModelConfiguration.functionName) need iOS 18
FUNCTION_LENGTHS_KEY = "function_lengths"  # metadata: "16,32,64,128", one function main_len<n> per length
FUNCTION_PREFIX = "main_len"


def function_name(length: int) -> str:
    """The same names as the Core AI program's entry points, so both Swift loaders look alike."""
    return f"{FUNCTION_PREFIX}{length}"


def function_length(name: str) -> int | None:
    """The length a function named by function_name takes (None: not such a name)."""
    digits = name.removeprefix(FUNCTION_PREFIX)
    return int(digits) if digits != name and digits.isdigit() else None


def function_lengths(metadata: dict) -> tuple[int, ...]:
    value = metadata.get(FUNCTION_LENGTHS_KEY)
    return tuple(int(v) for v in value.split(",")) if value else ()


def save_multifunction(programs: dict[int, object], path: Path, metadata: dict[str, str],
                       short_description: str = "") -> None:
    """Save one fixed-length program per length (programs: length -> MLModel, each with the single function
    `main`) as one package of functions main_len<n>, the longest the default; the package keeps `metadata` and
    the lengths (save_multifunction itself writes no metadata)."""
    ct = import_coremltools()
    lengths = sorted(programs)
    with tempfile.TemporaryDirectory(prefix="pocketbert-multifunction-") as tmp:
        descriptor = ct.utils.MultiFunctionDescriptor()
        for n in lengths:
            single = Path(tmp) / f"len{n}.mlpackage"
            programs[n].save(str(single))
            descriptor.add_function(str(single), src_function_name="main", target_function_name=function_name(n))
        descriptor.default_function_name = function_name(lengths[-1])
        joined = Path(tmp) / "joined.mlpackage"
        with quiet_tools():
            ct.utils.save_multifunction(descriptor, str(joined))
            model = ct.models.MLModel(str(joined), skip_model_load=True)
        model.user_defined_metadata.update({**metadata, FUNCTION_LENGTHS_KEY: ",".join(map(str, lengths))})
        model.short_description = short_description
        if Path(path).exists():
            shutil.rmtree(path)
        with quiet_tools():
            model.save(str(path))


class MultiFunctionProgram:
    """A saved multifunction package run like a single program: predict takes rows of one width and runs the
    function of that length (the MIL evaluator off macOS, Core ML on macOS)."""

    def __init__(self, mlpackage: Path, metadata: dict):
        self.path = Path(mlpackage)
        self.metadata = metadata
        self.lengths = function_lengths(metadata)
        self._functions: dict[int, object] = {}

    def function(self, length: int):
        if length not in self.lengths:
            raise ExportError(f"{self.path.name} has functions for lengths {self.lengths}, not {length}")
        if length not in self._functions:
            self._functions[length] = _open_function(self.path, function_name(length))
        return self._functions[length]

    def predict(self, inputs: dict[str, np.ndarray]) -> dict:
        width = next(iter(inputs.values())).shape[-1]
        return self.function(int(width)).predict(inputs)


def _open_function(path: Path, name: str):
    if platform.system() == "Darwin":
        from pocketbert.export.evaluators.forward import one_row_at_a_time

        ct = import_coremltools()
        with quiet_tools():
            model = ct.models.MLModel(str(path), function_name=name)
        return _CoreMLFunction(one_row_at_a_time(model.predict))
    from pocketbert.export.evaluators.mil_eval import MILEvaluator

    return MILEvaluator(path, function=name)


class _CoreMLFunction:
    """One function of the package on Core ML (macOS), one row at a time."""

    def __init__(self, predict):
        self.predict = predict
