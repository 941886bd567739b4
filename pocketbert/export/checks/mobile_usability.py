"""ONNX Runtime's own verdict on how an exported model will run on phones' accelerators.

The checks are those of `python -m onnxruntime.tools.check_onnx_model_mobile_usability`: for NNAPI (Android)
and the CoreML execution provider (iOS, NeuralNetwork and MLProgram), how many nodes and partitions the
provider would take, with the input shapes dynamic as exported and fixed. Few large partitions run well;
many small ones spend their time copying between the accelerator and the CPU.

ONNX Runtime ships no such check for XNNPACK (Android's optimized CPU kernels). xnnpack_check transcribes the
node checks of its execution provider (onnxruntime/core/providers/xnnpack: GetCapability and each kernel's
IsOnnxNodeSupported): it takes float MatMul and Gemm with constant 2-D weights, float Softmax over a static last
axis, and the DequantizeLinear-Softmax-QuantizeLinear group; no dynamic-quantization op and no QDQ MatMul. XNNPACK
runs on the CPU, so partitions cost no copies: what matters is the share of weight products it takes.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import numpy as np

from pocketbert.core.errors import require

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


def usability(onnx_path: Path, fixed_length: int = 128) -> dict:
    """Per provider: the partitioning as exported (dynamic shapes) and with fixed shapes, and the advice.
    fixed_length: the sequence length the fixed-shape checks assume (batch 1)."""
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
        dynamic = xnnpack_check(model)
        fixed = xnnpack_check(_fixed_shapes(model, fixed_length, Path(tmp)))
        verdict[XNNPACK] = {"dynamic_shapes": dynamic, "fixed_shapes": fixed, "advice": _xnnpack_advice(dynamic, fixed)}
    return verdict


XNNPACK = "XNNPACK"
# XNNPACK is worth turning on when it runs at least this share of the weight products (MatMul/Gemm with constant
# weights, in float or int8): the rest of a transformer (layer norm, GELU, attention) stays on ONNX Runtime's CPU
# kernels either way.
XNNPACK_MIN_WEIGHT_SHARE = 0.75
FLOAT_TYPES = (1, 10)  # TensorProto FLOAT, FLOAT16
UINT8 = 2
WEIGHT_PRODUCTS = ("MatMul", "Gemm", "MatMulInteger", "DynamicQuantizeMatMul", "MatMulIntegerToFloat",
                   "QLinearMatMul", "QGemm", "FusedMatMul", "FusedGemm")
QLINEAR_SOFTMAX_SCALE, QLINEAR_SOFTMAX_TOLERANCE = 1 / 256, 1e-4


@contextlib.contextmanager
def _working_directory(folder: Path):
    previous = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(previous)


def _fixed_shapes(model, length: int, scratch: Path):
    """A copy with batch 1 and sequence `length` in every input (what an app that pads would feed). scratch: where
    ONNX Runtime's shape inference may leave its debugging copy of a graph it cannot finish (it writes into the
    working directory)."""
    import onnx
    from onnxruntime.tools.onnx_model_utils import make_input_shape_fixed

    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    for graph_input in fixed.graph.input:
        dims = graph_input.type.tensor_type.shape.dim
        shape = [1, length][:len(dims)] + [d.dim_value or 1 for d in dims[2:]]
        make_input_shape_fixed(fixed.graph, graph_input.name, shape)
    del fixed.graph.value_info[:]
    # ONNX Runtime's symbolic inference follows the Shape-Gather-Concat-Reshape arithmetic of the exported
    # attention, so the fixed length reaches the softmax; onnx's own inference stops at the first Reshape.
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference
    try:
        with _working_directory(scratch):
            return SymbolicShapeInference.infer_shapes(fixed, auto_merge=True)
    except Exception:  # an op it does not know: the plain inference still types most of the graph
        return onnx.shape_inference.infer_shapes(fixed)


class _Graph:
    """Types, shapes, constants and producers of a graph with shape information."""

    def __init__(self, model):
        graph = model.graph
        self.initializers = {t.name: t for t in graph.initializer}
        inputs = {i.name for i in graph.input}
        self.constants = {n for n in self.initializers if n not in inputs}  # an initializer an input overrides is not
        self.constants |= {n.output[0] for n in graph.node if n.op_type == "Constant"}
        self.types = {v.name: v.type.tensor_type for v in [*graph.value_info, *graph.input, *graph.output]}
        self.producer = {out: n for n in graph.node for out in n.output}
        self.consumers: dict[str, list] = {}
        for n in graph.node:
            for name in n.input:
                self.consumers.setdefault(name, []).append(n)
        self.nodes = list(graph.node)

    def elem_type(self, name):
        if name in self.initializers:
            return self.initializers[name].data_type
        t = self.types.get(name)
        return t.elem_type if t is not None else None

    def shape(self, name):
        """Dims (None where symbolic), or None where the rank is unknown."""
        if name in self.initializers:
            return list(self.initializers[name].dims)
        t = self.types.get(name)
        if t is None or not t.HasField("shape"):
            return None
        return [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]

    def constant_value(self, name):
        from onnx import numpy_helper
        return numpy_helper.to_array(self.initializers[name]) if name in self.initializers else None

    def weight_of(self, node) -> str | None:
        """The constant weight a product reads (through a DequantizeLinear in a QDQ graph), or None."""
        if len(node.input) < 2:
            return None
        name = node.input[1]
        producer = self.producer.get(name)
        if producer is not None and producer.op_type == "DequantizeLinear":
            name = producer.input[0]
        return name if name in self.constants else None


def _attribute(node, name, default):
    from onnx import helper
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _matmul_taken(g: _Graph, node) -> bool:
    if len(node.input) != 2 or g.elem_type(node.input[0]) not in FLOAT_TYPES:
        return False
    a, b = g.shape(node.input[0]), g.shape(node.input[1])
    return (a is not None and len(a) >= 1 and node.input[1] in g.constants and b is not None
            and len(b) in (1, 2) and all(b))


def _gemm_taken(g: _Graph, node) -> bool:
    if _attribute(node, "alpha", 1.0) != 1.0 or _attribute(node, "beta", 1.0) != 1.0:
        return False
    if g.elem_type(node.input[0]) not in FLOAT_TYPES or node.input[1] not in g.constants:
        return False
    a, b = g.shape(node.input[0]), g.shape(node.input[1])
    if a is None or b is None or len(a) > 2 or len(b) > 2 or not b or not all(b):
        return False
    if len(node.input) > 2 and node.input[2]:
        c = g.shape(node.input[2])
        return node.input[2] in g.constants and c is not None and len(c) in (1, 2) and c[0] in b
    return True


def _softmax_taken(g: _Graph, node) -> bool:
    shape = g.shape(node.input[0])
    if shape is None or not shape:
        return False
    axis = _attribute(node, "axis", -1)
    return axis in (-1, len(shape) - 1) and shape[-1] is not None


def _qdq_softmax(g: _Graph, node) -> list | None:
    """The DequantizeLinear-Softmax-QuantizeLinear group XNNPACK runs as QLinearSoftmax, or None."""
    dq = g.producer.get(node.input[0])
    users = g.consumers.get(node.output[0], [])
    if dq is None or dq.op_type != "DequantizeLinear" or len(users) != 1 or users[0].op_type != "QuantizeLinear":
        return None
    q = users[0]
    scale = g.constant_value(q.input[1]) if len(q.input) > 1 else None
    zero = g.constant_value(q.input[2]) if len(q.input) > 2 else np.zeros(1, np.uint8)
    if scale is None or zero is None or scale.size != 1 or g.elem_type(q.output[0]) != UINT8:
        return None
    if abs(float(scale) - QLINEAR_SOFTMAX_SCALE) > QLINEAR_SOFTMAX_TOLERANCE or int(zero.reshape(-1)[0]) != 0:
        return None
    shape = g.shape(node.input[0])
    return [dq, node, q] if shape and shape[-1] is not None else None


def xnnpack_check(model) -> dict:
    """Which nodes the XNNPACK execution provider would take, and its share of the weight products."""
    g = _Graph(model)
    taken: set[str] = set()
    ops_taken: dict[str, int] = {}
    for node in g.nodes:
        if node.domain not in ("", "ai.onnx"):
            continue
        group = None
        if node.op_type == "MatMul" and _matmul_taken(g, node) or node.op_type == "Gemm" and _gemm_taken(g, node):
            group = [node]
        elif node.op_type == "Softmax":
            group = _qdq_softmax(g, node) or ([node] if g.elem_type(node.input[0]) in FLOAT_TYPES
                                             and _softmax_taken(g, node) else None)
        if group:
            taken |= {id(n) for n in group}
            ops_taken[node.op_type] = ops_taken.get(node.op_type, 0) + 1
    products = [n for n in g.nodes if n.op_type in WEIGHT_PRODUCTS and g.weight_of(n) is not None]
    products_taken = [n for n in products if id(n) in taken]
    return {
        "nodes": len(g.nodes), "supported_nodes": len(taken),
        "supported_fraction": round(len(taken) / len(g.nodes), 4) if g.nodes else 0.0,
        "ops_taken": dict(sorted(ops_taken.items())),
        "weight_products": len(products), "weight_products_taken": len(products_taken),
        "weight_share": round(len(products_taken) / len(products), 4) if products else 0.0,
        "suitability": "YES" if products and len(products_taken) / len(products) >= XNNPACK_MIN_WEIGHT_SHARE
        else "NO",
    }


def _xnnpack_advice(dynamic: dict, fixed: dict) -> str:
    if dynamic["suitability"] == "YES":
        return "use the XNNPACK execution provider"
    if fixed["suitability"] == "YES":
        return "use XNNPACK after fixing the input shapes (python -m onnxruntime.tools.make_dynamic_shape_fixed)"
    return (f"stay on the CPU execution provider: XNNPACK would run {fixed['weight_products_taken']} of "
            f"{fixed['weight_products']} weight products even with fixed shapes (it has no kernel for this "
            "graph's int8 products)" if fixed["weight_products"] else "stay on the CPU execution provider")


def _advice(provider: str, dynamic: dict, fixed: dict) -> str:
    if dynamic["suitability"] == "YES":
        return f"use the {provider} execution provider"
    if fixed["suitability"] == "YES":
        return (f"use {provider} after fixing the input shapes "
                "(python -m onnxruntime.tools.make_dynamic_shape_fixed)")
    return (f"stay on the CPU execution provider: {provider} would take "
            f"{100 * fixed['supported_fraction']:.0f} % of the nodes in {fixed['partitions']} partitions "
            f"even with fixed shapes")


ANDROID_PROVIDERS = ("NNAPI", XNNPACK)  # in the order an app would try them


def preferred_provider(verdict: dict) -> str:
    """The Android execution provider the verdict of one graph supports as it is (dynamic shapes), else CPU."""
    for provider in ANDROID_PROVIDERS:
        if verdict.get(provider, {}).get("dynamic_shapes", {}).get("suitability") == "YES":
            return provider
    return "CPU"
