"""The rules of the placement check, each with the public source it rests on. Adding a rule is one entry of RULES.

No rule here is Apple's specification of the Neural Engine: Apple publishes none ("There is no static
documentation, as it changes based on device generation, operating system version, tensor sizes etc.", a Core ML
engineer in apple/coremltools#1780). Each rule is what a named source measured or stated; the kit for a Mac or an
iPhone (Core ML's MLComputePlan) is what confirms a prediction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from pocketbert.export.evaluators.program_view import (FP32, LAYOUT_CHANGES, MATRIX_PRODUCTS, Function, Op)

NEURAL_ENGINE, GPU, CPU, CPU_OR_GPU = "neural_engine", "gpu", "cpu", "cpu_or_gpu"
# What a rule does when it fires:
PLACEMENT = "placement"  # the operation runs elsewhere (the rule's fallback unit)
COST = "cost"            # the operation stays on the Neural Engine, and costs more there than it needs to
RISK = "risk"            # the program may not run at all on a device

# The largest extents the Neural Engine's compiler accepts, as its own validation message gives them: "Tensor
# dimensions N1D1C768H1W32000 are not within supported range, N[1-65536]D[1-16384]C[1-65536]H[1-16384]W[1-16384]"
# (an iPhone 15 log in pytorch/executorch#7907); Core ML itself refuses input dimensions above 16,384
# (microsoft/onnxruntime#19543, citing apple/coremltools#1003).
MAX_EXTENT = 16384
# The same axis limit by chip generation: 16,384 through the A15, 65,536 from the A16 (arXiv 2606.22283, a
# reverse-engineered guide: Mac chips measured, A-series predicted). MAX_EXTENT, the older limit, decides the
# rule; the verdict says which generations a table between the two reaches (placement.axis_limit_note).
MAX_EXTENT_FROM_A16 = 65536
ANE_GUIDE = "arXiv 2606.22283 (a reverse-engineered guide to the Neural Engine; Mac chips measured, A-series predicted)"
MAX_RANK = 4  # the Neural Engine's layout is 4-D, (B, C, 1, S) (Apple, "Deploying Transformers on the Apple
#               Neural Engine"); Core ML itself stops at rank 5 (apple/coremltools#1723, #2291)

APPLE_ANE_ARTICLE = ("Apple, \"Deploying Transformers on the Apple Neural Engine\" "
                     "(machinelearning.apple.com/research/neural-engine-transformers)")
APPLE_ANE_README = ("apple/ml-ane-transformers README: \"4 of the 606 operations in the optimized model are executed "
                    "on the CPU. These are the embedding lookup related operations\"")
HOLLANCE = "hollance/neural-engine, docs/unsupported-layers.md (community-documented)"


@dataclass(frozen=True)
class Rule:
    id: str
    description: str
    source: str
    effect: str                                  # PLACEMENT, COST or RISK
    fallback: str | None                         # where a PLACEMENT rule's operation runs instead
    fires: Callable[[Op, Function], bool]        # on this operation of this function


def _floats(op: Op) -> set[str]:
    return {t.tensor.dtype for t in (*op.computed_reads, *op.writes) if t.tensor.dtype.startswith(("fp", "bf"))}


def _fp32_in_fp16(op: Op, function: Function) -> bool:
    return function.computes_in_fp16 and FP32 in _floats(op)


def _larger_than_4d(op: Op, function: Function) -> bool:
    return any(len(w.tensor.shape) > MAX_RANK for w in op.writes)


def _beyond_extent(op: Op, function: Function) -> bool:
    return any((d or 0) > MAX_EXTENT for w in op.writes for d in w.tensor.shape)


def _gathers_large_table(op: Op, function: Function) -> bool:
    if op.op_type not in ("gather", "gather_nd") or not op.reads:
        return False
    table = op.reads[0].tensor.shape
    axis = int(op.attributes.get("axis", 0) or 0) if op.op_type == "gather" else 0
    return bool(table) and (table[axis] or 0) > MAX_EXTENT


def _compressed_reads(op: Op, function: Function) -> set[str]:
    return {function.compressed_weights[r.name] for r in op.reads if r.name in function.compressed_weights}


PALETTE_RISK_BITS = 4
PALETTE_RISK_IOS = 18


def _palettized_4bit_ios18(op: Op, function: Function) -> bool:
    return (function.ios_target or 0) >= PALETTE_RISK_IOS \
        and f"palettized-{PALETTE_RISK_BITS}bit" in _compressed_reads(op, function)


def _int8_weights(op: Op, function: Function) -> bool:
    return "int8" in _compressed_reads(op, function)


def _flexible(op: Op, function: Function) -> bool:
    return "range" in function.input_shapes.values()


def _enumerated(op: Op, function: Function) -> bool:
    return "enumerated" in function.input_shapes.values()


def _layer_norm_enumerated(op: Op, function: Function) -> bool:
    return op.op_type == "layer_norm" and _enumerated(op, function)


# Operation types with no Neural Engine implementation, each with its source.
NO_NEURAL_ENGINE_OPS = {
    "lstm": "apple/coremltools#1780 (a Core ML engineer: RNN or LSTM ops are not supported on the neural engine)",
    "gru": "apple/coremltools#1780",
    "rnn": "apple/coremltools#1780",
    "gather_along_axis": "apple/coremltools#1103 (GatherAlongAxis ran as fast with CPU only as with all units)",
    "classify": "its results are a string and a dictionary (coremltools' MIL op definitions), not fp16 tensors",
}


def _no_neural_engine_op(op: Op, function: Function) -> bool:
    return op.op_type in NO_NEURAL_ENGINE_OPS


def _near_matrix_product(op: Op, function: Function) -> bool:
    """A reshape or transpose of computed values next to a matrix product, through other reshapes/transposes."""
    if op.op_type not in LAYOUT_CHANGES:
        return False
    producers, consumers = function.producers, function.consumers
    ops = function.ops

    def up(o: Op) -> bool:
        sources = [ops[producers[r.name]] for r in o.computed_reads if r.name in producers]
        return any(s.op_type in MATRIX_PRODUCTS or (s.op_type in LAYOUT_CHANGES and up(s)) for s in sources)

    def down(o: Op) -> bool:
        users = [ops[i] for w in o.writes for i in consumers.get(w.name, [])]
        return any(u.op_type in MATRIX_PRODUCTS or (u.op_type in LAYOUT_CHANGES and down(u)) for u in users)
    return up(op) or down(op)


RULES: list[Rule] = [
    Rule("fp32-in-fp16", "an fp32 operation inside an fp16 program: the Neural Engine computes in fp16",
         "coremltools guide \"Typed Execution Workflow Example\" (a float 32 typed model executes on the GPU and "
         "CPU); hollance/neural-engine docs/16-bit.md (the ANE appears to use float16 for everything); "
         "john-rocky/coreai-model-zoo's fp16 Core AI encoder formed a Neural Engine region only once two fp32 ops "
         "were removed", PLACEMENT, CPU_OR_GPU, _fp32_in_fp16),
    Rule("rank-above-4", f"a tensor of more than {MAX_RANK} dimensions",
         f"{APPLE_ANE_ARTICLE}: the (B, C, 1, S) 4-D layout; {HOLLANCE}: \"ND\" layers fall back to the CPU or GPU",
         PLACEMENT, CPU_OR_GPU, _larger_than_4d),
    Rule("extent-beyond-limit", f"a tensor with a dimension longer than {MAX_EXTENT:,}",
         "the Neural Engine compiler's own limits, N[1-65536]D[1-16384]C[1-65536]H[1-16384]W[1-16384] "
         "(pytorch/executorch#7907); Core ML's 16,384 input limit (microsoft/onnxruntime#19543)",
         PLACEMENT, CPU_OR_GPU, _beyond_extent),
    Rule("gather-large-table", f"a gather from a table of more than {MAX_EXTENT:,} rows (an embedding lookup)",
         f"{APPLE_ANE_README}; {HOLLANCE} (gather); apple/coremltools#1103; the 16,384 limit of "
         "pytorch/executorch#7907", PLACEMENT, CPU, _gathers_large_table),
    Rule("no-neural-engine-op", "an operation type with no Neural Engine implementation: "
         + ", ".join(NO_NEURAL_ENGINE_OPS),
         "; ".join(f"{k}: {v}" for k, v in NO_NEURAL_ENGINE_OPS.items()), PLACEMENT, CPU, _no_neural_engine_op),
    Rule("flexible-shape", "an input of flexible (range) shape: the Neural Engine runs only its default shape",
         "Apple Developer Forums thread 724930 (an Apple engineer: \"For models with range flexibility, we currently "
         "only support running on the Neural Engine for the input's default shape. Other shapes will be run on "
         "either GPU or CPU\"); apple/coremltools#1764, #2370 (0 % Neural Engine at other shapes)",
         PLACEMENT, CPU_OR_GPU, _flexible),
    Rule("layer-norm-enumerated", "a layer_norm in a program with enumerated input shapes",
         "apple/coremltools#1909 (torch.nn.LayerNorm kept a model with EnumeratedShapes off the Neural Engine; the "
         "same model ran there with a fixed or range shape)", PLACEMENT, CPU_OR_GPU, _layer_norm_enumerated),
    Rule("enumerated-shape", "an input of enumerated shapes: such programs convert and save, then fail at "
         "prediction", "apple/coremltools#2730 (open: EnumeratedShapes / FlexibleShapeInfo models fail at inference "
         "from every Apple API, an E5RT \"unknown strides\" error); #2764", RISK, None, _enumerated),
    Rule("palettized-4bit-ios18", f"a {PALETTE_RISK_BITS}-bit palettized weight in a program targeting iOS "
         f"{PALETTE_RISK_IOS} or later: such packages crash when the Neural Engine loads them",
         "apple/coremltools#2688, #2716", RISK, None, _palettized_4bit_ios18),
    Rule("int8-weights-folded", "int8 weights: on the A13 and M1 the Neural Engine folds them to fp16 before it "
         "computes, so they save storage and give no speed-up there", ANE_GUIDE, COST, None, _int8_weights),
    Rule("transpose-near-matmul", "a reshape or transpose next to a matrix product (the (batch, sequence, "
         "channels) layout splitting heads): a memory copy on the Neural Engine",
         f"{APPLE_ANE_ARTICLE}: the (B, C, 1, S) layout, 1x1 convolutions and per-head attention avoid reshapes and "
         "transposes; up to 10x faster than the straight conversion", COST, None, _near_matrix_product),
]
RULES_BY_ID = {r.id: r for r in RULES}
