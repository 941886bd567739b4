"""Runners: one way of executing a model (runtime, file format, threads or compute units).

Each runner says whether it can run on this machine; one that cannot says why, and the report shows it.
`load()` returns a callable running one inference on prepared inputs; loading and the first inference are
timed apart from the steady state (cold start).
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

COREML_COMPUTE_UNITS = ("CPU_ONLY", "CPU_AND_GPU", "CPU_AND_NE", "ALL")
# Core AI specializes a program for one preferred compute unit kind (coreai.runtime.ComputeUnitKind).
COREAI_COMPUTE_UNITS = ("cpu", "gpu", "neural_engine")
COREAI_MACOS = 27  # Core AI ships with macOS 27 / iOS 27
SETTING_FIELDS = ("runtime", "model_format", "precision", "threads", "compute_units")  # what a results row records


def runtime_text(row: dict) -> str:
    """'onnxruntime ort', or just 'pytorch' where the format is the runtime's own."""
    return row["runtime"] if row["model_format"] == row["runtime"] else f"{row['runtime']} {row['model_format']}"


def setting_text(row: dict) -> str:
    """'2 threads', or the Core ML compute units."""
    if row.get("threads"):
        return f"{row['threads']} thread{'s' if row['threads'] > 1 else ''}"
    return row.get("compute_units") or "–"


@dataclass
class Runner:
    runtime: str  # onnxruntime | pytorch | coreml | executorch | coreai
    model_format: str  # onnx | ort | pytorch | mlpackage | pte | aimodel
    path: Path
    precision: str
    threads: int | None = None
    compute_units: str | None = None
    max_sequence: int | None = None  # the .mlpackage's upper bound on sequence length (batch is fixed at 1)
    lengths: tuple[int, ...] = ()    # a Core AI program's entry points (main_len<n>): the lengths it takes

    def unavailable_reason(self, batch: int = 1, sequence_length: int | None = None) -> str | None:
        if self.runtime == "coreml" and platform.system() != "Darwin":
            return f"Core ML predictions need macOS; this host runs {platform.system()}"
        if self.runtime == "coreai":
            reason = _coreai_host_reason()
            if reason:
                return reason
        return self.shape_reason(batch, sequence_length) or (
            None if Path(self.path).exists() else f"{self.path} does not exist")

    def shape_reason(self, batch: int = 1, sequence_length: int | None = None) -> str | None:
        """Why the model cannot take this input shape, on any host (None: it can)."""
        if self.runtime == "coreml" and (batch != 1 or (self.max_sequence and sequence_length
                                                         and sequence_length > self.max_sequence)):
            return f"the .mlpackage takes batch 1 and at most {self.max_sequence} tokens (export.max_length)"
        if self.runtime == "coreai" and (batch != 1 or (sequence_length and sequence_length not in self.lengths)):
            return (f"the .aimodel takes batch 1 at its enumerated lengths {', '.join(map(str, self.lengths))} "
                    "(one function each)")
        return None

    def setting(self) -> dict:
        return {field: getattr(self, field) for field in SETTING_FIELDS}

    def label(self) -> str:
        setting = self.setting()
        return f"{runtime_text(setting)} {self.precision}, {setting_text(setting)}"

    def load(self, task) -> Callable[[dict], object]:
        if self.runtime == "onnxruntime":
            return _load_ort(self.path, self.threads or 1)
        if self.runtime == "pytorch":
            return _load_torch(self.path, task, self.threads or 1)
        if self.runtime == "coreml":
            return _load_coreml(self.path, self.compute_units or "ALL")
        if self.runtime == "executorch":
            return _load_executorch(self.path, task, self.threads or 1)
        if self.runtime == "coreai":
            return _load_coreai(self.path, self.compute_units or "neural_engine")
        raise ValueError(f"unknown runtime {self.runtime}")


