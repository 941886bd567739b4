"""Students of any width and depth cut from a teacher: the importance ranking, the cut through torch-pruning's
dependency graph, the config that describes every layer, reloading, the ONNX export's parity gate, and the
shapes a BERT config cannot express refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoConfig, AutoModelForSequenceClassification, BertConfig, BertForQuestionAnswering, \
    BertForSequenceClassification

from pocketbert.core.students import student_shape
from pocketbert.core.tasks.data import TextExample
from pocketbert.core.students.inference import batched_logits, ort_forward, ort_session, torch_forward
from pocketbert.core.tasks.registry import QATask, SentimentTask, TextFeature
from pocketbert.core.errors import ConfigError, ModelError
from pocketbert.train import bert_layout, importance, narrow

VOCAB, HIDDEN, LAYERS, HEADS, FFN = 200, 64, 3, 4, 128  # heads of 16
WIDTH = HIDDEN // HEADS
RELOAD_TOLERANCE = 1e-6
NARROW = {"layers": 2, "hidden_size": 32, "intermediate_size": 48}  # 2 heads of 16


def tiny_teacher(cls=BertForSequenceClassification, **extra):
    config = BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                        intermediate_size=FFN, max_position_embeddings=64, **extra)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    return cls(config).eval()


def features(n=48, seed=0, task=None):
    from pocketbert.core.tasks.qa import QAFeature

    rng = np.random.default_rng(seed)
    rows = [list(rng.integers(5, VOCAB, size=int(rng.integers(4, 24)))) for _ in range(n)]
    if isinstance(task, QATask):
        return [QAFeature(i, ids, [0] * 3 + [1] * (len(ids) - 3), [None] * len(ids)) for i, ids in enumerate(rows)]
    return [TextFeature(ids, i % 2) for i, ids in enumerate(rows)]


def padded_batch():
    ids = torch.randint(5, VOCAB, (3, 11), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def cut(teacher, student: dict, task=None):
    task = task or SentimentTask(["neg", "pos"])
    ranked = importance.measure(teacher, task, features(task=task), 0, 16)
    shape = narrow.resolve_shape(teacher.config, student)
    layer_map = student.get("layer_map") or narrow.default_layer_map(shape.layers, LAYERS)
    plan = narrow.plan_cut(ranked, shape, layer_map, WIDTH)
    return narrow.cut_student(teacher, plan), plan


def test_the_cut_student_has_the_asked_shape_and_reloads_with_equal_outputs(tmp_path):
    teacher = tiny_teacher(num_labels=2)
    student, plan = cut(teacher, NARROW)
    config = student.config
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads, config.intermediate_size) == \
        (2, 32, 2, 48)
    assert student_shape.head_width(config) == WIDTH  # heads kept whole
    assert plan.layer_map == [1, 2]  # spread evenly, ending on the teacher's last layer
    student.save_pretrained(tmp_path)
    reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path, attn_implementation="eager").eval()
    batch = padded_batch()
    with torch.no_grad():
        difference = (student(**batch).logits - reloaded(**batch).logits).abs().max()
    assert difference <= RELOAD_TOLERANCE


@pytest.mark.parametrize("cls, extra", [(BertForSequenceClassification, {"num_labels": 3}),
                                        (BertForQuestionAnswering, {})], ids=["classifier", "qa"])
def test_the_saved_config_describes_every_weight(tmp_path, cls, extra):
    """Every weight in the saved file has exactly the shape a model built from config.json alone gives it."""
    from safetensors.torch import load_file

    task = SentimentTask(["a", "b", "c"]) if cls is BertForSequenceClassification else QATask()
    student, _ = cut(tiny_teacher(cls, **extra), NARROW, task)
    student.save_pretrained(tmp_path)
    saved = load_file(tmp_path / "model.safetensors")
    built = cls(AutoConfig.from_pretrained(tmp_path)).state_dict()
    assert set(saved) == set(built)
    assert {k: tuple(v.shape) for k, v in saved.items()} == {k: tuple(built[k].shape) for k in saved}
    widths = {v.shape[-1] for k, v in saved.items() if k.endswith("LayerNorm.weight")}
    assert widths == {32}  # every LayerNorm of the residual stream narrowed together


def test_the_cut_keeps_the_teachers_most_important_heads_channels_and_neurons():
    teacher = tiny_teacher(num_labels=2)
    layers = bert_layout.encoder_layers(teacher)
    with torch.no_grad():  # make head 3 of teacher layer 2 and FFN neurons 0..23 of it stand out
        layers[2].attention.self.value.weight[3 * WIDTH:4 * WIDTH] *= 50.0
        layers[2].intermediate.dense.bias[:24] += 10.0  # far on the linear side of GELU
    student, plan = cut(teacher, {"layers": 1, "layer_map": [2], "hidden_size": 32, "intermediate_size": 24})
    assert 3 in plan.heads[0] and plan.ffn[0] == list(range(24))
    # the kept head's value rows are the teacher's, restricted to the kept hidden channels
    kept = plan.heads[0].index(3)
    value = bert_layout.encoder_layers(student)[0].attention.self.value.weight
    expected = layers[2].attention.self.value.weight[3 * WIDTH:4 * WIDTH][:, plan.hidden]
    assert torch.equal(value[kept * WIDTH:(kept + 1) * WIDTH], expected)
    assert torch.equal(student.get_input_embeddings().weight, teacher.get_input_embeddings().weight[:, plan.hidden])


@pytest.mark.slow
def test_a_cut_to_the_teachers_own_shape_is_the_teacher():
    teacher = tiny_teacher(num_labels=2)
    student, plan = cut(teacher, {"layers": LAYERS, "layer_map": list(range(LAYERS)), "hidden_size": HIDDEN})
    batch = padded_batch()
    with torch.no_grad():
        assert torch.equal(student(**batch).logits, teacher(**batch).logits)
    assert plan.hidden == list(range(HIDDEN)) and all(h == list(range(HEADS)) for h in plan.heads)


def test_importance_is_measured_on_real_tokens_only():
    teacher, task = tiny_teacher(num_labels=2), SentimentTask(["neg", "pos"])
    rows = features(8)  # of 4 to 23 tokens: one batch of 8 pads most of them, batches of one pad none
    padded, alone = (importance.measure(teacher, task, rows, 0, size) for size in (8, 1))
    for part in ("hidden", "heads", "ffn", "pooler"):
        assert torch.allclose(getattr(padded, part), getattr(alone, part), atol=1e-5), part


def test_a_random_start_has_the_shape_and_none_of_the_teachers_weights():
    teacher = tiny_teacher(num_labels=2)
    student, _ = cut(teacher, NARROW)
    random = narrow.random_like(student)
    assert random.config.to_dict() == student.config.to_dict()
    same = [k for k, v in random.state_dict().items() if v.numel() > 1 and torch.equal(v, student.state_dict()[k])]
    assert all("LayerNorm" in k or k.endswith("bias") for k in same)  # only the 1/0 LayerNorms and zero biases


@pytest.mark.parametrize("student, fragments", [
    ({"hidden_size": 40}, ["hidden_size 40", "16-wide heads", "multiple of 16"]),
    ({"hidden_size": 32, "heads": 3}, ["holds 2", "not 3"]),
    ({"hidden_size": 128}, ["hidden_size 128", "teacher's 64"]),
    ({"heads": 5}, ["heads 5", "teacher's 4"]),
    ({"layers": 4}, ["layers 4", "teacher's 3"]),
    ({"intermediate_size": 256}, ["intermediate_size 256", "teacher's 128"]),
])
def test_a_shape_the_teacher_cannot_give_is_one_line(student, fragments):
    with pytest.raises(ConfigError) as caught:
        narrow.resolve_shape(tiny_teacher(num_labels=2).config, student)
    message = str(caught.value)
    assert "\n" not in message and all(f in message for f in fragments)


def test_a_layer_map_out_of_range_is_one_line():
    with pytest.raises(ConfigError, match=r"out of range for a 3-layer teacher \(use 0\.\.2\)"):
        narrow.check_layer_map([0, 3], LAYERS)


def test_a_model_of_another_layout_is_refused():
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    other = DistilBertForSequenceClassification(DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=1, n_heads=2,
                                                                 hidden_dim=64))
    with pytest.raises(ModelError, match="BERT's layer layout"):
        bert_layout.encoder_layers(other)


@pytest.mark.slow  # about 7 s on 2 cores
def test_the_exported_onnx_of_a_narrow_student_passes_the_parity_gate(tmp_path):
    from pocketbert.export.checks import parity
    from pocketbert.export.programs import onnx_export

    task = SentimentTask(["neg", "pos"])
    student, _ = cut(tiny_teacher(num_labels=2), NARROW, task)
    onnx_export.export_onnx(student, task, tmp_path / "model.onnx")
    rows = features(40, seed=3)
    examples = [TextExample("x", f.label) for f in rows]
    ours = batched_logits(task, rows, 0, 8, torch_forward(student, task))
    theirs = batched_logits(task, rows, 0, 8, ort_forward(ort_session(tmp_path / "model.onnx"), task))
    result = parity.compare(task, examples, rows, ours, theirs, {}, "model.onnx", "onnxruntime", "fp32",
                            parity.FP32_GATE)
    assert result.passed, result.failure()
    # and the gate still bites: the teacher's answers are not the narrow student's
    teacher = tiny_teacher(num_labels=2)
    other = batched_logits(task, rows, 0, 8, torch_forward(teacher, task))
    assert not parity.compare(task, examples, rows, ours, other, {}, "model.onnx", "onnxruntime", "fp32",
                              parity.FP32_GATE).passed
