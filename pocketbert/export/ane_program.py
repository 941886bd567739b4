"""The ANE-layout student (ane_layout.py) as a Core ML multifunction package: one fixed-length fp16 function per
length bucket (multifunction.py says why not enumerated shapes), its weights compressed as the plain programs' are
(coreml.COMPRESSIONS) and stored once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from pocketbert import __version__
from pocketbert.core.inference import import_coremltools
from pocketbert.core.quiet import quiet_tools
from pocketbert.export import ane_layout, coreml, multifunction

MINIMUM_IOS = multifunction.MULTIFUNCTION_IOS


def convert_at_length(module, task, length: int):
    """The ANE-layout module as a program of one function `main`, inputs exactly (1, length), fp16 throughout."""
    ct = import_coremltools()
    names = list(task.input_names)
    example = tuple(torch.ones(1, length, dtype=torch.int32) for _ in names)
    with quiet_tools(), torch.no_grad():
        traced = torch.jit.trace(module, example)
        return ct.convert(
            traced,
            inputs=[ct.TensorType(name=n, shape=(1, length), dtype=np.int32) for n in names],
            outputs=[ct.TensorType(name=n) for n in task.output_names],
            convert_to="mlprogram",
            minimum_deployment_target=getattr(ct.target, MINIMUM_IOS),
            compute_precision=ct.precision.FLOAT16,
        )


def save_ane_package(model, task, architecture, lengths: tuple[int, ...], path: Path, description: str,
                     max_length: int, compression: str | None = None) -> None:
    """The student in the ANE layout, one function main_len<n> per length, saved as one package at `path`."""
    module = ane_layout.ane_module(model, architecture)
    programs = {n: coreml.compress(convert_at_length(module, task, n), compression) for n in sorted(set(lengths))}
    metadata = {"labels": ",".join(task.label_names), "task": task.name, "max_length": str(max_length),
                "layout": "ane", "pocketbert_version": __version__}
    multifunction.save_multifunction(programs, path, metadata, f"{description}, Neural Engine layout")
