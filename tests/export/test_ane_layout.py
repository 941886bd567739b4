"""The student in the Neural Engine's layout (export/programs/ane_layout.py): the same logits as the plain student, and a
Core ML program and a Core AI program of the layout Apple's article asks for (channels-first rank 4, 1x1
convolutions, per-head attention, no reshape, no transpose between layers), one fixed-length function per length."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pocketbert.core.students.architectures import BERT_FAMILY, BILSTM, STATIC
from pocketbert.core.errors import ExportError
from tests.conftest import TINY_CONFIG

# The layout only reorders fp32 arithmetic (and lifts LayerNorm's epsilon to 1e-7): float rounding apart.
FP32_LOGIT_TOLERANCE = 1e-5
# The fp16 program against the fp32 student, on the MIL evaluator (parity.FP16_MAX_ABS_DIFF is the gate's bound).
FP16_LOGIT_TOLERANCE = 1e-2
LENGTHS = (8, 16)
VOCAB = 120


def _student(head: str, **shape):
    from transformers import BertConfig, BertForQuestionAnswering, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(vocab_size=VOCAB, attn_implementation="eager", **{**TINY_CONFIG, **shape})
    model = {"classifier": BertForSequenceClassification, "span": BertForQuestionAnswering}[head](config)
    with torch.no_grad():  # weights far from their init, so a misplaced one shows
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    return model.eval()


def _batch(length: int, rows: int = 4):
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(1, VOCAB, (rows, length), generator=generator)
    mask = torch.ones(rows, length, dtype=torch.int64)
    mask[1, length // 2:] = 0
    mask[2, 3:] = 0
    types = torch.zeros_like(ids)
    types[:, length // 3:] = 1
    return ids * mask, mask, types * mask


def _plain_logits(model, ids, mask, types) -> list[torch.Tensor]:
    out = model(input_ids=ids, attention_mask=mask, token_type_ids=types)
    return [out.logits] if hasattr(out, "logits") else [out.start_logits, out.end_logits]


@pytest.mark.parametrize("head,shape", [
    ("classifier", {}),
    ("span", {}),
    # a ladder rung's cut: more heads of another size, a narrower FFN, three layers
    ("classifier", {"hidden_size": 48, "num_attention_heads": 4, "intermediate_size": 40, "num_hidden_layers": 3}),
])
def test_the_ane_layout_gives_the_students_logits(head, shape):
    from pocketbert.export.programs.ane_layout import ane_module

    model = _student(head, **shape)
    ane = ane_module(model, BERT_FAMILY)
    ids, mask, types = _batch(12)
    with torch.no_grad():
        expected = _plain_logits(model, ids, mask, types)
        got = ane(ids.int(), mask.int(), types.int() if head == "span" else None) if head == "span" else \
            ane(ids.int(), mask.int())
    if head == "classifier":  # the sentence classifier's export takes no token types: all zero, as here
        with torch.no_grad():
            expected = _plain_logits(model, ids, mask, torch.zeros_like(types))
    for e, g in zip(expected, got, strict=True):
        assert g.shape == e.shape
        assert float((g - e).abs().max()) < FP32_LOGIT_TOLERANCE


def test_the_ane_layout_masks_padding():
    """A padded key changes nothing: the mask is applied (as a bias over the keys' axis)."""
    from pocketbert.export.programs.ane_layout import ane_module

    ane = ane_module(_student("classifier"), BERT_FAMILY)
    ids, mask, _ = _batch(12)
    noisy = ids.clone()
    noisy[mask == 0] = 7
    with torch.no_grad():
        assert torch.allclose(ane(ids.int(), mask.int())[0], ane(noisy.int(), mask.int())[0], atol=1e-6)
        assert not torch.allclose(ane(ids.int(), mask.int())[0], ane(noisy.int(), torch.ones_like(mask).int())[0])


@pytest.mark.parametrize("architecture", [BILSTM, STATIC])
def test_students_without_attention_are_refused_in_one_line(architecture):
    from pocketbert.export.programs.ane_layout import refuse_unless_bert

    with pytest.raises(ExportError) as info:
        refuse_unless_bert(architecture, _student("classifier"))
    assert "\n" not in str(info.value) and "no attention" in str(info.value)


# ---------------------------------------------------------------- the Core ML program

@pytest.fixture(scope="module")
def ane_package(tmp_path_factory):
    from pocketbert.core.tasks.registry import SentimentTask
    from pocketbert.export.programs.ane_program import convert_lengths, save_ane_package

    model, task = _student("classifier"), SentimentTask(["negative", "positive"])
    path = tmp_path_factory.mktemp("ane") / "Tiny.ane.mlpackage"
    save_ane_package(convert_lengths(model, task, BERT_FAMILY, LENGTHS), task, path, "tiny", max(LENGTHS))
    return model, task, path


def _float_activations(function):
    from coremltools.converters.mil.mil import types

    return [(op, v) for op in function.operations if op.op_type != "const" for v in op.outputs
            if types.is_tensor(v.sym_type) and types.is_float(v.dtype)]


@pytest.mark.slow
def test_every_function_is_in_the_ane_layout(ane_package):
    from pocketbert.export.evaluators.mil_reference import SavedProgram
    from pocketbert.export.programs.multifunction import function_name

    model, _, path = ane_package
    linears = sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    layers = model.config.num_hidden_layers
    for n in LENGTHS:
        function = SavedProgram(path, function_name(n)).function
        kinds = [op.op_type for op in function.operations]
        assert kinds.count("conv") == linears and "linear" not in kinds and "matmul" not in kinds
        assert "reshape" not in kinds
        outputs = {v.name for v in function.outputs}
        ranks = {len(v.shape) for op, v in _float_activations(function) if v.name not in outputs}
        assert ranks == {4}, f"main_len{n} has activations of rank {ranks - {4}}"
        # the only transposes: one into the layout at the input, and each layer's keys, read by its heads' einsums
        transposes = [op for op in function.operations if op.op_type == "transpose"]
        keys = [t for t in transposes if all(c.op_type == "split" and all(
            d.op_type == "einsum" for o in c.outputs for d in o.child_ops) for c in t.outputs[0].child_ops)]
        assert len(keys) == layers and len(transposes) == layers + 1
        assert kinds.count("einsum") == 2 * layers * model.config.num_attention_heads


@pytest.mark.slow
def test_every_function_gives_the_students_logits(ane_package):
    from pocketbert.export.programs import coreml

    model, task, path = ane_package
    for n in LENGTHS:
        ids, mask, _ = _batch(n)
        forward = coreml.coreml_forward(path, task, pad_to=n)
        got = forward({"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
        with torch.no_grad():
            expected = model(input_ids=ids, attention_mask=mask).logits.numpy()
        assert np.abs(got - expected).max() < FP16_LOGIT_TOLERANCE


@pytest.mark.slow
def test_the_package_stores_each_weight_once(ane_package):
    """Two functions, one copy of the weights: the weight file is about the student's fp16 size, not twice it."""
    model, _, path = ane_package
    fp16_bytes = 2 * sum(p.numel() for p in model.parameters())
    stored = sum(f.stat().st_size for f in path.rglob("weight.bin"))
    assert stored < 1.5 * fp16_bytes


@pytest.mark.slow
def test_the_placement_check_reads_the_ane_layout_apart_from_the_plain_one(ane_package, tmp_path):
    """Both fixed-shape programs are predicted on the Neural Engine; the plain one reshapes and transposes around
    every attention product (transpose-near-matmul, several a layer), the ANE layout only its keys (one a layer)."""
    from pocketbert.export.programs import coreml
    from pocketbert.export.evaluators import placement

    model, task, path = ane_package
    plain = tmp_path / "Tiny.fixed.mlpackage"
    coreml.convert_to_coreml(model, task, max(LENGTHS), task.label_names, "tiny", fixed=True).save(str(plain))
    ane, fixed = placement.check(path).summary(), placement.check(plain).summary()
    layers = model.config.num_hidden_layers
    assert ane["verdict"] == "neural_engine" and ane["handoffs"] == 0 and ane["functions"] == len(LENGTHS)
    assert ane["rules_fired"].get("transpose-near-matmul") == layers * len(LENGTHS)
    assert fixed["rules_fired"]["transpose-near-matmul"] >= 4 * layers


@pytest.mark.parametrize("architecture", [BILSTM, STATIC])
def test_the_ane_variants_are_refused_to_students_without_attention(architecture):
    from pocketbert.core.tasks.registry import SentimentTask
    from pocketbert.core.config.export_families import COREAI, COREML
    from pocketbert.export.programs import variants

    task = SentimentTask(["negative", "positive"])
    assert not [v for v in variants.selected(["fp16", "ane", "ane-6bit"], task, architecture, ["fp16", "ane"])
                if v.needs_attention]
    for family, names in ((COREML, ["fp16", "ane"]), (COREAI, ["ane"])):
        with pytest.raises(ExportError) as info:
            family.refuse(names, variants.applies(family, task, architecture), task.name, architecture.name)
        assert "\n" not in str(info.value) and "ane" in str(info.value)


@pytest.mark.parametrize("task", ["sentiment", "qa"])
def test_the_swift_runs_the_function_of_the_padded_length(task):
    from pocketbert.export.app import app_readme

    values = {"stride": 32, "n_best": 20, "max_answer_length": 30}
    swift = app_readme.swift_code(task, "PocketBertX", 64, "ane", (16, 64), values, functions=True)
    assert 'configuration.functionName = "main_len\\(n)"' in swift and "for n in [16, 64] {" in swift
    assert "models[length]!.prediction(" in swift and "private let lengths = [16, 64]" in swift
    plain = app_readme.swift_code(task, "PocketBertX", 64, "enumerated", (16, 64), values)
    assert "functionName" not in plain and "try model.prediction(" in plain and "{model_" not in plain


# ---------------------------------------------------------------- the Core AI program

# A wrong convolution or head concatenation in the evaluator must miss the student's logits by at least this (the
# fp16 program itself stays within FP16_LOGIT_TOLERANCE).
BROKEN_MIN_DIFF = 0.05
# A pointwise convolution in float32 against torch's conv2d: float rounding apart.
CONV_TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def coreai_ane_program(tmp_path_factory):
    """The tiny student's ANE layout as the coreai-ane variant builds it: converted once at a dynamic length,
    specialized into main_len<n> per length, saved."""
    pytest.importorskip("coreai_torch")
    from pocketbert.core.tasks.registry import SentimentTask
    from pocketbert.export.programs import ane_program, coreai

    model, task = _student("classifier"), SentimentTask(["negative", "positive"])
    path = tmp_path_factory.mktemp("coreai-ane") / "Tiny.ane.aimodel"
    dynamic = ane_program.convert_coreai(model, task, BERT_FAMILY, LENGTHS)
    coreai.save(coreai.specialize(dynamic, task, LENGTHS), path, "tiny")
    return model, task, path


class _Dataflow:
    """An entry point's computed operations, who makes each value and who reads it."""

    def __init__(self, graph):
        self.graph = graph
        self.ops = [op for op in graph.operations if op.kind != "constant"]
        self.type = {r: t for op in self.ops for r, t in zip(op.results, op.result_types)}
        self.readers: dict[str, list] = {}
        for op in self.ops:
            for name in op.operands:
                self.readers.setdefault(name, []).append(op)

    def attention_squeeze(self, op) -> bool:
        """A reshape that drops the unit axis of an attention product's operand ((B, C, 1, S) -> (B, C, S): the
        same elements in the same order) and feeds only that product: torch's decomposition of the heads' einsums,
        which Core AI has no operation for."""
        source = self.type.get(op.operands[0])
        readers = self.readers.get(op.results[0], [])
        return (op.kind == "reshape" and source is not None and len(source.shape) == 4 and source.shape[2] == 1
                and op.result_types[0].shape == source.shape[:2] + source.shape[3:]
                and bool(readers) and all(r.kind.endswith("batch_matmul") for r in readers))

    def feeds_the_outputs(self, name: str) -> bool:
        """The value is an output, or only cast to one (the logits' fp32)."""
        outputs, readers = set(self.graph.outputs), self.readers.get(name, [])
        return name in outputs or (bool(readers) and all(r.kind == "cast" and r.results[0] in outputs
                                                         for r in readers))


@pytest.mark.slow
def test_every_coreai_entry_point_is_in_the_ane_layout(coreai_ane_program):
    """Every Linear a conv2d; every fp16 activation channels-first rank 4, but for the attention products' squeezed
    operands (a unit axis dropped, no element moved) and the logits; no reshape between layers; the only
    transposes, one into the layout and each layer's keys."""
    from pocketbert.export.programs import coreai
    from pocketbert.export.evaluators import coreai_ir

    model, _, path = coreai_ane_program
    program = coreai_ir.load_program(path)
    linears = sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    assert sorted(g.name for g in program.entry_points) == sorted(coreai.entry_name(n) for n in LENGTHS)
    for n in LENGTHS:
        flow = _Dataflow(program.graphs[coreai.entry_name(n)])
        kinds = [op.kind for op in flow.ops]
        assert kinds.count("conv2d") == linears and "invoke" not in kinds  # no composite (no layer_norm call)
        products = [op for op in flow.ops if op.kind.endswith("batch_matmul")]
        assert len(products) == 2 * layers * heads  # each head's scores and mix, nothing else
        squeezes = [op for op in flow.ops if flow.attention_squeeze(op)]
        assert len(squeezes) == len(products)
        off_layout = {(op.kind, t.shape) for op in flow.ops if op not in squeezes
                      for r, t in zip(op.results, op.result_types)
                      if t.element == "f16" and len(t.shape) != 4 and not flow.feeds_the_outputs(r)}
        assert not off_layout, f"main_len{n} has activations off the (B, C, 1, S) layout: {off_layout}"
        reshapes = [op for op in flow.ops if op.kind == "reshape" and op not in squeezes]
        assert all(op.result_types[0].element != "f16" or flow.feeds_the_outputs(op.results[0]) for op in reshapes)
        assert kinds.count("transpose") == layers + 1


@pytest.mark.slow
def test_every_coreai_entry_point_gives_the_students_logits(coreai_ane_program):
    from pocketbert.export.programs import coreai

    model, task, path = coreai_ane_program
    for n in LENGTHS:
        ids, mask, _ = _batch(n)
        got = coreai.coreai_forward(path, task, pad_to=n)({"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
        with torch.no_grad():
            expected = model(input_ids=ids, attention_mask=mask).logits.numpy()
        assert np.abs(got - expected).max() < FP16_LOGIT_TOLERANCE


def _conv_with_channels_reversed(op, operands, out):
    from pocketbert.export.evaluators import coreai_eval

    right = coreai_eval._conv2d(op, operands, out)
    return lambda x, *rest: right(x[..., ::-1, :, :], *rest)


def _conv_with_positions_reversed(op, operands, out):
    from pocketbert.export.evaluators import coreai_eval

    right = coreai_eval._conv2d(op, operands, out)
    return lambda x, *rest: right(x, *rest)[..., ::-1]


def _concat_heads_reversed(op, operands, out):
    from pocketbert.export.evaluators import coreai_eval

    right = coreai_eval._concat(op, operands, out)
    return lambda axis, *values: right(axis, *values[::-1])


COREAI_BROKEN = {
    "conv2d reads the channels reversed": ("conv2d", _conv_with_channels_reversed),
    "conv2d writes the positions reversed": ("conv2d", _conv_with_positions_reversed),
    "the heads concatenated in reverse": ("concat", _concat_heads_reversed),
}


@pytest.mark.slow
@pytest.mark.parametrize("broken", list(COREAI_BROKEN))
def test_the_coreai_evaluator_with_a_wrong_convolution_misses_the_student(coreai_ane_program, broken):
    from pocketbert.export.programs import coreai
    from pocketbert.export.evaluators import coreai_eval, coreai_ir

    model, task, path = coreai_ane_program
    program, n = coreai_ir.load_program(path), max(LENGTHS)
    ids, mask, _ = _batch(n)
    inputs = {"input_ids": ids.numpy()[:, None, :], "attention_mask": mask.numpy()[:, None, :]}
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask).logits.numpy()
    kind, kernel = COREAI_BROKEN[broken]
    right = coreai_eval.CoreAIEvaluator(program, coreai.entry_name(n)).predict(inputs)["logits"][:, 0]
    wrong = coreai_eval.CoreAIEvaluator(program, coreai.entry_name(n),
                                        {**coreai_eval.KERNELS, kind: kernel}).predict(inputs)["logits"][:, 0]
    assert np.abs(right - expected).max() < FP16_LOGIT_TOLERANCE
    assert np.abs(wrong - expected).max() > BROKEN_MIN_DIFF


def _conv2d_call(weight: np.ndarray, x: np.ndarray, batched: bool, stride=(1, 1)):
    """The Core AI conv2d kernel on x as one f32 program's call; batched: x a run-time value with rows first."""
    from pocketbert.export.evaluators import coreai_eval, coreai_ir

    shape = x.shape[1:] if batched else x.shape
    out = coreai_ir.TensorType((shape[0], weight.shape[0]) + shape[2:], "f32")
    constants = (weight, np.array(stride, np.uint32), np.array([1, 1], np.uint32), np.array(1, np.uint32))
    operands = [coreai_eval.Operand(0 if batched else None, None if batched else x, coreai_ir.TensorType(shape, "f32"))]
    operands += [coreai_eval.Operand(None, v, coreai_ir.TensorType(v.shape, "ui32")) for v in constants]
    op = coreai_ir.Operation("conv2d", ["%0"], [f"%{i + 1}" for i in range(5)], [out])
    return coreai_eval._conv2d(op, operands, out)(x, *constants)


def test_the_coreai_conv2d_kernel_answers_like_torch():
    rng = np.random.default_rng(0)
    weight = rng.normal(size=(6, 4, 1, 1)).astype(np.float32)
    x = rng.normal(size=(2, 4, 1, 5)).astype(np.float32)
    expected = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(weight)).numpy()
    assert np.abs(_conv2d_call(weight, x, batched=False) - expected).max() < CONV_TOLERANCE
    rows = _conv2d_call(weight, np.stack([x] * 3), batched=True)
    assert rows.shape == (3,) + expected.shape and np.abs(rows - expected).max() < CONV_TOLERANCE


def test_a_convolution_other_than_pointwise_is_refused_in_one_line():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 4, 1, 6)).astype(np.float32)
    for weight, stride in ((rng.normal(size=(6, 4, 1, 3)).astype(np.float32), (1, 1)),
                           (rng.normal(size=(6, 4, 1, 1)).astype(np.float32), (1, 2))):
        with pytest.raises(ExportError, match="a convolution other than 1x1") as info:
            _conv2d_call(weight, x, batched=False, stride=stride)
        assert "\n" not in str(info.value)



@pytest.mark.slow
def test_export_gates_and_places_the_coreai_ane_program(exported_run):
    """The session's tiny export (the tiny preset asks for Core AI fp16, 6bit, ane and ane-6bit): the ANE layout's
    Core AI programs gated by the Core AI evaluator against the student on the export's examples, every entry point
    on its own, and their placement predicted and recorded, beside the plain Core AI program."""
    pytest.importorskip("coreai_torch")
    import json

    from pocketbert.core.run import run_files
    from pocketbert.export.programs import coreai

    run = exported_run
    export = run / run_files.EXPORT_DIR
    rows = {r["artifact"]: r for r in json.loads((export / run_files.PARITY).read_text())}
    manifest = json.loads((export / run_files.MANIFEST).read_text())
    name = run_files.coreai_asset_name("PocketBertSentiment", "ane")
    ane, plain = rows[name], rows[run_files.coreai_asset_name("PocketBertSentiment")]
    assert ane["runtime"] == coreai.RUNTIME_NAME and ane["precision"] == "fp16" and ane["passed"]
    assert ane["n_examples"] == plain["n_examples"] > 0
    lengths = manifest["metrics"]["coreai_entry_points"]
    assert list(ane["by_length"]) == [str(n) for n in lengths] and all(r["passed"] for r in ane["by_length"].values())
    assert manifest["config"]["coreai_variants"] == ["fp16", "6bit", "ane", "ane-6bit"]
    placed = manifest["metrics"]["placement"][name]
    assert placed["format"] == "Core AI" and placed["functions"] == len(lengths) and placed["handoffs"] == 0
    assert placed["verdict"] == "neural_engine" and ane["placement"] == placed
    # its weights palettized (coreai.COMPRESSIONS), gated as the compressed programs are
    palettized = rows[run_files.coreai_asset_name("PocketBertSentiment", "ane-6bit")]
    assert palettized["passed"] and palettized["precision"] == "6bit" and palettized["by_length"]
    sizes = manifest["metrics"]["sizes_bytes"]
    assert sizes[palettized["artifact"]] < sizes[name]
    assert palettized["placement"]["verdict"] == "neural_engine"
