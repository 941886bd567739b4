"""The app code in the ios/ and android/ READMEs comes from template files per task, shipped as package data."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import pytest

from pocketbert.core.tasks.registry import TASKS
from pocketbert.export.app import app_readme
from pocketbert.export.app.swift_package import SWIFT_PACKAGE, package_files

ROOT = Path(__file__).resolve().parents[2]
# What app_tasks.QAApp.code_values gives a QA export (its windows, span search, bound and special tokens).
QA_VALUES = {"stride": 24, "n_best": 10, "max_answer_length": 30, "max_context_tokens": 4096, "cls_id": 101,
             "sep_id": 102}


def test_every_template_is_package_data():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = data["pocketbert.export.app"]
    templates = sorted(p.relative_to(app_readme.TEMPLATES.parent).as_posix() for p in app_readme.TEMPLATES.rglob("*")
                       if p.is_file())
    assert templates
    assert [t for t in templates if not any(fnmatch.fnmatch(t, pattern) and t.count("/") == pattern.count("/")
                                            for pattern in patterns)] == []


@pytest.mark.parametrize("task", TASKS)
def test_each_task_has_its_app_code(task):
    assert (app_readme.TEMPLATES / task / "ios.swift.txt").is_file()
    assert (app_readme.TEMPLATES / task / "android.kt.txt").is_file()


def test_templates_are_plain_text_without_escaped_braces():
    """A template is the code as an app holds it: no Python format escapes, no control characters."""
    for path in app_readme.TEMPLATES.rglob("*.txt"):
        text = path.read_text(encoding="utf-8")
        assert "{{" not in text and "}}" not in text, path
        assert not [c for c in text if ord(c) < 32 and c != "\n"], path
        assert text.endswith("\n") and not text.endswith("\n\n"), path


def _facts(task: str, max_length: int, values: dict | None = None) -> app_readme.FolderFacts:
    """A folder with no files and no gate figures: what these tests read is the code."""
    return app_readme.FolderFacts(task, {}, max_length, {}, 1, values=values)


def test_filled_code_keeps_no_placeholder_it_was_given():
    code = app_readme.swift_code("sentiment", "PocketBertSentiment", 64, "fp16", ())
    assert "PocketBertSentiment" in code and "{model_class}" not in code and "{decode}" not in code
    assert "map { exp($0 - top) }" in code  # the code's own braces stay
    kotlin = app_readme.android_readme(_facts("qa", 64), [], "model.qa.ort", "CPU", [], text_in=True)
    assert '"\\u0000"' in kotlin  # Kotlin's escape, as written, not a NUL character
    assert app_readme.fill("{a} {b} { c }", a=1) == "1 {b} { c }"


@pytest.mark.slow
def test_a_built_wheel_holds_every_template(tmp_path):
    import subprocess
    import sys
    import zipfile

    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True, timeout=300)
    names = set(zipfile.ZipFile(next(tmp_path.glob("pocketbert-*.whl"))).namelist())
    templates = {f"pocketbert/export/app/{p.relative_to(app_readme.TEMPLATES.parent).as_posix()}"
                 for p in [*app_readme.TEMPLATES.rglob("*.txt"), *package_files()]}
    assert templates and templates <= names
    assert "pocketbert/export/app/swift/PocketBertTokenizer/Package.swift" in names


@pytest.mark.parametrize("task", TASKS)
def test_core_ai_swift_is_filled_and_says_what_is_unverified(task):
    code = app_readme.swift_coreai_code(task, "PocketBertX", 128, (16, 32, 128), QA_VALUES)
    assert not app_readme.PLACEHOLDER.findall(code)
    assert "NOT BUILT WITH APPLE'S SDK HERE" in code and "Unverified" in code
    assert 'forResource: "PocketBertX", withExtension: "aimodelc"' in code
    assert "private static let lengths = [16, 32, 128]" in code and 'loadFunction(named: "main_len\\(n)")' in code



@pytest.mark.parametrize("task", TASKS)
def test_each_task_has_its_app_folder_contents(task):
    from pocketbert.export.app import app_tasks

    assert task in app_tasks.APPS


def test_qa_kotlin_reads_the_one_call_models_answer_outputs():
    from pocketbert.export.text_in import qa_graph

    kotlin = app_readme.android_readme(_facts("qa", 96, QA_VALUES), [], "model.qa.ort", "CPU", [], text_in=True)
    assert not app_readme.PLACEHOLDER.findall(kotlin)
    assert '"question" to OnnxTensor' in kotlin and '"context" to OnnxTensor' in kotlin
    read = set(re.findall(r'output<.+?>\("([a-z0-9_]+)"\)', kotlin))
    assert {"answer", "answer_start_utf16", "answer_end_utf16", "score"} <= read <= set(qa_graph.OUTPUTS)


@pytest.mark.parametrize("task", TASKS)
def test_default_android_kotlin_feeds_ids_to_onnx_runtime_alone(task):
    """The default Android code: BertTokenizer's ids into model.ort, with ONNX Runtime's own Android package at the
    version the export proved the model on, and nothing of onnxruntime-extensions (its Android build is not 16 KB
    aligned)."""
    kotlin = app_readme.android_readme(_facts(task, 96, QA_VALUES), ["negative", "positive"], "model.ort", "CPU",
                                       [], ort_version="1.31.1", tables="tokenizer.tables")
    assert not app_readme.PLACEHOLDER.findall(kotlin)
    assert 'implementation("com.microsoft.onnxruntime:onnxruntime-android:1.31.1")' in kotlin
    assert "extensions" not in kotlin.lower() and "OrtxPackage" not in kotlin
    assert 'context.assets.open("tokenizer.tables")' in kotlin and 'context.assets.open("model.ort")' in kotlin
    assert '"input_ids" to' in kotlin and '"attention_mask" to' in kotlin
    text_in = app_readme.android_readme(_facts(task, 96, QA_VALUES), [], "model.text.ort", "CPU", [],
                                        text_in=True)
    assert "OrtxPackage.getLibraryPath()" in text_in and app_readme.TEXT_IN_WARNING in text_in


def call_labels(code: str, function: str) -> list[list[str]]:
    """The argument labels of each Swift call of `function` in `code` (a declaration's parameter names alike)."""
    return [re.findall(r"(\w+):", args) for args in re.findall(rf"\b{function}\(([^()]*)\)", code)]


def test_qa_swift_calls_the_answer_routine_as_it_is_declared():
    """Core ML, Core AI and ExecuTorch Swift window the context and call QaAnswer.swift's functions with the labels
    its declarations have (rendered from the same specification the Kotlin and JavaScript tests run)."""
    from pocketbert.export.app import qa_postprocess

    routine = qa_postprocess.render("swift")
    declared = {f: call_labels(routine, f"func {f}")[0] for f in ("windowStarts", "qaAnswer")}
    codes = [app_readme.swift_code("qa", "PocketBertQA", 96, "enumerated", (32, 96), QA_VALUES),
             app_readme.swift_coreai_code("qa", "PocketBertQA", 96, (32, 96), QA_VALUES),
             "\n".join(app_readme.executorch_section(app_readme.SWIFT_EXECUTORCH, "Core ML", "qa", "model.int8.pte",
                                                     96, [], QA_VALUES))]
    for code in codes:
        assert not app_readme.PLACEHOLDER.findall(code)
        for function, labels in declared.items():
            calls = [c for c in call_labels(code, function) if c]
            assert calls and all(c[:len(labels)] == labels for c in calls), function
    kotlin = "\n".join(app_readme.executorch_section(app_readme.KOTLIN_EXECUTORCH, "ONNX Runtime", "qa",
                                                     "model.int8.pte", 96, [], QA_VALUES))
    assert not app_readme.PLACEHOLDER.findall(kotlin)
    assert "windowStarts(c.size, q.size, maxLength, stride)" in kotlin
    assert "qaAnswer(startLogits, endLogits, contextIndex, nBest, maxAnswerLength)" in kotlin
    assert "private val cls = 101L" in kotlin and "private val stride = 24" in kotlin


def test_swift_templates_tokenize_with_the_shipped_package():
    """Every iOS template (sentiment and QA; Core ML, Core AI, ExecuTorch) reads tokenizer.tables with the
    PocketBertTokenizer package, through calls its public declarations have; a QA answer is the context's own
    text cut at code-point offsets."""
    api = "\n".join(p.read_text() for p in (SWIFT_PACKAGE / "Sources" / "PocketBertTokenizer").glob("*.swift"))
    for declaration in ("public convenience init(contentsOf url: URL) throws", "public func tokenize(_ text: String) -> [Token]",
                        "public func encode(_ text: String, maxLength: Int? = nil) -> Encoding",
                        "public func substring(_ text: String, codePoints: Range<Int>) -> String",
                        "public let clsId: Int", "public let sepId: Int"):
        assert declaration in api, declaration
    swift = sorted(app_readme.TEMPLATES.glob("*/ios*.swift.txt"))
    users = [p for p in swift if "tokenizer" in p.read_text()]
    assert len(users) == 6
    for path in users:
        code = path.read_text()
        assert "import PocketBertTokenizer" in code and "import Tokenizers" not in code, path
        assert 'BertTokenizer(contentsOf: folder.appendingPathComponent("tokenizer.tables"))' in code, path
        if path.parent.name == "qa":
            assert "substring(context, codePoints: pieces[from].start..<pieces[to].end)" in code, path
            assert "decode(" not in code, path
        else:
            assert "tokenizer.encode(text, maxLength: maxLength).ids" in code, path
