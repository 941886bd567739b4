"""ExecuTorch programs (.pte) with the XNNPACK delegate, PyTorch's own on-device runtime, and their check here.

The student is captured with torch.export at a dynamic sequence length (up to max_length, batch 1) and lowered
with the XNNPACK partitioner; int8 is ExecuTorch's XNNPACK quantizer applied to the Linear layers (dynamic
activations, per-channel weights). The attention mask is built as a 4-D additive mask in the export wrapper:
transformers' own masking utilities index with tensors the quantizer's observers break. ExecuTorch's Python
runtime (the wheel links the XNNPACK CPU backend) runs the saved program for the parity gate.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from pocketbert.core.errors import ExportError, require
from pocketbert.core.students.inference import executorch_method
from pocketbert.core.process.quiet import quiet_tools

COREML_DELEGATE_IOS = "iOS17"  # ExecuTorch's Core ML backend runs from iOS 17
COREML_DELEGATE_PACKAGE = "model.mlpackage"  # what the backend's payload unpacks to
MIN_SEQUENCE = 2  # [CLS] [SEP]: torch.export specializes lengths 0 and 1, so the dynamic range starts above them
EXAMPLE_LENGTH = 16


def _quiet():
    """torch.export and ExecuTorch warn about every decomposition, torchao about its CUDA kernels on import, and
    the runtime prints the host's CPU probing."""
    return quiet_tools(stdout=True)


def _captured(model, task, architecture, max_length: int):
    """(the export wrapper, example inputs, dynamic shapes) for torch.export."""
    wrapper = architecture.export_wrapper(model, task, additive_mask=True).eval()
    length = min(EXAMPLE_LENGTH, max_length)
    example = tuple(torch.ones(1, length, dtype=torch.long) for _ in task.input_names)
    sequence = torch.export.Dim("sequence", min=MIN_SEQUENCE, max=max_length)
    return wrapper, example, tuple({1: sequence} for _ in task.input_names)


def _partitioner(coreml: bool):
    """XNNPACK's (Linux, Android, iOS CPU), or Core ML's: the whole graph as one fp16 Core ML program."""
    if not coreml:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        return XnnpackPartitioner()
    import coremltools as ct
    from executorch.backends.apple.coreml.compiler import CoreMLBackend
    from executorch.backends.apple.coreml.partition import CoreMLPartitioner

    return CoreMLPartitioner(compile_specs=CoreMLBackend.generate_compile_specs(
        minimum_deployment_target=getattr(ct.target, COREML_DELEGATE_IOS), compute_precision=ct.precision.FLOAT16))


def export_pte(model, task, architecture, path: Path, max_length: int, int8: bool = False,
               coreml: bool = False) -> Path:
    """A .pte program delegated to XNNPACK (fp32, or with int8 Linear layers: dynamic, per channel), or to Core ML
    (fp16)."""
    with _quiet():
        require("executorch", "export")
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )
        from executorch.exir import to_edge_transform_and_lower
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        partitioner = _partitioner(coreml)

    wrapper, example, dynamic = _captured(model, task, architecture, max_length)
    try:
        with _quiet(), torch.no_grad():
            if int8:
                quantizer = XNNPACKQuantizer().set_module_type(
                    torch.nn.Linear, get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True))
                graph = prepare_pt2e(torch.export.export(wrapper, example, dynamic_shapes=dynamic).module(), quantizer)
                graph(*example)  # dynamic activations: one pass only records the graph's observers
                wrapper = convert_pt2e(graph)
            program = torch.export.export(wrapper, example, dynamic_shapes=dynamic)
            lowered = to_edge_transform_and_lower(program, partitioner=[partitioner]).to_executorch()
    except Exception as exc:  # torch.export names the op it could not capture
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ExportError(f"ExecuTorch could not capture this {architecture.name} {task.name} model ({first[:200]}): "
                          "export its ONNX and Core ML variants only") from exc
    Path(path).write_bytes(lowered.buffer)
    return Path(path)


def _each_at_its_length(task, run_row):
    """A numpy-in, numpy-out forward that runs each sequence alone at its own length, as an app runs it;
    run_row(the inputs by name, each [1, n]) gives the outputs in output order."""
    def forward(batch):
        rows = []
        for i in range(batch["input_ids"].shape[0]):
            n = max(int(batch["attention_mask"][i].sum()), MIN_SEQUENCE)
            outputs = run_row({name: np.ascontiguousarray(batch[name][i:i + 1, :n]) for name in task.input_names})
            rows.append(task.fit_row(task.stack_outputs(outputs)[0], n, batch["input_ids"].shape[1]))
        return np.stack(rows)

    return forward


def executorch_forward(path: Path, task):
    """A numpy-in, numpy-out forward over ExecuTorch's runtime, one sequence at a time at its own length."""
    method = executorch_method(path)

    def run_row(inputs: dict) -> list:
        return [np.asarray(o) for o in method.execute([torch.from_numpy(inputs[name].astype(np.int64))
                                                        for name in task.input_names])]

    forward = _each_at_its_length(task, run_row)
    forward.runtime = "ExecuTorch (XNNPACK)"
    return forward


def coreml_delegate_package(pte: Path, folder: Path) -> Path:
    """The Core ML program a Core ML-delegated .pte carries, unpacked from the saved file into `folder`."""
    with _quiet():
        require("executorch", "export")
        from executorch.backends.apple.coreml import executorchcoreml
        from executorch.exir._serialize._program import _extract_delegate_payload

    payload = _extract_delegate_payload(Path(pte).read_bytes(), "coreml")
    Path(folder).mkdir(parents=True, exist_ok=True)
    if payload is not None and executorchcoreml.unflatten_directory_contents(payload, str(folder)):
        for package in Path(folder).rglob(COREML_DELEGATE_PACKAGE):
            return package
    raise ExportError(f"{Path(pte).name} carries no Core ML program: export it again")


def coreml_delegate_forward(path: Path, task):
    """The Core ML program inside a Core ML-delegated .pte, evaluated with numpy (the MIL evaluator), each sequence
    at its own length, rows of one length together: ExecuTorch's Core ML backend itself runs only on Apple
    hardware."""
    import tempfile

    from pocketbert.export.programs.coreml import MIL_EVALUATOR, program_forward
    from pocketbert.export.evaluators.mil_eval import MILEvaluator

    folder = tempfile.TemporaryDirectory(prefix="pocketbert-pte-coreml-")
    evaluator = MILEvaluator(coreml_delegate_package(path, Path(folder.name)))
    # the program names its outputs after the graph's nodes: they are taken in the order it returns them
    forward = program_forward(evaluator.predict, evaluator.metadata, task, evaluator.output_names,
                              min_length=MIN_SEQUENCE)
    forward.runtime = f"Core ML delegate, {MIL_EVALUATOR}"
    forward.keeps = folder  # the unpacked program lives as long as the forward
    return forward
