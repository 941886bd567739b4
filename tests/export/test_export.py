"""Exported models on their own runtimes against the PyTorch model, and the parity gate catching a broken export."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForQuestionAnswering, BertForSequenceClassification

from pocketbert.export.checks import parity
from pocketbert.export.programs import coreml, onnx_export
from pocketbert.export.evaluators.mil_eval import MILEvaluator
from pocketbert.export.programs.variants import VARIANTS
from pocketbert.core.students.export_wrapper import ExportWrapper
from pocketbert.core.tasks.data import TextExample
from pocketbert.core.students.inference import batched_logits, ort_forward, ort_session, torch_forward
from pocketbert.core.tasks.registry import QATask, SentimentTask

# second, beside the file that builds the shared export: it converts without the CLI, so it never waits for the
# first export's Swift and Kotlin builds (a file that exports would; its minutes tie with test_recipes_cli's)

ONNX_FP32_TOLERANCE = 1e-4
INT8_TOLERANCE = 0.05
COREML_FP16_TOLERANCE = 0.02
ONNX_FP16_TOLERANCE = 0.02


def tiny(cls, **extra):
    config = BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, **extra)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    return cls(config).eval()


def batch(n=3, length=20, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 200, size=(n, length))
    mask = np.ones_like(ids)
    mask[1, length // 2:] = 0  # a padded row: the mask must reach attention
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": (np.arange(length) > 5).astype(np.int64)[None].repeat(n, 0)}


@pytest.fixture(scope="module")
def sentiment_exports(tmp_path_factory):
    model, task = tiny(BertForSequenceClassification, num_labels=3), SentimentTask(["a", "b", "c"])
    folder = tmp_path_factory.mktemp("sentiment")
    onnx_export.export_onnx(model, task, folder / "model.onnx")
    onnx_export.quantize_int8(folder / "model.onnx", folder / "model.int8.onnx")
    onnx_export.convert_fp16(folder / "model.onnx", folder / "model.fp16.onnx")
    onnx_export.convert_to_ort(folder / "model.int8.onnx", folder / "model.ort", folder / "ops.config")
    coreml.convert_to_coreml(model, task, 64, task.label_names, "test").save(str(folder / "T.mlpackage"))
    return model, task, folder


def reference(model, task, b):
    return torch_forward(model, task)(b)


@pytest.mark.slow
def test_onnx_fp32_matches_torch_at_a_new_length(sentiment_exports):
    model, task, folder = sentiment_exports
    b = batch(length=27)  # traced at 16: the sequence axis must be dynamic
    out = ort_forward(ort_session(folder / "model.onnx"), task)(b)
    assert np.abs(out - reference(model, task, b)).max() < ONNX_FP32_TOLERANCE


@pytest.mark.slow
def test_fp16_onnx_keeps_io_types_and_stays_close(sentiment_exports):
    import onnx

    model, task, folder = sentiment_exports
    graph = onnx.load(str(folder / "model.fp16.onnx")).graph
    assert graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT  # fp32 logits for the app
    assert any(t.data_type == onnx.TensorProto.FLOAT16 for t in graph.initializer)
    b = batch()
    out = ort_forward(ort_session(folder / "model.fp16.onnx"), task)(b)
    assert np.abs(out - reference(model, task, b)).max() < ONNX_FP16_TOLERANCE


@pytest.mark.slow
def test_int8_and_ort_stay_close(sentiment_exports):
    model, task, folder = sentiment_exports
    b = batch()
    ref = reference(model, task, b)
    for name in ("model.int8.onnx", "model.ort"):
        out = ort_forward(ort_session(folder / name), task)(b)
        assert np.abs(out - ref).max() < INT8_TOLERANCE
    operators = (folder / "ops.config").read_text()
    assert "MatMulInteger" in operators  # the .ort is the int8 graph
    assert "runtime optimizations" in operators  # and carries its runtime optimizations (the list names both forms)


@pytest.mark.slow
def test_coreml_package_evaluates_like_torch(sentiment_exports):
    model, task, folder = sentiment_exports
    b = batch()
    out = coreml.coreml_forward(folder / "T.mlpackage", task)(b)
    assert np.abs(out - reference(model, task, b)).max() < COREML_FP16_TOLERANCE


@pytest.mark.slow
def test_coreml_metadata_names_inputs_and_labels(sentiment_exports):
    _, _, folder = sentiment_exports
    spec = coreml.load_mlpackage(folder / "T.mlpackage").get_spec()
    assert [i.name for i in spec.description.input] == ["input_ids", "attention_mask"]
    assert spec.description.metadata.userDefined["labels"] == "a,b,c"
    assert spec.specificationVersion >= 7  # iOS 16


@pytest.mark.slow
def test_qa_model_exports_both_logits(tmp_path):
    model, task = tiny(BertForQuestionAnswering), QATask()
    onnx_export.export_onnx(model, task, tmp_path / "qa.onnx")
    b = batch(n=2, length=24)
    out = ort_forward(ort_session(tmp_path / "qa.onnx"), task)(b)
    assert out.shape == (2, 24, 2)
    assert np.abs(out - reference(model, task, b)).max() < ONNX_FP32_TOLERANCE


def test_parity_gate_catches_a_wrong_mask_constant(tmp_path):
    """An export whose padding mask does nothing changes answers on padded inputs; the gate must fail it."""
    # Wide initial weights, so that attending to padding visibly moves the logits of a random model.
    model = tiny(BertForSequenceClassification, num_labels=2, initializer_range=0.5)
    task = SentimentTask(["neg", "pos"])
    rng = np.random.default_rng(1)
    features = []
    from pocketbert.core.tasks.registry import TextFeature
    for i in range(40):
        features.append(TextFeature(list(rng.integers(5, 200, size=int(rng.integers(3, 30)))), i % 2))
    examples = [TextExample("x", f.label) for f in features]
    good = batched_logits(task, features, 0, 8, torch_forward(model, task))

    broken = ExportWrapper(model, task, additive_mask=True, mask_value=0.0)  # mask ignored: pads are attended

    def broken_forward(b):
        with torch.no_grad():
            return broken(torch.from_numpy(b["input_ids"]), torch.from_numpy(b["attention_mask"]))[0].numpy()

    bad = batched_logits(task, features, 0, 8, broken_forward)
    ok = parity.compare(task, examples, features, good, good, {}, "model.onnx", "onnxruntime", "fp32", parity.FP32_GATE)
    caught = parity.compare(task, examples, features, good, bad, {}, "model.onnx", "onnxruntime", "fp32", parity.FP32_GATE)
    assert ok.passed and ok.agreement == 1.0
    assert not caught.passed
    assert caught.max_abs_diff > parity.FP32_MAX_ABS_DIFF
    assert "model.onnx" in caught.failure() and "max |diff|" in caught.failure()


@pytest.mark.slow
def test_parity_gate_catches_a_corrupted_weight(sentiment_exports, tmp_path):
    import onnx
    from onnx import numpy_helper

    model, task, folder = sentiment_exports
    proto = onnx.load(str(folder / "model.onnx"))
    biggest = max(proto.graph.initializer, key=lambda t: np.prod(t.dims))
    values = numpy_helper.to_array(biggest).copy()
    values[...] = values[::-1] * 5.0
    biggest.CopyFrom(numpy_helper.from_array(values, biggest.name))
    onnx.save(proto, str(tmp_path / "corrupt.onnx"))
    b = batch(n=3)
    out = ort_forward(ort_session(tmp_path / "corrupt.onnx"), task)(b)
    ref = reference(model, task, b)
    from pocketbert.core.tasks.registry import TextFeature
    feats = [TextFeature(list(b["input_ids"][i][: int(b["attention_mask"][i].sum())]), 0) for i in range(3)]
    result = parity.compare(task, [TextExample("x", 0)] * 3, feats, list(ref), list(out), {}, "corrupt.onnx",
                            "onnxruntime", "fp32", parity.FP32_GATE)
    assert not result.passed


@pytest.mark.slow
@pytest.mark.parametrize("variant, tolerance", [("int8", 0.02), ("6bit", 0.05), ("4bit", 0.2), ("int4-block", 0.2)])
def test_compressed_core_ml_variants_are_smaller_and_evaluate(sentiment_exports, tmp_path, variant, tolerance):
    from pocketbert.core.run.manifest import path_size

    model, task, folder = sentiment_exports
    program = coreml.convert_to_coreml(model, task, 64, task.label_names, "test", VARIANTS[variant].minimum_ios)
    package = tmp_path / f"T.{variant}.mlpackage"
    coreml.compress(program, variant).save(str(package))
    assert path_size(package) < path_size(folder / "T.mlpackage")
    b = batch()
    got = coreml.coreml_forward(package, task)(b)
    assert np.abs(got - reference(model, task, b)).max() < tolerance
    spec = coreml.load_mlpackage(package).get_spec()
    assert spec.description.metadata.author == "pocketbert"  # compression keeps what Xcode shows


@pytest.mark.slow
def test_unknown_core_ml_variant_is_refused(sentiment_exports):
    from pocketbert.core.errors import ExportError

    model, task, _ = sentiment_exports
    with pytest.raises(ExportError, match="unknown Core ML compression"):
        coreml.compress(coreml.convert_to_coreml(model, task, 64, task.label_names, "test"), "2bit")


@pytest.mark.slow
def test_ort_mobile_usability_verdict_per_provider(sentiment_exports):
    from pocketbert.export.checks.mobile_usability import PROVIDERS, XNNPACK, usability

    _, _, folder = sentiment_exports
    verdict = usability(folder / "model.onnx")
    assert set(verdict) == set(PROVIDERS) | {XNNPACK}
    for name in PROVIDERS:
        provider = verdict[name]
        for shapes in ("dynamic_shapes", "fixed_shapes"):
            part = provider[shapes]
            assert part["suitability"] in ("YES", "MAYBE", "NO")
            assert 0 <= part["supported_nodes"] <= part["nodes"] and part["nodes"] > 0
        # fixing the shapes can only let a provider take more nodes
        assert provider["fixed_shapes"]["supported_nodes"] >= provider["dynamic_shapes"]["supported_nodes"]
        assert provider["advice"]


@pytest.mark.slow
def test_xnnpack_takes_float_weight_products_and_no_dynamic_int8_one(sentiment_exports):
    """XNNPACK's node checks: float MatMul/Gemm with constant weights yes, MatMulInteger never; the attention
    softmax only once the sequence length is fixed (its last axis must be static)."""
    from pocketbert.export.checks.mobile_usability import XNNPACK, preferred_provider, usability

    _, _, folder = sentiment_exports
    fp32 = usability(folder / "model.onnx", fixed_length=24)[XNNPACK]
    assert fp32["dynamic_shapes"]["weight_products"] > 0
    assert fp32["dynamic_shapes"]["weight_share"] == 1.0 and fp32["dynamic_shapes"]["suitability"] == "YES"
    assert "Softmax" not in fp32["dynamic_shapes"]["ops_taken"] and "Softmax" in fp32["fixed_shapes"]["ops_taken"]
    int8 = usability(folder / "model.int8.onnx")
    # only the FFN output projections quantize_int8 left in fp32 remain XNNPACK's
    kept_fp32 = len(onnx_export.fp32_nodes(folder / "model.onnx"))
    assert int8[XNNPACK]["dynamic_shapes"]["weight_products_taken"] == kept_fp32
    assert int8[XNNPACK]["dynamic_shapes"]["suitability"] == "NO"
    assert preferred_provider(int8) == "CPU" and preferred_provider({XNNPACK: fp32}) == XNNPACK


@pytest.mark.slow
def test_fixed_shape_variant_takes_padded_input_and_answers_like_torch(sentiment_exports, tmp_path):
    model, task, _ = sentiment_exports
    package = tmp_path / "T.fixed.mlpackage"
    coreml.convert_to_coreml(model, task, 24, task.label_names, "test", fixed=True).save(str(package))
    spec = coreml.load_mlpackage(package).get_spec()
    assert list(spec.description.input[0].type.multiArrayType.shape) == [1, 24]
    assert not spec.description.input[0].type.multiArrayType.HasField("shapeRange")
    program_input = spec.mlProgram.functions["main"].inputs[0].type.tensorType
    assert [d.constant.size for d in program_input.dimensions] == [1, 24]  # fixed in the program itself
    b = batch(length=20)  # row 1 is padded: the mask must hide the pad positions in the fixed program too
    got = coreml.coreml_forward(package, task)(b)
    assert np.abs(got - reference(model, task, b)).max() < COREML_FP16_TOLERANCE


@pytest.mark.slow
def test_classifier_variant_outputs_a_label_and_probabilities(sentiment_exports, tmp_path):
    model, task, _ = sentiment_exports
    package = tmp_path / "T.classifier.mlpackage"
    coreml.convert_to_coreml(model, task, 32, task.label_names, "test", classifier=True).save(str(package))
    spec = coreml.load_mlpackage(package).get_spec()
    assert spec.description.predictedFeatureName == coreml.CLASSIFIER_LABEL
    assert {o.name for o in spec.description.output} == {coreml.CLASSIFIER_LABEL, coreml.CLASSIFIER_PROBABILITIES}
    b = batch(length=12)
    expected = torch.softmax(torch.from_numpy(reference(model, task, b)), dim=-1).numpy()
    evaluator = MILEvaluator(package)
    for i in range(3):
        n = int(b["attention_mask"][i].sum())
        out = evaluator.predict({k: b[k][None, i:i + 1, :n] for k in task.input_names})
        probabilities = np.array([out[coreml.CLASSIFIER_PROBABILITIES][0][label] for label in task.label_names])
        assert np.abs(probabilities - expected[i]).max() < COREML_FP16_TOLERANCE
        assert out[coreml.CLASSIFIER_LABEL][0] == task.label_names[int(expected[i].argmax())]


@pytest.mark.slow
@pytest.mark.parametrize("int8, tolerance", [(False, ONNX_FP32_TOLERANCE), (True, INT8_TOLERANCE)])
def test_executorch_program_runs_like_torch_at_lengths_it_was_not_traced_at(tmp_path, int8, tolerance):
    from pocketbert.core.students.architectures import BERT_FAMILY
    from pocketbert.export.programs.executorch_export import executorch_forward, export_pte

    for cls, task in ((BertForSequenceClassification, SentimentTask(["a", "b", "c"])),
                      (BertForQuestionAnswering, QATask())):
        model = tiny(cls, **({"num_labels": 3} if task.name == "sentiment" else {}))
        path = export_pte(model, task, BERT_FAMILY, tmp_path / f"{task.name}.pte", 64, int8=int8)
        for length in (5, 27, 64):  # traced at 16, up to max_length
            b = batch(length=length)
            b["attention_mask"][:] = 1  # each sequence runs at its own length: no padding to compare
            got = executorch_forward(path, task)(b)
            assert got.shape == reference(model, task, b).shape
            assert np.abs(got - reference(model, task, b)).max() < tolerance, (task.name, length)


@pytest.mark.slow
def test_a_core_ml_delegated_program_carries_the_students_function(tmp_path):
    from pocketbert.core.students.architectures import BERT_FAMILY
    from pocketbert.export.programs.executorch_export import coreml_delegate_forward, coreml_delegate_package, export_pte

    for cls, task in ((BertForSequenceClassification, SentimentTask(["a", "b", "c"])),
                      (BertForQuestionAnswering, QATask())):
        model = tiny(cls, **({"num_labels": 3} if task.name == "sentiment" else {}))
        path = export_pte(model, task, BERT_FAMILY, tmp_path / f"{task.name}.coreml.pte", 64, coreml=True)
        unpacked = coreml_delegate_package(path, tmp_path / f"{task.name}-unpacked")
        assert unpacked.is_dir() and (unpacked / "Manifest.json").is_file()  # a real .mlpackage, as Core ML loads it
        for length in (5, 27):  # traced at 16: the program takes other lengths
            b = batch(length=length)
            b["attention_mask"][:] = 1
            got = coreml_delegate_forward(path, task)(b)
            assert np.abs(got - reference(model, task, b)).max() < COREML_FP16_TOLERANCE, (task.name, length)
