"""ONNX export (dynamic batch and sequence), int8 dynamic quantization, and ORT Mobile conversion."""

from __future__ import annotations

import contextlib
import io
import logging
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import torch

from pocketbert.core.config.int8_budgets import INT8_PER_CALL, INT8_PER_TOKEN
from pocketbert.core.errors import ExportError, require
from pocketbert.core.students.architectures import BERT_FAMILY
from pocketbert.export.programs import table_rows

ONNX_OPSET = 17
# The FFN output projection reads GELU activations with large outliers: int8 there flipped 1.3 % of SST-2
# dev answers of the default student. These are the candidates to keep in fp32 (export/checks/int8_budget.py).
# Patterns match node names of the legacy exporter: BERT/RoBERTa/ELECTRA, and DistilBERT.
FP32_NODE_PATTERNS = (re.compile(r"layer\.\d+/output/dense/"), re.compile(r"ffn/lin2/"))


def export_onnx(model, task, path: Path, example_length: int = 16, architecture=BERT_FAMILY) -> Path:
    """Trace the model with the legacy exporter: with eager attention and the 2-D mask, ORT fuses attention."""
    require("onnx", "export")
    wrapper = architecture.export_wrapper(model, task).eval()
    names = list(task.input_names)
    example = tuple(torch.ones(1, example_length, dtype=torch.long) for _ in names)
    dynamic = {name: {0: "batch", 1: "sequence"} for name in names}
    for out in task.output_names:
        dynamic[out] = {0: "batch", 1: "sequence"} if task.per_token_outputs else {0: "batch"}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            wrapper, example, str(path), input_names=names, output_names=list(task.output_names),
            dynamic_axes=dynamic, opset_version=ONNX_OPSET, dynamo=False, do_constant_folding=True,
        )
    return path


def fp32_nodes(model_path: Path) -> list[str]:
    """MatMul/Gemm nodes that stay in fp32 under int8 quantization (FP32_NODE_PATTERNS)."""
    import onnx

    graph = onnx.load(str(model_path), load_external_data=False).graph
    return [n.name for n in graph.node
            if n.op_type in ("MatMul", "Gemm") and any(p.search(n.name) for p in FP32_NODE_PATTERNS)]


def quantize_int8(source: Path, target: Path, keep_fp32: list[str] | None = None, int4_rows=None,
                  activation_scale: str = INT8_PER_CALL) -> Path:
    """int8 weights, per channel (it keeps far more accuracy than per tensor), activations quantized on the fly with
    one scale per call (ONNX Runtime's dynamic quantization) or per token (quantize_per_token); and the word-piece
    table per row (table_rows.py), the rows `int4_rows` in 4 bits.

    keep_fp32: nodes left in fp32; None keeps every FFN output projection (FP32_NODE_PATTERNS).
    """
    kept = fp32_nodes(source) if keep_fp32 is None else list(keep_fp32)
    if activation_scale == INT8_PER_TOKEN:
        quantize_per_token(source, target, kept)
    else:
        quantization = require("onnxruntime.quantization", "export")
        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.ERROR)  # its root-logger advice to pre-process is meant for static quantization
        try:
            quantization.quantize_dynamic(
                str(source), str(target), per_channel=True, weight_type=quantization.QuantType.QInt8,
                nodes_to_exclude=[*kept, table_rows.table_gather_name(source)],
            )
        finally:
            root.setLevel(level)
    table_rows.quantize_rows(target, int4_rows)
    return target


# A token's activations are quantized around 128 (uint8), so every row shares the zero point ONNX Runtime's
# MatMulInteger takes as a scalar and only the scale differs per row: symmetric, +-127 steps.
PER_TOKEN_ZERO_POINT = 128
PER_TOKEN_STEPS = 127.0
PER_TOKEN_MIN_RANGE = 1e-12  # an all-zero row (padding) keeps a finite scale


