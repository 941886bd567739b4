"""The int8 model's fp32 projections: chosen greedily on real ONNX Runtime agreement, within the size budget."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from pocketbert.export import int8_budget, onnx_export
from pocketbert.core.inference import ort_forward, ort_session
from pocketbert.core.tasks import SentimentTask


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


def test_candidates_are_the_ffn_output_projections(exported):
    folder, _ = exported
    assert len(onnx_export.fp32_nodes(folder / "model.onnx")) == 3


def test_closeness_ranks_by_logit_error_even_when_answers_all_agree():
    reference = [np.array([2.0, -1.0]), np.array([-0.5, 1.5])]
    near = [r + 0.01 for r in reference]
    far = [r + np.array([0.4, -0.4]) for r in reference]
    assert int8_budget.closeness(near, reference)["agreement"] == int8_budget.closeness(far, reference)["agreement"] == 1.0
    assert int8_budget.closeness(near, reference)["logit_error"] < int8_budget.closeness(far, reference)["logit_error"]


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
    if budget == 1.0:  # room for every candidate: it stops only when no fp32 projection helps any more
        assert choice["fp32_nodes"] and choice["logit_error"] <= min(t["logit_error"] for t in choice["trials"])
    assert not list(tmp_path.glob("trial-*.onnx"))  # trial models are removed


def test_sizes_grow_with_each_fp32_projection(exported, tmp_path):
    folder, _ = exported
    source = folder / "model.onnx"
    nodes = onnx_export.fp32_nodes(source)
    sizes = [onnx_export.quantize_int8(source, tmp_path / f"k{k}.onnx", nodes[:k]).stat().st_size for k in range(4)]
    assert sizes == sorted(sizes) and sizes[0] < sizes[3]


SLOWER_THAN_BUDGET = 1.5  # what every fp32 node costs in the next test, against the latency budget below


def test_a_latency_budget_keeps_no_fp32_node_that_costs_more_time(exported, tmp_path):
    folder, measure = exported
    source = folder / "model.onnx"
    candidates = onnx_export.fp32_nodes(source)
    free = int8_budget.choose_fp32_nodes(source, candidates, tmp_path, measure, onnx_export.quantize_int8, 1.0,
                                         lambda trial, base: 1.0, int8_budget.INT8_LATENCY_BUDGET)
    assert free["fp32_nodes"]  # when fp32 costs nothing, the nodes that help are kept
    costly = int8_budget.choose_fp32_nodes(source, candidates, tmp_path, measure, onnx_export.quantize_int8, 1.0,
                                           lambda trial, base: SLOWER_THAN_BUDGET, int8_budget.INT8_LATENCY_BUDGET)
    assert costly["fp32_nodes"] == [] and costly["latency_budget"] == int8_budget.INT8_LATENCY_BUDGET
    assert all(t["latency_ratio"] == SLOWER_THAN_BUDGET for t in costly["trials"] if t["fp32_nodes"])
    assert not list(tmp_path.glob("*.onnx"))  # trial files are cleaned up
