"""The real CLI, end to end, on a tiny teacher built from a config; then the exported files used as an app would."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from helpers import (assert_exhaustive_tokenizer_check, error_line, linked_copy, named_in_readme, run_cli,
                     transformers_js_or_skip, JS_DIR)

from pocketbert.core.run.user_paths import OUTPUT_MARKER
from pocketbert.core.run.run_files import SWIFT_TOKENIZER_PACKAGE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sentiment_run(tmp_path_factory, exported_run):
    """The session's exported tiny run, linked into a folder of this module's own: bench writes beside it."""
    return linked_copy(exported_run, tmp_path_factory.mktemp("runs") / "tiny")


def test_stages_write_the_run_directory_contract(sentiment_run):
    from pocketbert.core.run import run_files

    for stage in (run_files.TEACHER_DIR, run_files.STUDENT_DIR, run_files.EXPORT_DIR):
        manifest = json.loads((sentiment_run / stage / run_files.MANIFEST).read_text())
        assert manifest["versions"]["torch"] == "2.13.0" or manifest["versions"]["torch"].startswith("2.13.0")
        assert all(len(v["sha256"]) == 64 for v in manifest["inputs"].values())
    export = sentiment_run / run_files.EXPORT_DIR
    for name in (run_files.ONNX_FP32, run_files.ONNX_INT8, run_files.ORT_MODEL, run_files.ORT_REQUIRED_OPERATORS,
                 run_files.PARITY, run_files.LABELS, run_files.MODEL_CONFIG, *run_files.TOKENIZER_FILES):
        assert (export / name).is_file(), name
    assert (export / run_files.coreml_package_name("PocketBertSentiment")).is_dir()
    assert not [p for p in sentiment_run.iterdir() if p.name.startswith(".")], "temporary folders left behind"


def test_student_has_half_the_layers(sentiment_run):
    teacher = json.loads((sentiment_run / "teacher" / "config.json").read_text())
    student = json.loads((sentiment_run / "student" / "config.json").read_text())
    assert student["num_hidden_layers"] == teacher["num_hidden_layers"] // 2


def test_distillation_reports_its_teacher_cache(sentiment_run):
    report = json.loads((sentiment_run / "student" / "manifest.json").read_text())["metrics"]["teacher_cache"]
    assert report["used"] and report["total_bytes"] <= report["limit_bytes"]


def test_every_export_passed_parity(sentiment_run):
    results = json.loads((sentiment_run / "export" / "parity.json").read_text())
    assert {r["artifact"] for r in results} == {
        "model.onnx", "model.fp16.onnx", "model.int8.onnx", "model.qdq.onnx", "model.ort", "model.qdq.ort",
        "model.text.onnx", "model.text.int8.onnx", "model.text.ort", "model.pte", "model.int8.pte",
        "model.coreml.pte", "PocketBertSentiment.mlpackage",
        "PocketBertSentiment.6bit.mlpackage", "PocketBertSentiment.enumerated.mlpackage",
        "PocketBertSentiment.ane.mlpackage", "PocketBertSentiment.aimodel", "PocketBertSentiment.6bit.aimodel",
        "PocketBertSentiment.ane.aimodel", "PocketBertSentiment.ane-6bit.aimodel"}
    assert all(r["passed"] for r in results)
    assert all(r["seconds_per_sequence"] > 0 for r in results)
    # the Apple programs' evaluators run export.coreml_parity_examples
    assert all(r["n_examples"] == 48 for r in results
               if "MIL interpreter" not in r["runtime"] and "Core AI" not in r["runtime"])
    text_in = {r["artifact"]: r for r in results}["model.text.onnx"]
    assert text_in["runtime"] == "onnxruntime + extensions" and text_in["agreement"] >= 0.99  # fed raw text
    pte = {r["artifact"]: r for r in results}["model.pte"]
    assert pte["runtime"] == "ExecuTorch (XNNPACK)" and pte["agreement"] == 1.0  # run by ExecuTorch's own runtime
    # The Core ML program inside the Core ML-delegated .pte, taken out of the saved file and evaluated op by op.
    assert {r["artifact"]: r for r in results}["model.coreml.pte"]["runtime"].startswith("Core ML delegate")
    enumerated = {r["artifact"]: r for r in results}["PocketBertSentiment.enumerated.mlpackage"]
    manifest = json.loads((sentiment_run / "export" / "manifest.json").read_text())
    # Core AI: the saved program read back and evaluated op by op, one entry point per enumerated length
    coreai = {r["artifact"]: r for r in results}["PocketBertSentiment.aimodel"]
    assert coreai["runtime"] == "Core AI evaluator (numpy)" and coreai["by_length"]
    assert manifest["config"]["coreai_minimum_os"] == {f"coreai-{v}": "iOS27" for v in ("fp16", "6bit", "ane", "ane-6bit")}
    lengths = manifest["metrics"]["coreml_enumerated_lengths"]["lengths"]
    assert lengths[-1] == manifest["config"]["max_length"] and lengths == sorted(set(lengths))
    assert list(enumerated["by_length"]) == [str(n) for n in lengths]  # every length checked on its own
    assert all(r["passed"] and r["inputs"] > 0 for r in enumerated["by_length"].values())
    assert manifest["metrics"]["coreml_warnings"] and "coremltools#2730" in manifest["metrics"]["coreml_warnings"][0]
    # the Neural Engine layout: every function (one per length bucket) gated on its own
    ane = {r["artifact"]: r for r in results}["PocketBertSentiment.ane.mlpackage"]
    assert list(ane["by_length"]) == [str(n) for n in lengths] and ane["agreement"] >= 0.99
    assert all(r["passed"] and r["inputs"] > 0 for r in ane["by_length"].values())
    assert_exhaustive_tokenizer_check(manifest, "single")


def test_every_apple_program_has_a_placement_verdict(sentiment_run, capsys, tmp_path):
    from pocketbert.core.run import run_files

    export = sentiment_run / run_files.EXPORT_DIR
    placed = json.loads((export / run_files.MANIFEST).read_text())["metrics"]["placement"]
    rows = {r["artifact"]: r for r in json.loads((export / run_files.PARITY).read_text())}
    apple = {name for name in rows if name.endswith((run_files.COREML_PACKAGE_SUFFIX, run_files.COREAI_ASSET_SUFFIX))}
    assert set(placed) == apple and all(rows[name]["placement"] == placed[name] for name in apple)
    assert placed["PocketBertSentiment.mlpackage"]["verdict"] == "off_neural_engine"  # flexible: default shape only
    assert placed["PocketBertSentiment.enumerated.mlpackage"]["verdict"] == "may_fail"  # coremltools#2730
    assert placed["PocketBertSentiment.ane.mlpackage"]["verdict"] == "neural_engine"  # fixed shapes, ANE layout
    detail = json.loads((export / run_files.PLACEMENT).read_text())
    assert {p["program"] for p in detail} == apple and all(f["operations"] for p in detail for f in p["functions"])
    assert run_cli(capsys, "export", "ios", "--run", sentiment_run, "--out", tmp_path / "ios").exit_code == 0
    readme = (tmp_path / "ios" / "README.md").read_text()
    assert all(f"| {name}" in readme for name in apple) and "docs/placement.md" in readme


def test_app_files_classify_like_the_parity_check(sentiment_run, shared_data):
    """tokenizer.json through `tokenizers`, the model in plain onnxruntime, labels.json to decode."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    from pocketbert.core.tasks.data import subsample
    from pocketbert.core.tasks.task_data import load_task_data

    export = sentiment_run / "export"
    tokenizer = Tokenizer.from_file(str(export / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(32)
    labels = json.loads((export / "labels.json").read_text())
    examples = subsample(load_task_data("sst2", "sentiment", shared_data).eval, 48, 13)
    parity = {r["artifact"]: r for r in json.loads((export / "parity.json").read_text())}
    for name in ("model.onnx", "model.fp16.onnx", "model.int8.onnx", "model.qdq.onnx", "model.ort", "model.qdq.ort"):
        session = ort.InferenceSession(str(export / name), providers=["CPUExecutionProvider"])
        correct = 0
        for ex in examples:
            ids = np.array([tokenizer.encode(ex.text).ids], dtype=np.int64)
            logits = session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0]
            correct += labels[int(logits.argmax())] == labels[ex.label]
        assert correct / len(examples) == pytest.approx(parity[name]["metrics"]["accuracy"])


JS_EXAMPLES = 96
MIN_JS_AGREEMENT = 0.99


def transformers_js_labels(folder, dtype: str, texts: list[str]) -> list[str]:
    transformers_js_or_skip()
    done = subprocess.run(["node", str(JS_DIR / "classify.mjs"), str(folder), dtype], input=json.dumps(texts),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_transformers_js_loads_the_export_as_it_is_and_agrees_with_pytorch(sentiment_run, shared_data):
    import onnxruntime as ort
    import torch

    from pocketbert.core.tasks.data import subsample
    from pocketbert.core.tasks.task_data import load_task_data
    from pocketbert.core.students.stage_folder import load_stage_model

    export = sentiment_run / "export"
    hub = json.loads((export / "manifest.json").read_text())["metrics"]["hub_layout"]["written"]
    assert hub == {"onnx/model.onnx": "model.onnx", "onnx/model_quantized.onnx": "model.int8.onnx",
                   "onnx/model_fp16.onnx": "model.fp16.onnx"}
    assert (export / "onnx" / "model.onnx").read_bytes() == (export / "model.onnx").read_bytes()
    max_length = json.loads((export / "manifest.json").read_text())["config"]["max_length"]
    texts = [ex.text for ex in subsample(load_task_data("sst2", "sentiment", shared_data).eval, JS_EXAMPLES, 7)]
    model, tokenizer, task, _ = load_stage_model(sentiment_run / "student")
    int8 = ort.InferenceSession(str(export / "model.int8.onnx"), providers=["CPUExecutionProvider"])
    pytorch, onnx_int8 = [], []
    for text in texts:
        encoded = tokenizer(text, truncation=True, max_length=max_length, return_tensors="np")
        with torch.no_grad():
            logits = model(**{k: torch.from_numpy(v) for k, v in encoded.items() if k in task.input_names}).logits
        pytorch.append(task.label_names[int(logits.argmax())])
        feeds = {k: encoded[k].astype(np.int64) for k in ("input_ids", "attention_mask")}
        onnx_int8.append(task.label_names[int(int8.run(None, feeds)[0].argmax())])

    def agreement(a, b):
        return sum(x == y for x, y in zip(a, b)) / len(a)

    assert agreement(transformers_js_labels(export, "fp32", texts), pytorch) >= MIN_JS_AGREEMENT
    assert agreement(transformers_js_labels(export, "q8", texts), onnx_int8) >= MIN_JS_AGREEMENT


def test_the_ios_default_program_has_no_flexible_or_enumerated_input(sentiment_run, capsys, tmp_path):
    """A program with enumerated or flexible shapes can fail at prediction on the device (apple/coremltools#2730):
    the folder `export ios` ships by default holds one fixed-shape function per length bucket, nothing else."""
    from pocketbert.export.programs.coreml import load_mlpackage

    result = run_cli(capsys, "export", "ios", "--run", sentiment_run, "--out", tmp_path / "ios")
    assert result.exit_code == 0, result.err
    spec = load_mlpackage(tmp_path / "ios" / "PocketBertSentiment.mlpackage").get_spec()
    functions = spec.mlProgram.functions
    lengths = json.loads((sentiment_run / "export" / "manifest.json").read_text())["metrics"]["coreai_entry_points"]
    assert len(functions) == len(lengths) > 1
    for name, function in functions.items():
        for program_input in function.inputs:
            assert all(d.HasField("constant") for d in program_input.type.tensorType.dimensions), name
    described = [*spec.description.input, *(i for f in spec.description.functions for i in f.input)]
    assert described and not [i.name for i in described if i.type.multiArrayType.HasField("shapeRange")
                              or i.type.multiArrayType.HasField("enumeratedShapes")]


def test_app_folders_for_ios_and_android(sentiment_run, capsys, tmp_path):
    from pocketbert.export.programs.coreml import coreml_forward
    from pocketbert.core.tasks.registry import make_task

    result = run_cli(capsys, "export", "ios", "--run", sentiment_run, "--variant", "6bit", "--out", tmp_path / "ios")
    assert result.exit_code == 0, result.err
    ios = tmp_path / "ios"
    assert {p.name for p in ios.iterdir()} == {"PocketBertSentiment.mlpackage", "resources", "README.md", OUTPUT_MARKER,
                                               "PocketBertTokenizer"}
    assert {p.name for p in (ios / "resources").iterdir()} == {"tokenizer.json", "tokenizer_config.json",
                                                               "config.json", "labels.json", "tokenizer_golden.json",
                                                               "tokenizer.tables"}
    assert (ios / "PocketBertTokenizer" / "Package.swift").is_file()
    assert (ios / "PocketBertTokenizer" / "Sources" / "PocketBertTokenizer" / "BertTokenizer.swift").is_file()
    readme = (ios / "README.md").read_text()
    assert "BertTokenizer(contentsOf:" in readme and "PocketBertSentiment(configuration:" in readme
    assert "import Tokenizers" not in readme
    # the app's copy is the 6-bit model: it answers as that variant did in the export
    task = make_task("sentiment", json.loads((ios / "resources" / "labels.json").read_text()))
    ids = np.array([[101, 2023, 3185, 2001, 2307, 102]])
    batch = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    expected = coreml_forward(sentiment_run / "export" / "PocketBertSentiment.6bit.mlpackage", task)(batch)
    assert np.array_equal(coreml_forward(ios / "PocketBertSentiment.mlpackage", task)(batch), expected)

    # Android, by default: the ids-in int8 model, pocketbert's Kotlin tokenizer and its tables, ONNX Runtime alone
    result = run_cli(capsys, "export", "android", "--run", sentiment_run, "--out", tmp_path / "android-ids")
    assert result.exit_code == 0, result.err
    ids_in = tmp_path / "android-ids"
    assert {p.name for p in ids_in.iterdir()} == {"model.ort", "model.required_operators.config", "tokenizer.tables",
                                                  "BertTokenizer.kt", "labels.json", "tokenizer_golden.json",
                                                  "README.md", OUTPUT_MARKER}
    assert (ids_in / "model.ort").read_bytes() == (sentiment_run / "export" / "model.ort").read_bytes()
    readme = (ids_in / "README.md").read_text()
    proven_on = json.loads((sentiment_run / "export" / "manifest.json").read_text())["versions"]["onnxruntime"]
    assert f'implementation("com.microsoft.onnxruntime:onnxruntime-android:{proven_on}")' in readme
    assert f"in onnxruntime {proven_on}" in readme
    assert "extensions" not in readme.lower() and not [n for n in named_in_readme(readme) if not (ids_in / n).exists()]

    # --text-in: the tokenizer inside the model, with the alignment warning
    result = run_cli(capsys, "export", "android", "--run", sentiment_run, "--text-in", "--out", tmp_path / "android")
    assert result.exit_code == 0, result.err
    assert "16 KB" in result.err and len([line for line in result.err.splitlines() if "warning" in line]) == 1
    android = tmp_path / "android"
    assert {p.name for p in android.iterdir()} == {"model.text.ort", "model.text.required_operators.config",
                                                   "labels.json", "tokenizer_golden.json", "README.md", OUTPUT_MARKER}
    kotlin = (android / "README.md").read_text()
    assert "registerCustomOpLibrary(OrtxPackage.getLibraryPath())" in kotlin
    assert "class WordPiece" not in kotlin  # the tokenizer is in the model, not hand-written in the app
    # the provider the Kotlin picks is the one ONNX Runtime's verdict on the int8 graph supports
    from pocketbert.export.checks.mobile_usability import preferred_provider

    verdict = json.loads((sentiment_run / "export" / "manifest.json").read_text())["metrics"]["ort_mobile_usability"]
    provider = preferred_provider(verdict["model.int8.onnx"])
    assert {"NNAPI": "addNnapi()", "XNNPACK": "addXnnpack(", "CPU": "CPU execution provider"}[provider] in kotlin
    # the app's model, fed a raw sentence as the Kotlin feeds it, answers as the export's gate saw
    from pocketbert.core.tasks.data import TextExample
    from pocketbert.core.tasks.registry import make_task
    from pocketbert.export.text_in.model import text_in_forward

    task = make_task("sentiment", json.loads((android / "labels.json").read_text()))
    _, shipped = text_in_forward(android / "model.text.ort", task)([TextExample("a gripping, well-acted film", 1)])
    _, exported = text_in_forward(sentiment_run / "export" / "model.text.ort", task)(
        [TextExample("a gripping, well-acted film", 1)])
    assert np.array_equal(shipped[0], exported[0])

    missing = run_cli(capsys, "export", "ios", "--run", sentiment_run, "--variant", "4bit", "--out", tmp_path / "x")
    assert missing.exit_code == 2 and "has no Core ML 4bit variant" in error_line(missing)
    assert not (tmp_path / "x").exists()


def test_ios27_folder_carries_the_core_ai_program(sentiment_run, capsys, tmp_path):
    from pocketbert.core.tasks.registry import make_task
    from pocketbert.export.programs.coreai import coreai_forward

    result = run_cli(capsys, "export", "ios", "--run", sentiment_run, "--target", "ios27", "--out", tmp_path / "ios")
    assert result.exit_code == 0, result.err
    ios = tmp_path / "ios"
    assert {p.name for p in ios.iterdir()} == {"PocketBertSentiment.aimodel", "resources", "README.md", OUTPUT_MARKER,
                                               SWIFT_TOKENIZER_PACKAGE}
    readme = (ios / "README.md").read_text()
    assert "NOT BUILT WITH APPLE'S SDK HERE" in readme and "coreai-build" in readme and "AIModel.specialize(contentsOf:" in readme
    lengths = json.loads((sentiment_run / "export" / "manifest.json").read_text())["metrics"]["coreai_entry_points"]
    assert f"private static let lengths = [{', '.join(map(str, lengths))}]" in readme
    # the app's copy is the exported program: it answers as the export's gate saw
    task = make_task("sentiment", json.loads((ios / "resources" / "labels.json").read_text()))
    ids = np.array([[101, 2023, 3185, 2001, 2307, 102]])
    batch = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    expected = coreai_forward(sentiment_run / "export" / "PocketBertSentiment.aimodel", task)(batch)
    assert np.array_equal(coreai_forward(ios / "PocketBertSentiment.aimodel", task)(batch), expected)
    missing = run_cli(capsys, "export", "ios", "--run", sentiment_run, "--target", "ios27", "--variant", "4bit",
                      "--out", tmp_path / "x")
    assert missing.exit_code == 2 and "has no Core AI 4bit variant" in error_line(missing)
    assert not (tmp_path / "x").exists()


def test_every_shipped_tokenizer_gives_the_golden_ids_and_the_readmes_name_real_files(sentiment_run, capsys,
                                                                                      tmp_path):
    from tokenizers import Tokenizer

    from pocketbert.core.students.models import load_tokenizer

    export = sentiment_run / "export"
    golden = json.loads((export / "tokenizer_golden.json").read_text(encoding="utf-8"))
    max_length = json.loads((export / "manifest.json").read_text())["config"]["max_length"]
    assert golden["max_length"] == max_length
    probes = {row["probe"] for row in golden["texts"]}
    assert {"accents", "cjk", "emoji", "zero-width space", "long word", "longer than max_length", "empty"} <= probes
    # and a text for each class of code point the text-in graph treats specially (found by the exhaustive check)
    assert {"punctuation the ops keep in a word", "code point the ops misread", "flag tag sequence"} <= probes
    longest = next(r for r in golden["texts"] if r["probe"] == "longer than max_length")
    assert len(longest["ids"]) == max_length and longest["ids"][-1] == 102  # truncated, [SEP] kept
    assert run_cli(capsys, "export", "ios", "--run", sentiment_run, "--out", tmp_path / "ios").exit_code == 0
    assert run_cli(capsys, "export", "android", "--run", sentiment_run, "--text-in",
                   "--out", tmp_path / "android").exit_code == 0
    folders = [export, tmp_path / "ios" / "resources", tmp_path / "android"]
    for folder in folders:
        assert json.loads((folder / "tokenizer_golden.json").read_text(encoding="utf-8")) == golden
        if not (folder / "tokenizer.json").is_file():
            continue  # the Android folder ships its tokenizer inside the model: checked below
        # tokenizer.json as any client loads it (tokenizers, transformers.js, swift-transformers read this file)
        as_is = Tokenizer.from_file(str(folder / "tokenizer.json"))
        for row in golden["texts"]:
            assert as_is.encode(row["text"]).ids == row["ids"], (folder, row["probe"])
        config = json.loads((folder / "tokenizer_config.json").read_text()) if (
            folder / "tokenizer_config.json").is_file() else None
        if config is not None:
            assert not {"is_local", "local_files_only"} & set(config)
            assert config["handle_chinese_chars"] is True and config["model_max_length"] == max_length
            hf = load_tokenizer(str(folder))
            for row in golden["texts"]:
                assert hf(row["text"], truncation=True, max_length=max_length)["input_ids"] == row["ids"]
    # The Android model's own tokenizer: fed each golden text, it gives the logits the same int8 graph gives for the
    # golden ids (equal logits: equal ids).
    import onnxruntime as ort

    from pocketbert.core.tasks.data import TextExample
    from pocketbert.core.tasks.registry import make_task
    from pocketbert.export.text_in.model import text_in_forward

    task = make_task("sentiment", json.loads((export / "labels.json").read_text()))
    _, from_text = text_in_forward(tmp_path / "android" / "model.text.ort", task)(
        [TextExample(row["text"], 0) for row in golden["texts"]])
    by_ids = ort.InferenceSession(str(export / "model.int8.onnx"), providers=["CPUExecutionProvider"])
    for row, logits in zip(golden["texts"], from_text):
        ids = np.array([row["ids"]], dtype=np.int64)
        expected = by_ids.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0][0]
        assert np.allclose(logits, expected, atol=1e-5), row["probe"]
    for app in ("ios", "android"):
        readme = (tmp_path / app / "README.md").read_text()
        assert "## Proven by pocketbert, and what needs a device" in readme
        named = named_in_readme(readme)
        assert named, "the README names no file"
        missing = [n for n in named if not (tmp_path / app / n).exists()]
        assert not missing, f"{app} README names {missing}, which export {app} did not write"
    swift = (tmp_path / "ios" / "README.md").read_text()
    kotlin = (tmp_path / "android" / "README.md").read_text()
    assert "tokenizer.encode(text, maxLength: maxLength)" in swift  # BertTokenizer cuts long inputs, keeping [SEP]
    # the iOS folder's default program is the Neural Engine layout, one function per length: the Swift pads to the
    # smallest length that fits and runs that length's function
    lengths = json.loads((export / "manifest.json").read_text())["metrics"]["coreml_enumerated_lengths"]["lengths"]
    assert f"private let lengths = [{', '.join(map(str, lengths))}]" in swift and "lengths.first {" in swift
    assert 'configuration.functionName = "main_len\\(n)"' in swift and "models[length]!.prediction(" in swift
    assert "(`ane`)" in swift and "| enumerated (`enumerated`) | iOS 18" in swift
    assert "keeping [SEP]" in kotlin  # the model's tokenizer cuts long inputs, [SEP] kept (golden-checked)


@pytest.mark.parametrize("platform", ["ios", "android"])
def test_app_folder_is_replaced_only_with_overwrite(sentiment_run, capsys, tmp_path, platform):
    out = tmp_path / platform
    out.mkdir()
    (out / "mine.txt").write_text("an app's own file")
    refused = run_cli(capsys, "export", platform, "--run", sentiment_run, "--out", out)
    assert refused.exit_code == 2 and "pass --overwrite" in error_line(refused)
    # --overwrite replaces only a folder this command made (its marker says so), never the app's own
    kept = run_cli(capsys, "export", platform, "--run", sentiment_run, "--out", out, "--overwrite")
    assert kept.exit_code == 2 and "not one" in error_line(kept)
    assert [p.name for p in out.iterdir()] == ["mine.txt"]  # untouched
    (out / "mine.txt").unlink()
    assert run_cli(capsys, "export", platform, "--run", sentiment_run, "--out", out).exit_code == 0
    # a file the app added since is listed, not deleted; once it is moved out, --overwrite replaces the folder
    (out / "notes.txt").write_text("the app's own, added since")
    listed = run_cli(capsys, "export", platform, "--run", sentiment_run, "--out", out, "--overwrite")
    assert listed.exit_code == 2 and "notes.txt" in error_line(listed), listed.err
    assert (out / "notes.txt").read_text() == "the app's own, added since"
    (out / "notes.txt").unlink()
    replaced = run_cli(capsys, "export", platform, "--run", sentiment_run, "--out", out, "--overwrite")
    assert replaced.exit_code == 0, replaced.err
    assert (out / "README.md").is_file()


def test_rerun_without_overwrite_is_refused(sentiment_run, capsys, shared_data):
    result = run_cli(capsys, "export", "--run", sentiment_run, "--data-dir", shared_data)
    assert result.exit_code != 0
    assert "export already exists: pass --overwrite" in error_line(result)


@pytest.mark.parametrize("platform, folder", [("ios", "resources"), ("android", ".")])
def test_app_folders_can_carry_the_executorch_program(sentiment_run, capsys, tmp_path, platform, folder):
    from pocketbert.core.tasks.registry import make_task
    from pocketbert.export.programs.executorch_export import executorch_forward

    result = run_cli(capsys, "export", platform, "--run", sentiment_run, "--executorch", "--out", tmp_path / platform)
    assert result.exit_code == 0, result.err
    shipped = tmp_path / platform / folder / "model.int8.pte"
    assert shipped.read_bytes() == (sentiment_run / "export" / "model.int8.pte").read_bytes()
    readme = (tmp_path / platform / "README.md").read_text()
    assert "ExecuTorch instead of" in readme and "(type-checked here, not run)" in readme
    assert not [n for n in named_in_readme(readme) if not (tmp_path / platform / n).exists()]
    # the shipped program answers on ExecuTorch's runtime
    task = make_task("sentiment", json.loads((sentiment_run / "export" / "labels.json").read_text()))
    ids = np.array([[101, 2023, 3185, 2001, 2307, 102]])
    logits = executorch_forward(shipped, task)({"input_ids": ids, "attention_mask": np.ones_like(ids)})
    assert logits.shape == (1, len(task.label_names)) and np.isfinite(logits).all()
