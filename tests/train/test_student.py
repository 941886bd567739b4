"""Building the student from the teacher: layer selection, copied weights, the aligned layers."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from pocketbert.core.errors import ModelError
from pocketbert.train.distill import aligned_teacher_layers
from pocketbert.train.student import build_student, default_layer_map


def tiny_teacher(layers=4):
    config = BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=64, num_labels=3)
    torch.manual_seed(0)
    return BertForSequenceClassification(config).eval()


def test_default_map_is_every_other_layer():
    assert default_layer_map(12) == [0, 2, 4, 6, 8, 10]
    assert default_layer_map(6) == [0, 2, 4]


def test_student_copies_every_other_layer_and_the_rest():
    teacher = tiny_teacher(4)
    student, layer_map = build_student(teacher)
    assert layer_map == [0, 2]
    assert student.config.num_hidden_layers == 2
    t, s = teacher.state_dict(), student.state_dict()
    for i, j in enumerate(layer_map):
        key = "attention.self.query.weight"
        assert torch.equal(s[f"bert.encoder.layer.{i}.{key}"], t[f"bert.encoder.layer.{j}.{key}"])
    assert torch.equal(s["bert.embeddings.word_embeddings.weight"], t["bert.embeddings.word_embeddings.weight"])
    assert torch.equal(s["classifier.weight"], t["classifier.weight"])
    assert not torch.equal(s["bert.encoder.layer.1.output.dense.weight"], t["bert.encoder.layer.1.output.dense.weight"])


def layer_weights(model, index: int) -> dict[str, torch.Tensor]:
    prefix = f"bert.encoder.layer.{index}."
    return {k[len(prefix):]: v for k, v in model.state_dict().items() if k.startswith(prefix)}


def test_student_with_custom_map_copies_the_mapped_layers_and_runs():
    teacher = tiny_teacher(4)
    student, layer_map = build_student(teacher, [1, 3])
    assert layer_map == [1, 3] and student.config.num_hidden_layers == 2
    for i, j in enumerate(layer_map):
        mine, theirs = layer_weights(student, i), layer_weights(teacher, j)
        assert mine.keys() == theirs.keys() and mine
        for name in mine:
            assert torch.equal(mine[name], theirs[name]), f"student layer {i} {name} is not teacher layer {j}'s"
    # the teacher's layers differ, so a copy of another one (say layer i itself) would have been caught above
    assert not torch.equal(layer_weights(teacher, 0)["attention.self.query.weight"],
                           layer_weights(teacher, 1)["attention.self.query.weight"])
    out = student(input_ids=torch.tensor([[1, 5, 7, 2]]))
    assert out.logits.shape == (1, 3)


def test_layer_map_out_of_range():
    with pytest.raises(ModelError, match="out of range for a 4-layer teacher"):
        build_student(tiny_teacher(4), [0, 4])


def test_aligned_layers_end_on_the_teachers_last():
    assert aligned_teacher_layers(3, 6) == [2, 4, 6]
    assert aligned_teacher_layers(6, 12) == [2, 4, 6, 8, 10, 12]
    assert aligned_teacher_layers(1, 2) == [2]
