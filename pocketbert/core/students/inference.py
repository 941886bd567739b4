"""Batched logits of a model on any runtime: PyTorch for training and the parity reference, ONNX Runtime for the
exported graphs. Every forward here is numpy in, numpy out, so one scoring path serves them all.

The runtimes' loaders live here too (an ONNX Runtime session, coremltools, an ExecuTorch program's method): the
export's parity gate and bench's timing load a file the same way, and bench reads no export internals."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from pocketbert.core.errors import require
from pocketbert.core.process.launch_env import session_threads
from pocketbert.core.process.quiet import quiet_tools


def batched_logits(task, features: list, pad_id: int, batch_size: int,
                   forward: Callable[[dict[str, np.ndarray]], np.ndarray], progress: str | None = None) -> list[np.ndarray]:
    """Per-feature logits from `forward` (a model on any runtime), batching by similar length."""
    from tqdm.auto import tqdm

    order = sorted(range(len(features)), key=lambda i: len(features[i].input_ids))
    out: list[np.ndarray | None] = [None] * len(features)
    starts = range(0, len(order), batch_size)
    for start in tqdm(starts, desc=progress, disable=progress is None, unit="batch", leave=False):
        idx = order[start:start + batch_size]
        batch = task.collate([features[i] for i in idx], pad_id)
        for i, row in zip(idx, task.unbatch(np.asarray(forward(batch)), batch)):
            out[i] = row
    return out


def torch_forward(model, task, device="cpu"):
    """A numpy-in, numpy-out forward of a PyTorch model, for `batched_logits`."""
    import torch

    names = task.input_names

    @torch.no_grad()
    def forward(batch: dict[str, np.ndarray]) -> np.ndarray:
        inputs = {k: torch.from_numpy(batch[k]).to(device) for k in names if k in batch}
        return task.logits(model(**inputs)).float().cpu().numpy()

    return forward


def ort_options(threads: int = 0):
    """The SessionOptions every pocketbert session starts from: `session_threads(threads)` intra-op threads, one
    inter-op thread, the runtime's warnings silent."""
    ort = require("onnxruntime", "export")
    options = ort.SessionOptions()
    options.intra_op_num_threads = session_threads(threads)
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return options


def ort_session(path: Path, threads: int = 0):
    """A CPU InferenceSession of `path` at `ort_options(threads)`."""
    ort = require("onnxruntime", "export")
    return ort.InferenceSession(str(path), ort_options(threads), providers=["CPUExecutionProvider"])


def ort_forward(session, task):
    """A numpy-in, numpy-out forward over an ONNX Runtime session."""
    names = [i.name for i in session.get_inputs()]

    def forward(batch):
        return task.stack_outputs(session.run(None, {n: batch[n].astype("int64") for n in names}))

    return forward


def import_coremltools():
    """coremltools, without the version warnings and progress bars it prints on import."""
    with quiet_tools():
        return require("coremltools", "export")


def executorch_method(path: Path, threads: int | None = None):
    """The program's forward method, loaded by ExecuTorch's runtime; threads: the size of its thread pool (one
    pool for the process), None to leave it as it is. The runtime prints the host's CPU probing: silenced."""
    with quiet_tools(stdout=True):
        require("executorch", "export")
        from executorch.extension.pybindings import portable_lib
        from executorch.runtime import Runtime

        if threads is not None:
            portable_lib._unsafe_reset_threadpool(int(threads))
        return Runtime.get().load_program(str(path)).load_method("forward")
