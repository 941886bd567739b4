"""Core AI export (iOS 27 / macOS 27, Core ML's successor) and its check off Apple platforms.

The student is exported with torch.export at a dynamic sequence length, converted by coreai-torch, and
specialized by Core AI's own shape configuration into one static entry point per enumerated length
(`main_len16`, `main_len32`, ...: shapes the Neural Engine runs; the weights are stored once). The app pads an
input to the smallest length that fits and calls that entry point.

Core AI's optimized runtime exists only on Apple platforms (the coreai-core wheel's local reference runtime runs
elsewhere, at about 3 s a sentence for the default student: too slow for a gate on a whole eval split). So the
saved .aimodel is read back (evaluators/coreai_ir.py) and evaluated operation by operation with numpy
(evaluators/coreai_eval.py): the program that ships, not the PyTorch model it came from.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

from pocketbert import __version__
from pocketbert.core.students.architectures import BERT_FAMILY
from pocketbert.core.students.models import attention_kernel
from pocketbert.core.process.quiet import quiet_tools
from pocketbert.core.errors import ExportError, require
from pocketbert.export.evaluators import coreai_eval, coreai_ir
from pocketbert.export.evaluators.forward import grouped_forward, kept_while_unchanged

MINIMUM_OS = "iOS27"  # Core AI ships with iOS 27, iPadOS 27 and macOS 27
ENTRY = "main"
RUNTIME_NAME = "Core AI evaluator (numpy)"  # what parity.json says ran the gate
ENTRY_PATTERN = re.compile(rf"^{ENTRY}_len(\d+)$")  # one entry point per enumerated length


def entry_name(length: int) -> str:
    return f"{ENTRY}_len{length}"


def import_coreai():
    """coreai-torch and coreai-core, with their import chatter (torchao's optional kernels, version notes)
    kept off the console."""
    with quiet_tools():
        coreai_torch = require("coreai_torch", "coreai")
        coreai = require("coreai", "coreai")
        require("coreai.runtime", "coreai")
    return coreai_torch, coreai


def convert_to_coreai(model, task, lengths: tuple[int, ...], architecture=BERT_FAMILY, fp16: bool = True,
                      compression: str | None = None):
    """An in-memory Core AI program with one entry point per length; the caller saves it and checks the saved copy.

    fp16: weights and arithmetic in half precision with fp32 inputs cast at the entry (the precision Core ML
    variants ship in). compression: one of COMPRESSIONS, applied to the program's weights before it is
    specialized per length (so each weight is compressed once and stored once)."""
    return specialize(convert_dynamic(model, task, lengths, architecture, fp16), task, lengths, compression)


def convert_dynamic(model, task, lengths: tuple[int, ...], architecture=BERT_FAMILY, fp16: bool = True):
    """The program at a dynamic sequence length up to max(lengths), before specialize: one conversion that every
    Core AI variant of an export starts from."""
    with torch.no_grad(), _fused_attention(model):
        wrapper = architecture.export_wrapper(model, task, additive_mask=True).eval()
        return convert_module(wrapper, task, lengths, f"the {architecture.name} student", fp16)


def convert_module(module, task, lengths: tuple[int, ...], what: str, fp16: bool = True):
    """A module of the export's calling form (the task's int32 inputs of shape (batch, sequence) in, the task's
    outputs as a tuple out: an architecture's export wrapper, the ANE layout) as a program at a dynamic sequence
    length up to max(lengths), before specialize. `what` names the module in the one-line error."""
    coreai_torch, _ = import_coreai()
    if not lengths:
        raise ExportError("a Core AI program needs at least one sequence length")
    names = list(task.input_names)
    longest = max(lengths)
    example = tuple(torch.ones(1, min(16, longest), dtype=torch.int32) for _ in names)
    sequence = torch.export.Dim("sequence", min=2, max=max(longest, 3))
    with quiet_tools(), torch.no_grad():
        if fp16:
            module = _Half(module).eval()
        try:
            exported = torch.export.export(module, example, dynamic_shapes=tuple({1: sequence} for _ in names))
        except Exception as exc:  # torch.export names the construct it cannot trace
            first = str(exc).strip().split("\n")[0][:200]
            raise ExportError(f"{what} cannot be exported at a dynamic sequence length for Core AI "
                              f"({type(exc).__name__}: {first}): set export.coreai_variants to []") from exc
        exported = exported.run_decompositions(coreai_torch.get_decomp_table())
        return coreai_torch.TorchConverter().add_exported_program(
            exported, input_names=names, output_names=list(task.output_names)).to_coreai()


# transformers' attention kernel that calls torch's scaled_dot_product_attention (with the additive mask): coreai-torch
# keeps that op whole (its get_decomp_table) and converts it to its attention composite, which a device runs as one
# fused kernel; eager attention would reach it as matmul -> softmax -> matmul.
FUSED_ATTENTION = "sdpa"


def _fused_attention(model):
    """The student traced with FUSED_ATTENTION where transformers offers it for its encoder (`_supports_sdpa`), and
    left as it came; otherwise (a remote-code encoder without it, the BiLSTM) traced as it is."""
    return attention_kernel(model, FUSED_ATTENTION) if getattr(model, "_supports_sdpa", False) \
        else contextlib.nullcontext()


def specialize(program, task, lengths: tuple[int, ...], compression: str | None = None):
    """A copy of a dynamic program (convert_dynamic), its weights compressed (COMPRESSIONS) and split into one
    static entry point per length; the program given is left as it was, for the next variant."""
    if compression is not None and compression not in COMPRESSIONS:
        raise ExportError(f"unknown Core AI compression '{compression}': choose from {', '.join(COMPRESSIONS)}")
    program = copy.deepcopy(program)
    if compression is not None:
        program = compress(program, compression)
    names = list(task.input_names)
    program.set_static_shape_config(
        ENTRY, {entry_name(n)[len(ENTRY) + 1:]: {name: (1, n) for name in names} for n in sorted(lengths)})
    return program


# Weight compressions through coreai-opt's program passes (coreai_opt.coreai_utils), the counterparts of the Core
# ML variants' (export/programs/coreml.py COMPRESSIONS): int8 symmetric per output channel; k-means palettes per tensor.
# Activations stay fp16. Each pass rewrites a weight constant into the operation that rebuilds it on the device
# (blockwise_shift_scale for int8, lut_to_dense for palettes), which the evaluator runs like any other.
# Palettes: coreai-opt's fast k-means mode rounds the fp16 weights with np.round(w, 4), which multiplies by 10^4 in
# fp16 and so turns every weight above 6.55 in magnitude into inf (the default student's first FFN output
# projection reaches 7.9: a palette entry of inf, NaN logits, caught by the gate); without it k-means runs on the
# weights' distinct fp16 values, at most 65,536, as fast.
COMPRESSIONS = {
    "int8": lambda opt, program: opt.quantize_weights(
        program, opt.DType.INT8, granularity=opt.CompressionGranularity.PER_CHANNEL, in_place=True),
    "6bit": lambda opt, program: _palettize(opt, program, 6),
    "4bit": lambda opt, program: _palettize(opt, program, 4),
}


def _palettize(opt, program, bits: int):
    environment_tools_on_path()
    return opt.palettize_weights(program, None, n_bits=bits, granularity=opt.CompressionGranularity.PER_TENSOR,
                                 num_kmeans_workers=1, enable_fast_kmeans_mode=False, in_place=True)


def environment_tools_on_path() -> None:
    """coreai-opt's k-means is a C++ extension torch builds at its first use with ninja, looked up on PATH: the
    environment's own ninja (installed with coreai-opt) is put there, as an activated environment has it, for a
    `.venv/bin/pocketbert` run from a shell that never activated it."""
    tools = Path(sys.executable).parent
    if shutil.which("ninja") is None and (tools / "ninja").is_file():
        os.environ["PATH"] = os.pathsep.join([str(tools), os.environ.get("PATH", "")])


def compress(program, compression: str):
    """The program with its weights compressed in place (COMPRESSIONS); coreai-opt warns about torch versions on
    import and per weight it leaves as it is (the small ones), kept off the console."""
    with quiet_tools():
        opt = require("coreai_opt.coreai_utils", "coreai")
        return COMPRESSIONS[compression](opt, program)


class _Half(torch.nn.Module):
    """The module in half precision; its logits come back as fp32, as the Core ML programs' do."""

    def __init__(self, wrapper):
        super().__init__()
        self.wrapper = copy.deepcopy(wrapper).half()  # the student itself stays fp32 for the other variants

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        extra = () if token_type_ids is None else (token_type_ids,)
        return tuple(o.float() for o in self.wrapper(input_ids, attention_mask, *extra))


def save(program, path: Path, description: str) -> None:
    """Write the .aimodel folder (save_asset refuses an existing one: the caller's staged folder is new)."""
    _, coreai = import_coreai()
    if path.exists():
        shutil.rmtree(path)
    metadata = coreai.runtime.AIModelAssetMetadata()
    metadata.author = "pocketbert"
    metadata.model_description = description
    metadata.set_custom("version", __version__)
    with quiet_tools():
        program.save_asset(Path(path), metadata)


# ---------------------------------------------------------------- reading back

class SavedProgram:
    """A saved .aimodel's entry points, each compiled for the numpy evaluator when first used."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.program = coreai_ir.load_program(self.path)
        self.lengths = tuple(sorted(int(m[1]) for g in self.program.entry_points
                                    if (m := ENTRY_PATTERN.match(g.name))))
        if not self.lengths:
            raise ExportError(f"{self.path.name} has no entry point {ENTRY}_len<n>: export the Core AI variant again")
        self._evaluators: dict[int, coreai_eval.CoreAIEvaluator] = {}

    def evaluator(self, length: int) -> coreai_eval.CoreAIEvaluator:
        if length not in self._evaluators:
            self._evaluators[length] = coreai_eval.CoreAIEvaluator(self.program, entry_name(length))
        return self._evaluators[length]

    def fitting(self, n: int) -> int:
        fitting = [length for length in self.lengths if length >= n]
        if not fitting:
            raise ExportError(f"an input of {n} tokens is longer than {self.path.name}'s longest length "
                              f"{max(self.lengths)}: truncate it to max_length")
        return min(fitting)


# The read-back program with its compiled entry points, kept while the same files are asked for again: the gate reads
# a program's lengths, opens it, then opens it once for each length (reading the default student's program back
# takes about 1.3 s, and each entry point is compiled again for a new reader).
saved_program = kept_while_unchanged(SavedProgram)


def program_lengths(path: Path) -> tuple[int, ...]:
    return saved_program(path).lengths


def coreai_forward(path: Path, task, pad_to: int | None = None):
    """A numpy-in, numpy-out forward over the saved program: each row padded to the smallest entry point that
    fits it (or to `pad_to`), rows of one entry point evaluated together."""
    saved = saved_program(path)
    if pad_to is not None and pad_to not in saved.lengths:
        raise ExportError(f"{Path(path).name} takes lengths {saved.lengths}, not {pad_to}")

    def logits(found: dict) -> np.ndarray:
        return task.stack_outputs([found[name][:, 0] for name in task.output_names])

    forward = grouped_forward(lambda inputs, length: saved.evaluator(length).predict(inputs),
                              lambda n: pad_to or saved.fitting(n), logits, task)
    forward.runtime = RUNTIME_NAME
    return forward
