"""Building the student from the teacher: layer selection, copied weights, the aligned layers."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from pocketbert.errors import ModelError
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


def test_student_with_custom_map_runs():
    student, _ = build_student(tiny_teacher(4), [1, 3])
    out = student(input_ids=torch.tensor([[1, 5, 7, 2]]))
    assert out.logits.shape == (1, 3)


def test_layer_map_out_of_range():
    with pytest.raises(ModelError, match="out of range for a 4-layer teacher"):
        build_student(tiny_teacher(4), [0, 4])


def test_aligned_layers_end_on_the_teachers_last():
    assert aligned_teacher_layers(3, 6) == [2, 4, 6]
    assert aligned_teacher_layers(6, 12) == [2, 4, 6, 8, 10, 12]
    assert aligned_teacher_layers(1, 2) == [2]
