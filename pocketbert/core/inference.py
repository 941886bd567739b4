"""Batched logits of a model on any runtime: PyTorch for training and the parity reference, ONNX Runtime for the
exported graphs. Every forward here is numpy in, numpy out, so one scoring path serves them all."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from pocketbert.errors import require


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


def ort_session(path: Path, threads: int = 0):
    """A CPU InferenceSession; threads=0 lets ONNX Runtime choose."""
    ort = require("onnxruntime", "export")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def ort_forward(session, task):
    """A numpy-in, numpy-out forward over an ONNX Runtime session."""
    names = [i.name for i in session.get_inputs()]

    def forward(batch):
        return task.stack_outputs(session.run(None, {n: batch[n].astype("int64") for n in names}))

    return forward