def _load_ort(path: Path, threads: int):
    from pocketbert.core.students.inference import ort_session

    session = ort_session(path, threads=threads)
    names = {i.name for i in session.get_inputs()}

    def run(inputs: dict):
        return session.run(None, {k: v for k, v in inputs.items() if k in names})

    return run


def _load_torch(path: Path, task, threads: int):
    import torch

    from pocketbert.core.students.stage_folder import load_model_folder

    torch.set_num_threads(threads)
    model = load_model_folder(Path(path), task).eval()

    def run(inputs: dict):
        with torch.inference_mode():
            return model(**{k: torch.from_numpy(v) for k, v in inputs.items()})

    return run


def _load_coreml(path: Path, compute_units: str):
    from pocketbert.core.students.inference import import_coremltools

    ct = import_coremltools()
    model = ct.models.MLModel(str(path), compute_units=getattr(ct.ComputeUnit, compute_units))

    def run(inputs: dict):
        return model.predict({k: v.astype(np.int32) for k, v in inputs.items()})

    return run


def _load_executorch(path: Path, task, threads: int):
    import torch

    from pocketbert.core.students.inference import executorch_method

    method = executorch_method(path, threads)
    names = list(task.input_names)

    def run(inputs: dict):
        return method.execute([torch.from_numpy(inputs[name]) for name in names])

    return run


def _coreai_host_reason() -> str | None:
    """Why Core AI's runtime cannot time a program here (None: it can). The coreai-core wheel carries a reference
    runtime off Apple platforms, seconds a sentence: not the runtime an app gets, so it is never timed."""
    if platform.system() != "Darwin":
        return f"Core AI runs on macOS {COREAI_MACOS} and iOS {COREAI_MACOS}; this host runs {platform.system()}"
    release = platform.mac_ver()[0]
    if not release or int(release.split(".")[0]) < COREAI_MACOS:
        return f"Core AI needs macOS {COREAI_MACOS}; this Mac runs macOS {release or 'of unknown version'}"
    import importlib.util
    import os

    if importlib.util.find_spec("coreai") is None:
        return "Core AI's Python runtime (coreai-core) is not installed: pip install 'pocketbert[coreai]'"
    if os.environ.get("USE_OS_COREAI") != "1":
        return "set USE_OS_COREAI=1 so that coreai-core runs the system's Core AI (its own runtime is a reference)"
    return None


_COREAI_LOOP = []  # one event loop for every Core AI load: cold_start loads again on each repeat


def _coreai_loop():
    import asyncio

    if not _COREAI_LOOP:
        _COREAI_LOOP.append(asyncio.new_event_loop())
    return _COREAI_LOOP[0]


def _load_coreai(path: Path, compute_units: str):
    """The program specialized for one preferred compute unit kind; each call runs the function of the input's
    length (main_len<n>) through coreai.runtime's async API, on the bench's one event loop for Core AI."""
    from coreai.runtime import AIModel, ComputeUnitKind, NDArray, SpecializationOptions

    loop = _coreai_loop()
    options = SpecializationOptions.from_preferred_compute_unit_kind(getattr(ComputeUnitKind, compute_units)())
    model = loop.run_until_complete(AIModel.load(Path(path), options))
    functions: dict = {}

    def run(inputs: dict):
        length = next(iter(inputs.values())).shape[1]
        if length not in functions:
            functions[length] = model.load_function(f"main_len{length}")
        feeds = {k: NDArray(np.ascontiguousarray(v, dtype=np.int32)) for k, v in inputs.items()}
        return loop.run_until_complete(functions[length](feeds))

    return run


def cold_start(runner: Runner, task, inputs: dict) -> dict:
    """Load plus first inference, timed apart, in a fresh runtime object."""
    t0 = time.perf_counter()
    run = runner.load(task)
    t1 = time.perf_counter()
    run(inputs)
    t2 = time.perf_counter()
    return {"load_ms": (t1 - t0) * 1000.0, "first_inference_ms": (t2 - t1) * 1000.0, "total_ms": (t2 - t0) * 1000.0}