def quantize_per_token(source: Path, target: Path, keep_fp32: list[str] = ()) -> Path:
    """Each MatMul with a 2-D weight initializer (but those in keep_fp32) as int8 weights, symmetric per output
    column, over its input quantized per row (per token) at run time: scale = max |row| / 127, uint8 around 128.
    Standard operators only (Abs, ReduceMax, Div, Round, Clip, Cast, MatMulInteger, Mul), which every ONNX Runtime
    build runs, the mobile ones included; the int32 products are rescaled by the row's and the column's scales."""
    import numpy as np
    onnx = require("onnx", "export")
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    initializers = {t.name: t for t in graph.initializer}
    constants = {"pt_min_range": np.float32(PER_TOKEN_MIN_RANGE), "pt_steps": np.float32(PER_TOKEN_STEPS),
                 "pt_offset": np.float32(PER_TOKEN_ZERO_POINT), "pt_low": np.float32(0.0),
                 "pt_high": np.float32(2 * PER_TOKEN_ZERO_POINT - 1), "pt_zero_point": np.uint8(PER_TOKEN_ZERO_POINT)}
    added = [numpy_helper.from_array(np.array(value), name) for name, value in constants.items()]
    nodes, quantized = [], set()
    for node in graph.node:
        weight = initializers.get(node.input[1]) if node.op_type == "MatMul" and len(node.input) > 1 else None
        if weight is None or len(weight.dims) != 2 or node.name in keep_fp32:
            nodes.append(node)
            continue
        values = numpy_helper.to_array(weight).astype(np.float32)
        column_scale = np.maximum(np.abs(values).max(axis=0), PER_TOKEN_MIN_RANGE) / PER_TOKEN_STEPS
        key = f"{node.name}/per_token"
        added += [numpy_helper.from_array(np.clip(np.round(values / column_scale), -PER_TOKEN_STEPS,
                                                  PER_TOKEN_STEPS).astype(np.int8), f"{key}/weight"),
                  numpy_helper.from_array(column_scale.astype(np.float32), f"{key}/weight_scale")]
        quantized.add(weight.name)
        a = node.input[0]
        nodes += [
            helper.make_node("Abs", [a], [f"{key}/abs"], name=f"{key}/Abs"),
            helper.make_node("ReduceMax", [f"{key}/abs"], [f"{key}/range"], name=f"{key}/ReduceMax", axes=[-1],
                             keepdims=1),
            helper.make_node("Max", [f"{key}/range", "pt_min_range"], [f"{key}/kept_range"], name=f"{key}/Max"),
            helper.make_node("Div", [f"{key}/kept_range", "pt_steps"], [f"{key}/scale"], name=f"{key}/Scale"),
            helper.make_node("Div", [a, f"{key}/scale"], [f"{key}/steps"], name=f"{key}/Div"),
            helper.make_node("Add", [f"{key}/steps", "pt_offset"], [f"{key}/shifted"], name=f"{key}/Add"),
            helper.make_node("Round", [f"{key}/shifted"], [f"{key}/rounded"], name=f"{key}/Round"),
            helper.make_node("Clip", [f"{key}/rounded", "pt_low", "pt_high"], [f"{key}/clipped"], name=f"{key}/Clip"),
            helper.make_node("Cast", [f"{key}/clipped"], [f"{key}/uint8"], name=f"{key}/Cast", to=TensorProto.UINT8),
            helper.make_node("MatMulInteger", [f"{key}/uint8", f"{key}/weight", "pt_zero_point"], [f"{key}/int32"],
                             name=f"{key}/MatMulInteger"),
            helper.make_node("Cast", [f"{key}/int32"], [f"{key}/float"], name=f"{key}/ToFloat", to=TensorProto.FLOAT),
            helper.make_node("Mul", [f"{key}/float", f"{key}/scale"], [f"{key}/rows"], name=f"{key}/RowScale"),
            helper.make_node("Mul", [f"{key}/rows", f"{key}/weight_scale"], list(node.output), name=node.name),
        ]
    used = {name for node in nodes for name in node.input}
    kept = [t for t in graph.initializer if t.name in used or t.name not in quantized]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept + [t for t in added if t.name in used])
    onnx.save(model, str(target))
    return target


