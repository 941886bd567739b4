"""The ANE-layout student (ane_layout.py) as a Core ML multifunction package: one fixed-length fp16 function per
length bucket (multifunction.py says why not enumerated shapes), its weights compressed as the plain programs' are
(coreml.COMPRESSIONS) and stored once; and as a Core AI program, converted as the plain student is (coreai.py) and
specialized into the same entry points per length."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from pocketbert import __version__
from pocketbert.core.students.inference import import_coremltools
from pocketbert.core.process.quiet import quiet_tools
from pocketbert.export.programs import ane_layout, coreai, coreml, multifunction

MINIMUM_IOS = multifunction.MULTIFUNCTION_IOS
# From iOS 17 on, coremltools guards every gather against negative indices (greater_equal, add, select on the ids):
# integer work on the Neural Engine before the embedding lookup, which the placement check rightly counts as a
# round trip off it and back. Token ids are never negative, so the guard is left out.
SKIPPED_PASSES = ("common::guard_negative_gather_indices",)


def convert_at_length(module, task, length: int):
    """The ANE-layout module as a program of one function `main`, inputs exactly (1, length), fp16 throughout."""
    ct = import_coremltools()
    names = list(task.input_names)
    example = tuple(torch.ones(1, length, dtype=torch.int32) for _ in names)
    passes = ct.PassPipeline.DEFAULT
    passes.remove_passes(SKIPPED_PASSES)
    with quiet_tools(), torch.no_grad():
        traced = torch.jit.trace(module, example)
        return ct.convert(
            traced,
            inputs=[ct.TensorType(name=n, shape=(1, length), dtype=np.int32) for n in names],
            outputs=[ct.TensorType(name=n) for n in task.output_names],
            convert_to="mlprogram",
            minimum_deployment_target=getattr(ct.target, MINIMUM_IOS),
            compute_precision=ct.precision.FLOAT16,
            pass_pipeline=passes,
        )


def convert_lengths(model, task, architecture, lengths: tuple[int, ...]) -> dict:
    """The student in the ANE layout as one fp16 program per length: length -> MLModel."""
    module = ane_layout.ane_module(model, architecture)
    return {n: convert_at_length(module, task, n) for n in sorted(set(lengths))}


def save_ane_package(programs: dict, task, path: Path, description: str, max_length: int,
                     compression: str | None = None) -> None:
    """The per-length programs (convert_lengths), their weights compressed (coreml.COMPRESSIONS), saved as one
    package at `path` of functions main_len<n>."""
    programs = {n: coreml.compress(program, compression) for n, program in programs.items()}
    metadata = {"labels": ",".join(task.label_names), "task": task.name, "max_length": str(max_length),
                "layout": "ane", "pocketbert_version": __version__}
    multifunction.save_multifunction(programs, path, metadata, f"{description}, Neural Engine layout")


def convert_coreai(model, task, architecture, lengths: tuple[int, ...]):
    """The student in the ANE layout as an fp16 Core AI program at a dynamic length up to max(lengths), before
    coreai.specialize (which gives it the plain Core AI program's entry points, main_len<n>)."""
    return coreai.convert_module(ane_layout.ane_module(model, architecture), task, lengths,
                                 "the ANE-layout student")
