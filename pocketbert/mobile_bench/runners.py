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
    runtime: str  # onnxruntime | pytorch | coreml | executorch
    model_format: str  # onnx | ort | pytorch | mlpackage | pte
    path: Path
    precision: str
    threads: int | None = None
    compute_units: str | None = None
    max_sequence: int | None = None  # the .mlpackage's upper bound on sequence length (batch is fixed at 1)

    def unavailable_reason(self, batch: int = 1, sequence_length: int | None = None) -> str | None:
        if self.runtime == "coreml" and platform.system() != "Darwin":
            return f"Core ML predictions need macOS; this host runs {platform.system()}"
        return self.shape_reason(batch, sequence_length) or (
            None if Path(self.path).exists() else f"{self.path} does not exist")

    def shape_reason(self, batch: int = 1, sequence_length: int | None = None) -> str | None:
        """Why the model cannot take this input shape, on any host (None: it can)."""
        if self.runtime == "coreml" and (batch != 1 or (self.max_sequence and sequence_length
                                                         and sequence_length > self.max_sequence)):
            return f"the .mlpackage takes batch 1 and at most {self.max_sequence} tokens (export.max_length)"
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
        raise ValueError(f"unknown runtime {self.runtime}")


def _load_ort(path: Path, threads: int):
    from pocketbert.core.inference import ort_session

    session = ort_session(path, threads=threads)
    names = {i.name for i in session.get_inputs()}

    def run(inputs: dict):
        return session.run(None, {k: v for k, v in inputs.items() if k in names})

    return run


def _load_torch(path: Path, task, threads: int):
    import torch

    from pocketbert.core.stage_folder import load_model_folder

    torch.set_num_threads(threads)
    model = load_model_folder(Path(path), task).eval()

    def run(inputs: dict):
        with torch.inference_mode():
            return model(**{k: torch.from_numpy(v) for k, v in inputs.items()})

    return run


def _load_coreml(path: Path, compute_units: str):
    from pocketbert.core.inference import import_coremltools

    ct = import_coremltools()
    model = ct.models.MLModel(str(path), compute_units=getattr(ct.ComputeUnit, compute_units))

    def run(inputs: dict):
        return model.predict({k: v.astype(np.int32) for k, v in inputs.items()})

    return run


def _load_executorch(path: Path, task, threads: int):
    import torch

    from pocketbert.core.inference import executorch_method

    method = executorch_method(path, threads)
    names = list(task.input_names)

    def run(inputs: dict):
        return method.execute([torch.from_numpy(inputs[name]) for name in names])

    return run


def cold_start(runner: Runner, task, inputs: dict) -> dict:
    """Load plus first inference, timed apart, in a fresh runtime object."""
    t0 = time.perf_counter()
    run = runner.load(task)
    t1 = time.perf_counter()
    run(inputs)
    t2 = time.perf_counter()
    return {"load_ms": (t1 - t0) * 1000.0, "first_inference_ms": (t2 - t1) * 1000.0, "total_ms": (t2 - t0) * 1000.0}
