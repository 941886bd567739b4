"""How sure a compressed program's gate is, and that dynamic int8 is gated as the apps run it (one input per call)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from pocketbert.core.students.inference import ort_forward, ort_session
from pocketbert.core.tasks.data import QAExample
from pocketbert.core.tasks.registry import QATask, SentimentTask, TextFeature
from pocketbert.export.checks import parity
from pocketbert.export.programs import onnx_export, variants


def qa_example(answer: str) -> QAExample:
    return QAExample(id=answer, question="who?", context=f"It was {answer}.", answers=((answer, 7),))


def test_drop_standard_error_of_qa_f1_by_hand():
    examples = [qa_example(name) for name in ("Ada", "Alan", "Grace", "Edsger")]
    theirs = ["Ada", "Alan", "Grace", "Edsger"]
    ours = ["Ada", "Alan", "Grace", "Dijkstra"]  # one question from F1 100 to 0
    # drops (100, 0, 0, 0): sample standard deviation 50, over the square root of 4 questions
    assert parity.drop_standard_error(QATask(), examples, [], ours, theirs) == pytest.approx(25.0)
    assert parity.drop_standard_error(QATask(), examples, [], theirs, theirs) == 0.0


def test_drop_standard_error_of_accuracy_by_hand():
    task = SentimentTask(["negative", "positive"])
    features = [TextFeature([1, 2], label) for label in (0, 1, 1, 0, 1)]
    theirs, ours = [0, 1, 1, 1, 1], [0, 1, 0, 0, 1]  # one answer lost, one gained: drops (0, 0, 1, -1, 0)
    assert parity.drop_standard_error(task, [None] * 5, features, ours, theirs) == pytest.approx(np.sqrt(0.5) / np.sqrt(5))


def test_a_refused_compressed_program_says_how_sure_its_gate_is():
    task = QATask()
    examples = [qa_example(name) for name in ("Ada", "Alan", "Grace", "Edsger")]
    theirs, ours = ["Ada", "Alan", "Grace", "Edsger"], ["Ada", "x", "Grace", "y"]
    result = parity._with_standard_error(
        parity._result(task, ours, theirs, 0.5, task.score_answers(examples, [], ours),
                       task.score_answers(examples, [], theirs), "model.int8.onnx", "onnxruntime", "int8",
                       parity.COMPRESSED_GATE), task, examples, [], ours, theirs)
    assert not result.passed
    assert result.drop_standard_error == pytest.approx(100 / np.sqrt(3) / 2)  # drops (0, 100, 0, 100)
    assert f"standard error on these 4: {100 / np.sqrt(3) / 2:.4f}" in result.failure()


def test_dynamic_int8_programs_are_gated_one_input_per_call():
    dynamic = [v for v in variants.VARIANTS.values()
               if (v.name == "onnx-int8" or "onnx-int8" in v.reads)
               and not (v.runtime.takes_text or v.runtime.gives_answers)]  # those two run one input per call anyway
    assert {v.name for v in dynamic} == {"onnx-int8", "ort"}
    assert all(v.runtime.batch_size == variants.ONE_INPUT_PER_CALL for v in dynamic)


def test_dynamic_int8_answers_one_input_differently_in_a_batch(tmp_path):
    """Why the gate runs one input per call: the activation scale is the whole call's, so a padded companion moves a
    row's logits (fp32 gives the same logits either way)."""
    config = BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model, task = BertForSequenceClassification(config).eval(), SentimentTask(["a", "b"])
    with torch.no_grad():  # large activations, as in a trained student, so that int8 reads them coarsely
        for layer in model.bert.encoder.layer:
            layer.intermediate.dense.weight.mul_(ACTIVATION_SCALE)
        model.classifier.weight.mul_(ACTIVATION_SCALE)
    onnx_export.export_onnx(model, task, tmp_path / "model.onnx")
    onnx_export.quantize_int8(tmp_path / "model.onnx", tmp_path / "model.int8.onnx", keep_fp32=[])
    rng = np.random.default_rng(0)
    alone = {"input_ids": rng.integers(5, 200, size=(1, 8)), "attention_mask": np.ones((1, 8), np.int64)}
    companion = rng.integers(5, 200, size=(1, 8))
    batch = {"input_ids": np.concatenate([alone["input_ids"], companion]),
             "attention_mask": np.ones((2, 8), np.int64)}
    for name, moves in (("model.onnx", False), ("model.int8.onnx", True)):
        forward = ort_forward(ort_session(tmp_path / name), task)
        difference = float(np.max(np.abs(forward(alone)[0] - forward(batch)[0])))
        assert (difference > parity.FP32_MAX_ABS_DIFF) == moves, (name, difference)


ACTIVATION_SCALE = 8.0


def tiny_int8_pair(tmp_path, activation_scale: str):
    config = BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model, task = BertForSequenceClassification(config).eval(), SentimentTask(["a", "b"])
    with torch.no_grad():
        for layer in model.bert.encoder.layer:
            layer.intermediate.dense.weight.mul_(ACTIVATION_SCALE)
        model.classifier.weight.mul_(ACTIVATION_SCALE)
    fp32 = onnx_export.export_onnx(model, task, tmp_path / "model.onnx")
    int8 = onnx_export.quantize_int8(fp32, tmp_path / f"{activation_scale}.onnx", keep_fp32=[],
                                     activation_scale=activation_scale)
    return task, fp32, int8


def test_per_token_int8_answers_each_input_as_if_alone(tmp_path):
    """One scale per token: a companion in the call moves no other input's logits, and the logits lie closer to
    fp32's than with one scale for the whole call (each input run alone, as an app runs it)."""
    rng = np.random.default_rng(1)
    ids = rng.integers(5, 200, size=(4, 10))
    batch = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    errors = {}
    for scale in ("per_call", "per_token"):
        task, fp32, int8 = tiny_int8_pair(tmp_path, scale)
        reference = ort_forward(ort_session(fp32), task)(batch)
        together = ort_forward(ort_session(int8), task)(batch)
        alone = np.concatenate([ort_forward(ort_session(int8), task)({k: v[i:i + 1] for k, v in batch.items()})
                                for i in range(len(ids))])
        if scale == "per_token":
            np.testing.assert_allclose(together, alone, atol=PER_ROW_FLOAT_NOISE)
        errors[scale] = float(np.abs(alone - reference).mean())
    assert errors["per_token"] < errors["per_call"], errors


PER_ROW_FLOAT_NOISE = 1e-5  # the same int8 products, other float summation orders


@pytest.mark.slow
def test_per_token_int8_converts_for_onnx_runtime_mobile(tmp_path):
    task, _, int8 = tiny_int8_pair(tmp_path, "per_token")
    ort, operators = onnx_export.convert_to_ort(int8, tmp_path / "model.ort", tmp_path / "operators.config")
    assert "MatMulInteger" in operators.read_text()
    ids = np.arange(5, 15)[None, :]
    batch = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    np.testing.assert_allclose(ort_forward(ort_session(ort), task)(batch), ort_forward(ort_session(int8), task)(batch),
                               atol=PER_ROW_FLOAT_NOISE)
