"""The student in the Neural Engine's layout (export/ane_layout.py): the same logits as the plain student, and a
Core ML program of the layout Apple's article asks for (channels-first rank 4, 1x1 convolutions, per-head attention,
no reshape, no transpose between layers), one fixed-length function per length."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pocketbert.core.architectures import BERT_FAMILY, BILSTM, STATIC
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
    from pocketbert.export.ane_layout import ane_module

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
    from pocketbert.export.ane_layout import ane_module

    ane = ane_module(_student("classifier"), BERT_FAMILY)
    ids, mask, _ = _batch(12)
    noisy = ids.clone()
    noisy[mask == 0] = 7
    with torch.no_grad():
        assert torch.allclose(ane(ids.int(), mask.int())[0], ane(noisy.int(), mask.int())[0], atol=1e-6)
        assert not torch.allclose(ane(ids.int(), mask.int())[0], ane(noisy.int(), torch.ones_like(mask).int())[0])


@pytest.mark.parametrize("architecture", [BILSTM, STATIC])
def test_students_without_attention_are_refused_in_one_line(architecture):
    from pocketbert.export.ane_layout import refuse_unless_bert

    with pytest.raises(ExportError) as info:
        refuse_unless_bert(architecture, _student("classifier"))
    assert "\n" not in str(info.value) and "no attention" in str(info.value)


# ---------------------------------------------------------------- the Core ML program

@pytest.fixture(scope="module")
def ane_package(tmp_path_factory):
    from pocketbert.core.tasks import SentimentTask
    from pocketbert.export.ane_program import convert_lengths, save_ane_package

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
    from pocketbert.export.multifunction import function_name

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
    from pocketbert.export import coreml

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
    from pocketbert.export import coreml
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
    from pocketbert.core.tasks import SentimentTask
    from pocketbert.export import variants
    from pocketbert.export.pipeline import check_coreml_choice

    task = SentimentTask(["negative", "positive"])
    assert not [v for v in variants.selected(["fp16", "ane", "ane-6bit"], task, architecture) if v.needs_attention]
    with pytest.raises(ExportError) as info:
        check_coreml_choice(["fp16", "ane"], task, architecture)
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
