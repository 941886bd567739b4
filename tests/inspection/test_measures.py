"""The numbers inspect reports, on inputs whose answers are known by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from pocketbert.core.students.architectures import BERT_FAMILY
from pocketbert.inspect import measures

ROW_SUM_TOLERANCE = 1e-5


def test_purity_of_a_constructed_clustering():
    clusters = np.array([0, 0, 1, 1, 2, 2])
    labels = np.array([0, 0, 1, 1, 1, 0])
    assert measures.purity(clusters, labels) == pytest.approx(5 / 6)  # 2 + 2 + 1 majority members of 6
    assert measures.purity(np.zeros(4, dtype=int), np.array([0, 1, 1, 1])) == pytest.approx(3 / 4)


@pytest.mark.slow
def test_adjusted_rand_index_of_constructed_clusterings():
    labels = np.array([0, 0, 1, 1, 2, 2])
    assert measures.adjusted_rand(np.array([5, 5, 3, 3, 9, 9]), labels) == pytest.approx(1.0)  # names do not matter
    assert measures.adjusted_rand(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])) == pytest.approx(-0.5)


def test_probe_split_is_disjoint_complete_and_stratified():
    labels = np.array([0] * 40 + [1] * 20 + [2] * 10)
    train, test = measures.probe_split(labels, seed=3)
    assert not set(train) & set(test)
    assert sorted([*train, *test]) == list(range(len(labels)))
    for label, n in ((0, 40), (1, 20), (2, 10)):
        assert (labels[test] == label).sum() == round(measures.PROBE_TEST_FRACTION * n)
    assert measures.probe_split(labels, seed=3)[1].tolist() == test.tolist()


def test_linear_probe_separates_separable_embeddings_and_not_noise():
    rng = np.random.default_rng(0)
    labels = np.array([0, 1] * 60)
    separable = rng.normal(size=(120, 8)) + 4.0 * labels[:, None]
    assert measures.linear_probe(separable, labels, seed=0)["accuracy"] == 1.0
    noise = measures.linear_probe(rng.normal(size=(120, 8)), labels, seed=0)["accuracy"]
    assert noise < 0.8


def test_attention_rows_sum_to_one_and_entropy_is_bounded():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, attn_implementation="eager")
    model = BertForSequenceClassification(config).eval()
    ids = torch.tensor([[2, 7, 9, 11, 3, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0]])
    with torch.no_grad():
        _, _, attentions = BERT_FAMILY.encode(model, {"input_ids": ids, "attention_mask": mask}, "cls", True)
    assert len(attentions) == 2
    for layer in attentions:
        averaged = layer[0].mean(dim=0)[:5, :5]  # over heads; the real tokens
        assert torch.allclose(averaged.sum(dim=-1), torch.ones(5), atol=ROW_SUM_TOLERANCE)
        entropy = measures.attention_entropy(layer[0].numpy(), mask[0].numpy())
        assert 0.0 <= entropy <= np.log(5) + 1e-6


def test_uniform_attention_has_the_largest_entropy():
    uniform = np.full((1, 4, 4), 0.25)
    peaked = np.tile(np.eye(4), (1, 1, 1))
    ones = np.ones(4)
    assert measures.attention_entropy(uniform, ones) == pytest.approx(np.log(4))
    assert measures.attention_entropy(peaked, ones) == pytest.approx(0.0, abs=1e-9)


def test_confusion_matrix_and_hardest_classes():
    gold = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])
    predicted = np.array([0, 1, 1, 1, 1, 2, 2, 0, 2])
    matrix = measures.confusion(gold, predicted, 3)
    assert matrix.tolist() == [[1, 2, 0], [0, 2, 0], [1, 0, 3]]
    hardest = measures.hardest_classes(matrix, ["a", "b", "c"], n=2)
    assert [h["label"] for h in hardest] == ["a", "c"]
    assert hardest[0]["recall"] == pytest.approx(1 / 3) and hardest[0]["most_confused_with"] == "b"


UNRELATED_CKA_AT_MOST = 0.3  # two independent 200 x 8 Gaussian samples


def test_linear_cka_sees_the_same_geometry_across_widths():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 8))
    rotation, _ = np.linalg.qr(rng.normal(size=(12, 12)))
    wider = 3.0 * x @ rotation[:8] + 5.0  # 8 -> 12 columns, rotated, scaled, shifted
    assert measures.linear_cka(x, wider) == pytest.approx(1.0)
    assert measures.linear_cka(x, rng.normal(size=(200, 12))) < UNRELATED_CKA_AT_MOST
    half = x.copy()
    half[:, 4:] = rng.normal(size=(200, 4))  # half the directions kept
    assert UNRELATED_CKA_AT_MOST < measures.linear_cka(x, half) < 0.9


def test_attention_distance_over_real_tokens():
    mask = np.array([1, 1, 1, 0])
    uniform = np.full((4, 4), 0.25)
    first = np.zeros((4, 4))
    first[:, 0] = 1.0
    last_real = np.zeros((4, 4))
    last_real[:, 2] = 1.0
    assert measures.attention_distance(uniform, uniform, mask) == 0.0
    assert measures.attention_distance(first, last_real, mask) == pytest.approx(1.0)  # disjoint rows
    assert measures.attention_distance(uniform, first, mask) == pytest.approx(2 / 3)  # rows over 3 real keys
    padded = uniform.copy()
    padded[3] = [1.0, 0.0, 0.0, 0.0]  # the padded query's row
    padded[:, 3] = 0.9  # weight on the padded key, renormalised away
    assert measures.attention_distance(padded, uniform, mask) == pytest.approx(0.0)