STATIC_OP_TYPES = ("MatMul", "Gemm")  # the weight products; softmax, layer norm and GELU stay in float
# Measured on the SST-2 students (dev accuracy lost): percentile calibration -3.3 points, MinMax -1.3, MinMax
# with the FFN output projections left in float -0.1. Clipping the rare large activations costs more than
# the coarser scale MinMax gives the rest.
CALIBRATION_METHOD = "MinMax"


def quantize_static_qdq(source: Path, target: Path, calibration_inputs: list[dict],
                        op_types: tuple[str, ...] = STATIC_OP_TYPES, keep_float: list[str] | None = None) -> Path:
    """int8 weights and activations as QuantizeLinear/DequantizeLinear pairs around MatMul/Gemm, with activation
    ranges calibrated on real examples. Runtimes with int8 kernels (XNNPACK, NNAPI, QNN) fuse the pairs; the
    others dequantize. The calibrator stacks activations: every row of calibration_inputs must have the same
    length (pad them, masked). keep_float: nodes left unquantized; None leaves the FFN output projections
    (FP32_NODE_PATTERNS), whose inputs have outliers no int8 scale covers."""
    quantization = require("onnxruntime.quantization", "export")

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.rows = iter(calibration_inputs)

        def get_next(self):
            return next(self.rows, None)

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        # No pre-processing pass: it would rename the nodes keep_float names. The calibrator prints to stdout.
        with contextlib.redirect_stdout(io.StringIO()), tempfile.TemporaryDirectory() as tmp:
            quantization.quantize_static(
                str(_without_zero_gemm_bias(source, Path(tmp) / "model.onnx")), str(target), Reader(),
                quant_format=quantization.QuantFormat.QDQ,
                op_types_to_quantize=list(op_types), per_channel=True,
                activation_type=quantization.QuantType.QUInt8, weight_type=quantization.QuantType.QInt8,
                calibrate_method=getattr(quantization.CalibrationMethod, CALIBRATION_METHOD),
                nodes_to_exclude=fp32_nodes(source) if keep_float is None else list(keep_float),
            )
    finally:
        root.setLevel(level)
    return target


def _without_zero_gemm_bias(source: Path, target: Path) -> Path:
    """The graph with each all-zero Gemm bias dropped (the same function: C = 0 adds nothing). A head never trained,
    as in a model built from a config, has one; quantized, it makes a graph ONNX Runtime refuses to convert to .ort
    ("The sum of input arg count is not equal to size of input defs" at the bias' DequantizeLinear)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(source))
    initializers = {t.name: t for t in model.graph.initializer}
    # The exporter stores equal constants once and hands them on through Identity nodes: follow those.
    aliases = {n.output[0]: n.input[0] for n in model.graph.node if n.op_type == "Identity"}

    def constant(name: str):
        while name in aliases:
            name = aliases[name]
        return numpy_helper.to_array(initializers[name]) if name in initializers else None

    for node in model.graph.node:
        bias = constant(node.input[2]) if node.op_type == "Gemm" and len(node.input) > 2 else None
        if bias is not None and not np.any(bias):
            del node.input[2]
    onnx.save(model, str(target))
    return target


def convert_fp16(source: Path, target: Path) -> Path:
    """Weights and activations in fp16, inputs and outputs as they were (int64 ids in, fp32 logits out)."""
    onnx = require("onnx", "export")
    float16 = require("onnxruntime.transformers.float16", "export")
    model = float16.convert_float_to_float16(onnx.load(str(source)), keep_io_types=True)
    onnx.save(model, str(target))
    return target


# Linux's personality flag that turns address-space randomization off for a process (sys/personality.h).
ADDR_NO_RANDOMIZE = 0x0040000
QUERY_PERSONALITY = 0xFFFFFFFF


def _fixed_address_layout():
    """What the converter's process runs before it starts: ONNX Runtime writes the .ort's kernel type strings in
    the order of a hash map seeded from addresses, so with randomized addresses each conversion orders them anew
    (the same model, other bytes). A fixed layout gives the same bytes on every run of one build. libc is
    resolved here, in the parent: the forked child only calls it."""
    import ctypes

    personality = ctypes.CDLL(None, use_errno=True).personality

    def hook() -> None:
        current = personality(QUERY_PERSONALITY)
        if current != -1:
            personality(current | ADDR_NO_RANDOMIZE)
    return hook


CONVERTER_ENVIRONMENT = ("LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH", "SYSTEMROOT", "TMPDIR")  # what it may need


# `python -m onnxruntime.tools.convert_onnx_models_to_ort`, with torch hidden from the lookup by which the tools'
# package imports it where it is installed (for a PyTorch helper the conversion never calls): that import was most
# of each conversion's seconds.
CONVERTER_MAIN = ("import importlib.util as util, runpy; find_spec = util.find_spec; "
                  "util.find_spec = lambda name, *args: None if name == 'torch' else find_spec(name, *args); "
                  "runpy.run_module('onnxruntime.tools.convert_onnx_models_to_ort', run_name='__main__')")


def _converter_environment() -> dict:
    import os

    return {"PYTHONHASHSEED": "0", **{k: os.environ[k] for k in CONVERTER_ENVIRONMENT if k in os.environ}}


def ort_order_is_fixed() -> bool:
    """Whether .ort files come out byte for byte the same on every export here (the manifest says so)."""
    return sys.platform.startswith("linux")


ORT_BYTES_FIXED = "the same on every export by this build: the converter runs with a fixed address layout"
ORT_BYTES_VARY = ("the same model, not the same bytes: ONNX Runtime orders an .ort's kernel type strings by an "
                  "address-seeded hash, and this system cannot fix the converter's address layout")


APPLE_BYTES_VARY = ("the same program, not the same bytes: coremltools names a package's items by random UUIDs "
                    "(Manifest.json) and records the conversion date in its metadata")


def reproducibility() -> dict:
    """What the manifest promises of the export's files when the same run is exported again."""
    return {"onnx": "byte-identical: nothing the export chooses is timed",
            "ort": ORT_BYTES_FIXED if ort_order_is_fixed() else ORT_BYTES_VARY,
            "mlpackage": APPLE_BYTES_VARY}


