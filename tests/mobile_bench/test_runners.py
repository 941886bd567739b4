"""Runners say why they cannot run; those that can load, run, and time a cold start."""

from __future__ import annotations

import platform

import numpy as np
import pytest
from test_roofline import matmul_model

from pocketbert.mobile_bench.timing.runners import Runner, cold_start


@pytest.mark.skipif(platform.system() == "Darwin", reason="Core ML runs on macOS")
def test_core_ml_runner_explains_why_it_cannot_run_here(tmp_path):
    package = tmp_path / "Model.mlpackage"
    package.mkdir()
    reason = Runner("coreml", "mlpackage", package, "fp16", compute_units="CPU_AND_NE").unavailable_reason()
    assert "need macOS" in reason and platform.system() in reason


@pytest.mark.skipif(platform.system() == "Darwin", reason="Core AI runs on macOS 27")
def test_core_ai_runner_explains_why_it_cannot_run_here(tmp_path):
    asset = tmp_path / "Model.aimodel"
    asset.mkdir()
    runner = Runner("coreai", "aimodel", asset, "fp16", compute_units="neural_engine", lengths=(16, 128))
    reason = runner.unavailable_reason(1, 128)
    assert "Core AI runs on macOS 27" in reason and platform.system() in reason
    # its shapes: batch 1 at one of its functions' lengths, checked on every host
    assert runner.shape_reason(1, 128) is None
    assert "enumerated lengths 16, 128" in runner.shape_reason(1, 64)
    assert "batch 1" in runner.shape_reason(2, 16)


def test_core_ai_program_is_benched_where_the_export_made_one():
    from pocketbert.mobile_bench.steps.run import _runners
    from pocketbert.mobile_bench.timing.runners import COREAI_COMPUTE_UNITS

    plan = _runners({"student": {"aimodel-fp16": "S.aimodel", "onnx-fp32": "m.onnx"}}, [1], [1], 128, (16, 128))
    coreai = [r for _, r in plan if r.runtime == "coreai"]
    assert [r.compute_units for r in coreai] == list(COREAI_COMPUTE_UNITS)
    assert all(r.lengths == (16, 128) and r.label() == f"coreai aimodel fp16, {r.compute_units}" for r in coreai)


def test_missing_model_and_out_of_range_shapes_are_reported(tmp_path):
    assert "does not exist" in Runner("onnxruntime", "onnx", tmp_path / "gone.onnx", "fp32", threads=1).unavailable_reason()
    package = tmp_path / "Model.mlpackage"
    package.mkdir()
    runner = Runner("coreml", "mlpackage", package, "fp16", compute_units="ALL", max_sequence=64)
    assert runner.unavailable_reason(1, 128) is not None  # on macOS: the length bound; elsewhere: the OS
    # the shape bound itself, checked on every host
    assert "at most 64 tokens" in runner.shape_reason(1, 128)
    assert "batch 1" in runner.shape_reason(2, 32)
    assert runner.shape_reason(1, 64) is None


def test_onnxruntime_runner_runs_and_times_a_cold_start(tmp_path):
    path = matmul_model(tmp_path / "mm.onnx", 4, 16, 8)
    runner = Runner("onnxruntime", "onnx", path, "fp32", threads=1)
    assert runner.unavailable_reason() is None and runner.label() == "onnxruntime onnx fp32, 1 thread"
    inputs = {"x": np.ones((4, 16), dtype=np.float32)}
    (out,) = runner.load(task=None)(inputs)
    assert out.shape == (4, 8) and (out >= 0).all()  # Relu
    timing = cold_start(runner, None, inputs)
    assert timing["load_ms"] > 0 and timing["first_inference_ms"] > 0
    assert timing["total_ms"] == pytest.approx(timing["load_ms"] + timing["first_inference_ms"])


def test_bench_settings_are_checked():
    from pocketbert.core.errors import ConfigError
    from pocketbert.core.config.recipe import typed_section
    from pocketbert.mobile_bench.steps.run import bench_config

    assert bench_config({"bench": {"repeats": 30}}, None, None).model_dump() == typed_section("bench", {}).model_dump()  # an older recipe still runs
    assert bench_config({}, [1, 4], 2.0).threads == [1, 4]
    with pytest.raises(ConfigError, match="unknown key bench.treads"):
        bench_config({"bench": {"treads": [1]}}, None, None)
    with pytest.raises(ConfigError, match="sequence_sweep must be a list of whole numbers from 1 to"):
        bench_config({"bench": {"sequence_sweep": [0, 128]}}, None, None)


def test_pytorch_runner_loads_a_bilstm_student_through_its_architecture(tmp_path):
    """The student folder of a Tang run holds no Hugging Face model type: the runner must load it as a BiLSTM."""
    import torch
    from transformers import BertTokenizerFast

    from pocketbert.core.students.architectures import BILSTM
    from pocketbert.core.students.bilstm import BiLSTMClassifier, BiLSTMConfig
    from pocketbert.core.students.stage_folder import save_stage_model
    from pocketbert.core.tasks.registry import make_task

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"]) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(vocab))
    task = make_task("sentiment", ["negative", "positive"])
    model = BiLSTMClassifier(BiLSTMConfig(vocab_size=7, num_labels=2, embedding_dim=8, hidden_size=4, relu_size=6))
    (tmp_path / "student").mkdir()
    save_stage_model(model.eval(), tokenizer, tmp_path / "student", task, 16, architecture=BILSTM)
    inputs = {"input_ids": np.array([[2, 5, 3]], dtype=np.int64), "attention_mask": np.ones((1, 3), dtype=np.int64)}
    run = Runner("pytorch", "pytorch", tmp_path / "student", "fp32", threads=1).load(task)
    with torch.no_grad():
        expected = model(*(torch.from_numpy(v) for v in inputs.values())).logits.numpy()
    assert np.allclose(run(inputs).logits.numpy(), expected)
