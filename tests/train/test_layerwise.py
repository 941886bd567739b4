"""The layer-wise recipe's step loss on tiny models: every layer-wise part is zero for a student that is its
teacher and positive for a narrow one cut from it, through the kept channels and heads; a random start
compares through its learned projections; cached teacher states give the step's own values."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from pocketbert.core.tasks import losses
from pocketbert.core.tasks.registry import SentimentTask, TextFeature
from pocketbert.core.errors import ConfigError
from pocketbert.train import bert_layout, importance, narrow, teacher_cache
from pocketbert.train.layerwise import (
    LAYERWISE_PARTS,
    StudentWithProjections,
    check_relation_heads,
    layerwise_loss,
    teacher_states,
)

VOCAB, HIDDEN, LAYERS, HEADS, FFN = 200, 64, 3, 4, 128
IDENTICAL = 1e-6
CLEARLY_POSITIVE = 1e-4
# how much closer the student is to its teacher read through the kept channels and heads than through the others
CHANNELS_AT_LEAST_CLOSER = 10.0  # measured 76x
HEADS_AT_LEAST_CLOSER = 1.3      # measured about 1.6x (the narrowed inputs move every head's scores)
CACHED_LIKE_LIVE = 2e-2  # the cache holds fp16: losses from it differ from the live teacher's by rounding
ALL = {"kl": 1.0, "ce": 1.0, "cos": 1.0, "hidden": 1.0, "embedding": 1.0, "attention": 1.0, "relation": 1.0}
TASK = SentimentTask(["neg", "pos"])


def teacher(**extra):
    config = BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                        intermediate_size=FFN, max_position_embeddings=64, num_labels=2, **extra)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    return BertForSequenceClassification(config).eval()


def rows(n=24, seed=0):
    rng = np.random.default_rng(seed)
    return [TextFeature(list(rng.integers(5, VOCAB, size=int(rng.integers(4, 16)))), i % 2) for i in range(n)]


def batch_of(features):
    return {k: torch.from_numpy(v) for k, v in TASK.collate(features, 0).items()}


def plan_for(model, student: dict):
    shape = narrow.resolve_shape(model.config, student)
    layer_map = student.get("layer_map") or narrow.default_layer_map(shape.layers, LAYERS)
    return narrow.plan_cut(importance.measure(model, TASK, rows(), 0, 8), shape, layer_map, HIDDEN // HEADS)


def parts_of(model, student, plan, through_channels=True, cached=None, batch=None, weights=ALL):
    step_loss, extras = layerwise_loss(TASK, model, student, cached, plan, weights, 2.0, 4, losses.cross_entropy,
                                       through_channels, torch.device("cpu"))
    batch = batch or batch_of(rows(6, seed=1))
    if extras is not None:
        batch.update(extras(list(range(len(batch["input_ids"]))), batch["input_ids"].shape[1]))
    with torch.no_grad():
        _, parts = step_loss(student, batch)
    return {k: float(v) for k, v in parts.items()}


def test_every_layerwise_part_is_zero_for_a_student_that_is_its_teacher():
    model = teacher()
    plan = plan_for(model, {"layers": LAYERS, "layer_map": list(range(LAYERS))})
    student = StudentWithProjections(narrow.cut_student(model, plan))
    parts = parts_of(model, student, plan)
    assert set(parts) == set(ALL)
    assert all(parts[k] <= IDENTICAL for k in (*LAYERWISE_PARTS, "kl", "cos")), parts


def test_every_layerwise_part_is_positive_for_a_narrow_student():
    model = teacher()
    plan = plan_for(model, {"layers": 2, "hidden_size": 32})
    student = StudentWithProjections(narrow.cut_student(model, plan))
    parts = parts_of(model, student, plan)
    assert all(parts[k] > CLEARLY_POSITIVE for k in LAYERWISE_PARTS), parts


def test_a_narrow_student_is_compared_through_its_kept_channels_and_heads():
    """A student cut to one teacher layer at full width, with half its FFN: its embedding output is the
    teacher's (every channel kept), and its layer's attention and relations are the teacher layer's (the
    same input through the same kept heads); its output is not."""
    model = teacher()
    plan = plan_for(model, {"layers": 1, "layer_map": [0], "hidden_size": HIDDEN, "heads": HEADS,
                            "intermediate_size": 64})
    student = StudentWithProjections(narrow.cut_student(model, plan))
    parts = parts_of(model, student, plan)
    assert parts["embedding"] <= IDENTICAL and parts["attention"] <= IDENTICAL and parts["relation"] <= IDENTICAL
    assert parts["hidden"] > CLEARLY_POSITIVE  # half the FFN is gone: the layer's output differs


def test_the_losses_read_the_teacher_through_the_channels_and_heads_the_student_kept():
    """Read through the other channels and heads, the same student is much further from its teacher."""
    from dataclasses import replace

    model = teacher(initializer_range=0.1)  # wider weights than BERT's 0.02: heads with patterns of their own
    width = HIDDEN // HEADS
    with torch.no_grad():  # the last head the most important, so the kept heads are not simply the first ones
        bert_layout.encoder_layers(model)[0].attention.self.value.weight[(HEADS - 1) * width:] *= 20.0
    plan = plan_for(model, {"layers": 1, "layer_map": [0], "hidden_size": 32})
    assert HEADS - 1 in plan.heads[0] and plan.hidden != list(range(32))
    student = StudentWithProjections(narrow.cut_student(model, plan))
    others = replace(plan, hidden=[c for c in range(HIDDEN) if c not in plan.hidden],
                     heads=[[h for h in range(HEADS) if h not in plan.heads[0]]])
    right, wrong = parts_of(model, student, plan), parts_of(model, student, others)
    assert right["embedding"] * CHANNELS_AT_LEAST_CLOSER < wrong["embedding"], (right, wrong)
    assert right["attention"] * HEADS_AT_LEAST_CLOSER < wrong["attention"], (right, wrong)


def test_a_random_start_compares_through_learned_projections():
    model = teacher()
    plan = plan_for(model, {"layers": 2, "hidden_size": 32})
    student = narrow.random_like(narrow.cut_student(model, plan))
    projections = {k: torch.nn.Linear(32, HIDDEN, bias=False) for k in (0, 1, 2)}
    wrapped = StudentWithProjections(student, projections)
    step_loss, _ = layerwise_loss(TASK, model, wrapped, None, plan, ALL, 2.0, 4, losses.cross_entropy, False,
                                  torch.device("cpu"))
    loss, parts = step_loss(wrapped, batch_of(rows(6, seed=1)))
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in wrapped.projections.parameters())
    assert {k for k, v in parts.items() if v > CLEARLY_POSITIVE} >= set(LAYERWISE_PARTS)


def test_cached_teacher_states_give_the_live_teachers_losses(tmp_path):
    model = teacher()
    plan = plan_for(model, {"layers": 2, "hidden_size": 32})
    student = StudentWithProjections(narrow.cut_student(model, plan))
    features = rows(6, seed=1)
    states = teacher_states(plan.layer_map, ALL)
    cached, report = teacher_cache.teacher_outputs(model, TASK, features, 0, states, "sha", "cpu", root=tmp_path)
    assert report["used"]
    live = parts_of(model, student, plan, batch=batch_of(features))
    from_cache = parts_of(model, student, plan, cached=cached, batch=batch_of(features))
    assert from_cache.keys() == live.keys()
    for name in live:
        assert from_cache[name] == pytest.approx(live[name], rel=CACHED_LIKE_LIVE, abs=1e-4), name


def test_the_teacher_states_follow_the_losses_that_read_them():
    assert teacher_states([1, 2], {**ALL}) == [0, 1, 2, 3]
    assert teacher_states([1, 2], {**ALL, "attention": 0, "relation": 0}) == [0, 2, 3]
    assert teacher_states([1, 2], {**ALL, "hidden": 0, "cos": 0, "embedding": 0}) == [1, 2]


def test_relation_heads_that_do_not_divide_both_widths_are_one_line():
    config = teacher().config
    check_relation_heads(4, narrow.StudentShape(2, 32, 2, 64), config)
    with pytest.raises(ConfigError, match="relation_heads 3 does not divide the student's 32-wide") as caught:
        check_relation_heads(3, narrow.StudentShape(2, 32, 2, 64), config)
    assert "\n" not in str(caught.value) and "16, 32" in str(caught.value)
