"""Roofline arithmetic, FLOP counting on real ONNX graphs, and the device profiles' citations."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from pocketbert.core.errors import ConfigError
from pocketbert.mobile_bench.estimates import profiles, roofline
from pocketbert.mobile_bench.estimates.graph_cost import count_graph_cost, count_graph_costs, weight_bytes


def matmul_model(path, m: int, k: int, n: int):
    """x[m,k] · W[k,n] + b, then Relu: 2mkn + mn + mn FLOPs, k·n + n weights."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((k, n), dtype=np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal((n,), dtype=np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["z"]),
         helper.make_node("Relu", ["z"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", n])], [w, b])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


def test_flops_and_bytes_of_a_known_graph(tmp_path):
    m, k, n = 8, 64, 32
    path = matmul_model(tmp_path / "mm.onnx", m, k, n)
    cost = count_graph_cost(path, {"x": np.ones((m, k), dtype=np.float32)})
    assert cost.matmul_flops == 2 * m * k * n
    assert cost.flops == 2 * m * k * n + m * n + m * n
    assert cost.weight_bytes == weight_bytes(path) == 4 * (k * n + n)
    assert cost.io_bytes == 4 * (m * k + m * n)
    assert cost.minimum_bytes == cost.weight_bytes + cost.io_bytes
    # one session, several shapes: each counted as if alone
    wide, narrow = count_graph_costs(path, [{"x": np.ones((2 * m, k), dtype=np.float32)},
                                            {"x": np.ones((1, k), dtype=np.float32)}])
    assert wide.matmul_flops == 2 * cost.matmul_flops and narrow.matmul_flops == 2 * k * n
    assert wide.weight_bytes == narrow.weight_bytes == cost.weight_bytes


@pytest.mark.slow
def test_flops_of_the_exported_tiny_bert_match_the_formula(tmp_path, tiny_base):
    """Per layer: Q, K, V, output projections (4·2·s·h²), FFN (2·2·s·h·f), scores and context (2·2·s²·h)."""
    from transformers import BertConfig

    from pocketbert.export.programs.onnx_export import export_onnx
    from pocketbert.mobile_bench.timing.latency import synthetic_inputs
    from pocketbert.core.students.models import load_for_task
    from pocketbert.core.tasks.registry import make_task

    task = make_task("sentiment", ["negative", "positive"])
    model = load_for_task(str(tiny_base), task)
    path = export_onnx(model, task, tmp_path / "tiny.onnx")
    config = BertConfig.from_pretrained(tiny_base)
    s, h, f, layers = 24, config.hidden_size, config.intermediate_size, config.num_hidden_layers
    cost = count_graph_cost(path, synthetic_inputs(["input_ids", "attention_mask"], 1, s, config.vocab_size))
    per_layer = 4 * 2 * s * h * h + 2 * 2 * s * h * f + 2 * 2 * s * s * h
    head = 2 * h * h + 2 * h * 2  # pooler and classifier
    assert cost.matmul_flops == layers * per_layer + head


def test_roofline_floor_takes_the_slower_of_compute_and_memory():
    compute_bound = roofline.roofline_floor(flops=2e9, bytes_moved=1e6, peak_gflops=100, bandwidth_gbs=10)
    assert compute_bound["floor_ms"] == pytest.approx(20.0) and compute_bound["bound"] == "compute"
    assert compute_bound["memory_ms"] == pytest.approx(0.1)
    memory_bound = roofline.roofline_floor(flops=1e6, bytes_moved=1e9, peak_gflops=100, bandwidth_gbs=10)
    assert memory_bound["floor_ms"] == pytest.approx(100.0) and memory_bound["bound"] == "memory"
    assert memory_bound["ridge_point"] == pytest.approx(10.0)
    with pytest.raises(ValueError):
        roofline.roofline_floor(1, 1, 0, 1)


def test_device_estimates_use_each_units_peak_and_halve_fp16_weights():
    profile = {"memory_bandwidth_gbs": {"value": 50.0},
               "compute": {"cpu": {"fp32": {"peak_gflops": 100.0}},
                           "neural_engine": {"fp16": {"peak_gflops": 10000.0}}}}
    costs = {"student": {"flops": 1e9, "io_bytes": 0, "weight_bytes": {"fp32": 100e6}}}
    rows = {(r["compute_unit"], r["precision"]): r for r in roofline.device_estimates("phone", profile, costs)}
    cpu, ane = rows[("cpu", "fp32")], rows[("neural_engine", "fp16")]
    assert cpu["floor_ms"] == pytest.approx(10.0) and cpu["bound"] == "compute"  # 1 GFLOP at 100 GFLOP/s
    assert ane["bytes"] == pytest.approx(50e6)  # fp16 weights
    assert ane["floor_ms"] == pytest.approx(1.0) and ane["bound"] == "memory"  # 50 MB at 50 GB/s


def test_host_floor_is_fp32_only_and_uses_the_thread_counts_peak():
    host = {"memory_bandwidth_gbs": {"value": 10.0},
            "compute": {"cpu": {"fp32": {"peak_gflops": 200.0, "per_thread_count": {"1": 100.0, "2": 200.0}}}}}
    cost = {"flops": 1e9, "io_bytes": 0, "weight_bytes": {"fp32": 1e6}}
    one = roofline.host_floor({"precision": "fp32", "threads": 1}, host, cost)
    two = roofline.host_floor({"precision": "fp32", "threads": 2}, host, cost)
    assert one["floor_ms"] == pytest.approx(10.0) and two["floor_ms"] == pytest.approx(5.0)
    assert roofline.host_floor({"precision": "int8", "threads": 1}, host, cost) is None


def test_every_profile_number_cites_a_source():
    data = profiles.load_profiles()
    assert {"iphone-7-plus", "iphone-13", "iphone-15-pro", "pixel-8"} <= set(data["devices"])
    for device in data["devices"].values():
        resolved = profiles.resolve_sources(device, data["sources"])
        assert all(s.startswith("http") for s in resolved["memory_bandwidth_gbs"]["source"])
        for precisions in resolved["compute"].values():
            for entry in precisions.values():
                assert entry["peak_gflops"] > 0 and all(s.startswith("http") for s in entry["source"])
    assert "neural_engine" not in data["devices"]["iphone-7-plus"]["compute"]  # the A10 has none

    broken = copy.deepcopy(data)
    del broken["devices"]["iphone-13"]["compute"]["gpu"]["fp32"]["source"]
    with pytest.raises(ConfigError, match="iphone-13.compute.gpu.fp32 must cite"):
        profiles.validate_profiles(broken)
    broken = copy.deepcopy(data)
    broken["devices"]["pixel-8"]["memory_bandwidth_gbs"]["source"] = ["a-source-nobody-listed"]
    with pytest.raises(ConfigError, match="pixel-8.memory_bandwidth_gbs"):
        profiles.validate_profiles(broken)


@pytest.mark.slow
def test_measured_host_profile_is_shaped_like_a_phone_profile():
    host = profiles.measure_host([1, 2], "test cpu")
    fp32 = host["compute"]["cpu"]["fp32"]
    assert fp32["per_thread_count"]["2"] >= fp32["per_thread_count"]["1"] > 0
    assert host["memory_bandwidth_gbs"]["value"] > 0 and host["memory_bandwidth_gbs"]["source"]