def _without_temporary_paths(config: Path, ort_name: str) -> None:
    """The operator list names the files it was read from: the converter's temporary paths, other on every run.
    They are named by the shipped file instead."""
    lines = config.read_text().splitlines()
    header = [f"# - {ort_name}" + ("" if "with_runtime_opt" in line else " (before runtime optimizations)")
              for line in lines if line.startswith("# - ")]
    rest = [line for line in lines if not line.startswith("# - ")]
    config.write_text("\n".join(rest[:1] + header + rest[1:]) + "\n")


def convert_to_ort(source: Path, ort_path: Path, operators_path: Path,
                   custom_op_library: str | None = None) -> tuple[Path, Path]:
    """An .ort flatbuffer for ONNX Runtime Mobile, and the operator list for a reduced runtime build.
    custom_op_library: the library of the custom ops the graph uses (onnxruntime-extensions' for text-in models)."""
    require("onnxruntime", "export")
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp) / "model.onnx"
        shutil.copyfile(source, staged)
        # Relative names, a fixed environment and hash seed: the converter's own allocations (and so the order
        # it writes) do not move with the caller's environment or the temporary folder's name.
        proc = subprocess.run(
            [sys.executable, "-c", CONVERTER_MAIN, staged.name,
             # Runtime: the .ort keeps ONNX Runtime's graph optimizations as records it replays when loaded, so
             # an app that hands nodes to NNAPI or CoreML still gets the CPU optimizations for the rest.
             "--optimization_style", "Runtime",
             *(["--custom_op_library", custom_op_library] if custom_op_library else [])],
            capture_output=True, text=True, cwd=tmp, env=_converter_environment(),
            preexec_fn=_fixed_address_layout() if ort_order_is_fixed() else None,
        )
        produced = next(iter(sorted(Path(tmp).glob("*.ort"))), None)  # model.with_runtime_opt.ort
        configs = sorted(Path(tmp).glob("*.config"))
        if proc.returncode != 0 or produced is None or not configs:
            last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise ExportError(f"ONNX Runtime could not convert {source.name} to .ort: {last[0]}")
        shutil.move(produced, ort_path)
        _without_temporary_paths(configs[0], ort_path.name)
        shutil.move(configs[0], operators_path)
    return ort_path, operators_path
