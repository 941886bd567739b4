"""ONNX Runtime's own verdict on how an exported model will run on phones' accelerators.

The checks are those of `python -m onnxruntime.tools.check_onnx_model_mobile_usability`: for NNAPI (Android)
and the CoreML execution provider (iOS, NeuralNetwork and MLProgram), how many nodes and partitions the
provider would take, with the input shapes dynamic as exported and fixed. Few large partitions run well;
many small ones spend their time copying between the accelerator and the CPU.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from pocketbert.errors import require

PROVIDERS = {
    "NNAPI": None,
    "CoreML NeuralNetwork": "coreml_supported_neuralnetwork_ops.md",
    "CoreML MLProgram": "coreml_supported_mlprogram_ops.md",
}


def _partition_summary(info) -> dict:
    return {
        "suitability": info.suitability().name,  # YES, MAYBE or NO
        "nodes": info.num_nodes, "supported_nodes": info.num_supported_nodes, "partitions": info.num_partitions,
        "supported_fraction": round(info.num_supported_nodes / info.num_nodes, 4) if info.num_nodes else 0.0,
        "unsupported_ops": sorted(info.unsupported_ops),
        "nodes_unsupported_for_dynamic_shapes": info.nodes_unsupported_due_to_dynamic_input,
    }


def usability(onnx_path: Path) -> dict:
    """Per provider: the partitioning as exported (dynamic shapes) and with fixed shapes, and the advice."""
    require("onnxruntime", "export")
    from onnxruntime.tools.mobile_helpers import usability_checker as checker
    from onnxruntime.tools.onnx_model_utils import ModelProtoWithShapeInfo

    with tempfile.TemporaryDirectory() as tmp:
        # ORT optimises at BASIC level when it converts to .ort: judge the graph the phone will load.
        optimized = Path(tmp) / onnx_path.name
        checker.optimize_model(onnx_path, optimized, use_external_initializers=True)
        model = ModelProtoWithShapeInfo(optimized).model_with_shape_info
        verdict = {}
        for provider, ops_file in PROVIDERS.items():
            def check(fixed: bool):
                if ops_file is None:
                    return checker.check_nnapi_partitions(model, not fixed)
                return checker.check_coreml_partitions(model, not fixed, ops_file)

            dynamic, fixed = _partition_summary(check(False)), _partition_summary(check(True))
            verdict[provider] = {"dynamic_shapes": dynamic, "fixed_shapes": fixed,
                                 "advice": _advice(provider, dynamic, fixed)}
    return verdict


def _advice(provider: str, dynamic: dict, fixed: dict) -> str:
    if dynamic["suitability"] == "YES":
        return f"use the {provider} execution provider"
    if fixed["suitability"] == "YES":
        return (f"use {provider} after fixing the input shapes "
                "(python -m onnxruntime.tools.make_dynamic_shape_fixed)")
    return (f"stay on the CPU execution provider: {provider} would take "
            f"{100 * fixed['supported_fraction']:.0f} % of the nodes in {fixed['partitions']} partitions "
            f"even with fixed shapes")
