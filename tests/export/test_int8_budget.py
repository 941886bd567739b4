"""The int8 model's fp32 projections: chosen greedily on real ONNX Runtime agreement, within the size budget."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from pocketbert.export.checks import int8_budget
from pocketbert.export.programs import onnx_export
from pocketbert.core.students.inference import ort_forward, ort_session
from pocketbert.core.tasks.registry import SentimentTask


FFN_INPUT_SCALE = 4.0


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    config = BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                        intermediate_size=128, max_position_embeddings=64)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model, task = BertForSequenceClassification(config).eval(), SentimentTask(["a", "b", "c"])
    with torch.no_grad():  # large GELU outputs, as in a trained student: int8 reads the FFN projections' inputs coarsely
        for layer in model.bert.encoder.layer:
            layer.intermediate.dense.weight.mul_(FFN_INPUT_SCALE)
    folder = tmp_path_factory.mktemp("int8")
    onnx_export.export_onnx(model, task, folder / "model.onnx")
    rng = np.random.default_rng(0)
    inputs = {"input_ids": rng.integers(5, 200, size=(64, 12)), "attention_mask": np.ones((64, 12), np.int64)}
    reference = ort_forward(ort_session(folder / "model.onnx"), task)(inputs)

    def measure(path):
        return int8_budget.closeness(list(ort_forward(ort_session(path), task)(inputs)),
                                     list(reference))

    return folder, measure


@pytest.mark.slow
def test_candidates_are_the_ffn_output_projections(exported):
    folder, _ = exported
    assert len(onnx_export.fp32_nodes(folder / "model.onnx")) == 3


def test_closeness_ranks_by_logit_error_even_when_answers_all_agree():
    reference = [np.array([2.0, -1.0]), np.array([-0.5, 1.5])]
    near = [r + 0.01 for r in reference]
    far = [r + np.array([0.4, -0.4]) for r in reference]
    assert int8_budget.closeness(near, reference)["agreement"] == int8_budget.closeness(far, reference)["agreement"] == 1.0
    assert int8_budget.closeness(near, reference)["logit_error"] < int8_budget.closeness(far, reference)["logit_error"]


@pytest.mark.slow
@pytest.mark.parametrize("budget", [0.30, 0.45, 1.0])
def test_choice_stays_within_budget_and_records_its_trials(exported, tmp_path, budget):
    folder, measure = exported
    source = folder / "model.onnx"
    candidates = onnx_export.fp32_nodes(source)
    choice = int8_budget.choose_fp32_nodes(source, candidates, tmp_path, measure, onnx_export.quantize_int8, budget)
    assert set(choice["fp32_nodes"]) <= set(candidates)
    assert choice["trials"][0]["fp32_nodes"] == [] and len(choice["trials"]) >= 1
    if choice["fp32_nodes"]:
        assert choice["size_fraction"] <= budget
        assert choice["logit_error"] < choice["trials"][0]["logit_error"]  # kept only because it helped
    chosen = [t for t in choice["trials"] if t["fp32_nodes"] == choice["fp32_nodes"]]
    assert chosen and chosen[0]["logit_error"] == choice["logit_error"]
    # It stops only when no fitting projection helps any more: whatever the host's int8 arithmetic makes of the
    # numbers, the last round's trials that fit are none of them better than the choice.
    last_round = [t for t in choice["trials"] if len(t["fp32_nodes"]) == len(choice["fp32_nodes"]) + 1
                  and t["fp32_nodes"][:-1] == choice["fp32_nodes"] and t["size_fraction"] <= budget]
    assert all(t["logit_error"] >= choice["logit_error"] for t in last_round)
    first_round = [t for t in choice["trials"] if len(t["fp32_nodes"]) == 1 and t["size_fraction"] <= budget]
    if any(t["logit_error"] < choice["trials"][0]["logit_error"] for t in first_round):
        assert choice["fp32_nodes"]  # a projection that helps and fits is kept
    assert not list(tmp_path.glob("trial-*.onnx"))  # trial models are removed


@pytest.mark.slow
def test_the_choice_is_the_same_every_time(exported, tmp_path):
    folder, measure = exported
    source = folder / "model.onnx"
    candidates = onnx_export.fp32_nodes(source)
    first, second = (int8_budget.choose_fp32_nodes(source, candidates, tmp_path / name, measure,
                                                   onnx_export.quantize_int8, 1.0, 1.5)
                     for name in ("a", "b") if (tmp_path / name).mkdir() is None)
    assert first == second


@pytest.mark.slow
def test_sizes_grow_with_each_fp32_projection(exported, tmp_path):
    folder, _ = exported
    source = folder / "model.onnx"
    nodes = onnx_export.fp32_nodes(source)
    sizes = [onnx_export.quantize_int8(source, tmp_path / f"k{k}.onnx", nodes[:k]).stat().st_size for k in range(4)]
    assert sizes == sorted(sizes) and sizes[0] < sizes[3]


@pytest.mark.slow
def test_the_latency_cost_is_counted_on_the_graph(exported):
    """Each weight product's multiply-adds from the model's shapes, and an fp32 projection's cost at FP32_MAC_COST."""
    folder, _ = exported
    macs = int8_budget.weight_macs(folder / "model.onnx")
    hidden, inner, layers, labels = 32, 128, 3, 2  # BertConfig's default two labels: the classifier's width
    per_layer = 4 * hidden * hidden + 2 * hidden * inner  # query, key, value, output; the FFN's two products
    assert sum(macs.values()) == layers * per_layer + hidden * hidden + hidden * labels  # + pooler, classifier
    node = onnx_export.fp32_nodes(folder / "model.onnx")[0]
    assert macs[node] == inner * hidden
    expected = 1 + (int8_budget.FP32_MAC_COST - 1) * inner * hidden / sum(macs.values())
    assert int8_budget.graph_latency_ratio(macs, [node]) == pytest.approx(expected)
    assert int8_budget.graph_latency_ratio(macs, []) == 1.0


@pytest.mark.slow
def test_a_latency_budget_keeps_no_fp32_node_that_costs_more_than_it(exported, tmp_path):
    folder, measure = exported
    source = folder / "model.onnx"
    candidates = onnx_export.fp32_nodes(source)
    macs = int8_budget.weight_macs(source)
    one = int8_budget.graph_latency_ratio(macs, candidates[:1])
    assert one > int8_budget.INT8_LATENCY_BUDGET  # a tenth of this model's products: more than the default allows
    costly = int8_budget.choose_fp32_nodes(source, candidates, tmp_path, measure, onnx_export.quantize_int8, 1.0,
                                           int8_budget.INT8_LATENCY_BUDGET)
    assert costly["fp32_nodes"] == [] and costly["latency_budget"] == int8_budget.INT8_LATENCY_BUDGET
    assert [t["fp32_nodes"] for t in costly["trials"]] == [[]]  # nothing that cannot fit is even quantized
    room_for_one = int8_budget.choose_fp32_nodes(source, candidates, tmp_path, measure, onnx_export.quantize_int8,
                                                 1.0, (one + int8_budget.graph_latency_ratio(macs, candidates[:2])) / 2)
    assert len(room_for_one["fp32_nodes"]) <= 1
    assert all(t["latency_ratio"] <= room_for_one["latency_budget"] for t in room_for_one["trials"])
    assert not list(tmp_path.glob("*.onnx"))  # trial files are cleaned up
