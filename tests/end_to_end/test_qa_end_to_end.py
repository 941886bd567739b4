"""Extractive QA end to end through the real CLI: a qa-tiny teacher, its student and the export, then the text-in
and one-call QA models and the app folders that carry them, used as an app would."""

from __future__ import annotations

import json

import pytest
from helpers import (
    QUICK_EXPORT,
    assert_exhaustive_tokenizer_check,
    error_line,
    linked_copy,
    named_in_readme,
    run_cli,
    run_cli_steps,
)

from pocketbert.core.run.user_paths import OUTPUT_MARKER

pytestmark = pytest.mark.slow



@pytest.fixture(scope="module")
def qa_run(tmp_path_factory, tiny_base, shared_data):
    """The qa-tiny run through the real CLI: a tiny teacher, its student and the export, shared by the QA tests.
    One Core AI program (the 6-bit one is the sentiment run's to check): the ios27 folder ships the fp16 one."""
    run = tmp_path_factory.mktemp("runs") / "qa"
    common = ["--task", "qa", "--preset", "tiny", "--data-dir", shared_data]
    run_cli_steps(["train", "teacher", "--run", run, "--model", tiny_base, *common],
                  ["train", "distill", "--run", run, *common],
                  ["export", "--run", run, "--data-dir", shared_data, "--coreai-variants", "fp16",
                   "--executorch-variants", "pte-int8"])  # the android folder's --executorch carries it
    return run


def test_qa_pipeline(qa_run, capsys, tmp_path):
    run = qa_run
    assert {"exact_match", "f1"} <= set(json.loads((run / "student" / "manifest.json").read_text())["metrics"]["eval"])
    parity = json.loads((run / "export" / "parity.json").read_text())
    assert all(r["passed"] for r in parity)
    assert (run / "export" / "PocketBertQA.mlpackage").is_dir()
    # the text-in QA models, fed each question and context as text, cut the Python pipeline's answers out of the
    # contexts
    text_in = {r["artifact"]: r for r in parity}
    fp32 = text_in["model.text.onnx"]
    assert fp32["runtime"] == "onnxruntime + extensions" and fp32["n_examples"] > 0
    assert fp32["agreement"] >= MIN_QA_TEXT_IN_AGREEMENT
    assert {"model.text.int8.onnx", "model.text.ort"} <= set(text_in)
    golden = json.loads((run / "export" / "tokenizer_golden.json").read_text(encoding="utf-8"))
    probes = {r["probe"] for r in golden["pairs"]}
    assert {"question longer than max_length", "context longer than max_length"} <= probes
    assert "punctuation the ops keep in a word" in probes
    manifest = json.loads((run / "export" / "manifest.json").read_text())
    # QA in one call: windows, span search and the answer's text inside the model, against the Python pipeline
    one_call = text_in["model.qa.onnx"]
    assert one_call["agreement"] >= MIN_QA_TEXT_IN_AGREEMENT and one_call["by_windows"]["span_mismatches"] == 0
    assert one_call["n_examples"] == manifest["config"]["parity_examples"]  # every question, however long
    assert {"model.qa.int8.onnx", "model.qa.ort"} <= set(text_in)
    assert manifest["metrics"]["qa_in_graph"]["settings"]["longer_context"] == "cut"
    assert_exhaustive_tokenizer_check(manifest, "pair")
    assert manifest["metrics"]["text_in_tokenizer_exhaustive"]["offsets"] is True
    # the Core AI program gives both logits, gated like the Core ML one
    coreai = {r["artifact"]: r for r in parity}["PocketBertQA.aimodel"]
    assert coreai["runtime"].startswith("Core AI") and coreai["passed"] and coreai["n_examples"] > 0


def test_qa_android_folder_answers_in_one_call(qa_run, capsys, tmp_path):
    from pocketbert.core.tasks.data import QAExample
    from pocketbert.export.text_in import qa_graph

    export = qa_run / "export"
    # by default: the window model with BertTokenizer, the answer routine and the golden files, ONNX Runtime alone
    assert run_cli(capsys, "export", "android", "--run", qa_run, "--out", tmp_path / "android-ids").exit_code == 0
    ids_in = tmp_path / "android-ids"
    assert {p.name for p in ids_in.iterdir()} == {"model.ort", "model.required_operators.config", "tokenizer.tables",
                                                  "BertTokenizer.kt", "QaAnswer.kt", "qa_golden.json",
                                                  "tokenizer_golden.json", "README.md", OUTPUT_MARKER}
    for name in ("model.ort", "QaAnswer.kt", "tokenizer.tables"):
        assert (ids_in / name).read_bytes() == (export / name).read_bytes(), name
    readme = (ids_in / "README.md").read_text()
    assert "qaAnswer(startLogits, endLogits, contextIndex, nBest, maxAnswerLength)" in readme
    assert "extensions" not in readme.lower()
    # --text-in: the one-call model
    assert run_cli(capsys, "export", "android", "--run", qa_run, "--text-in",
                   "--out", tmp_path / "android").exit_code == 0
    android = tmp_path / "android"
    assert {p.name for p in android.iterdir()} == {"model.qa.ort", "model.qa.required_operators.config",
                                                   "qa_golden.json", "tokenizer_golden.json", "README.md",
                                                   OUTPUT_MARKER}
    assert (android / "model.qa.ort").read_bytes() == (export / "model.qa.ort").read_bytes()
    # the app's model, fed each golden question and its whole context as the Kotlin feeds them (onnxruntime with
    # onnxruntime-extensions), answers as the Python pipeline did at export
    golden = json.loads((android / "qa_golden.json").read_text(encoding="utf-8"))
    examples = [QAExample("golden", q["question"], q["context"], ()) for q in golden["questions"]]
    answers = qa_graph.answer_forward(android / "model.qa.ort")(examples)
    assert qa_graph.span_mismatches(examples, answers) == 0
    assert [a["windows"] for a in answers] == [len(q["windows"]) for q in golden["questions"]]
    # The golden questions are among the gate's: the int8 model differs from the pipeline on no more of them than
    # the gate counted on all.
    gate = json.loads((export / "manifest.json").read_text())["metrics"]["parity"]["model.qa.ort"]
    differ = sum(a["answer"] != q["answer"] for a, q in zip(answers, golden["questions"]))
    assert differ <= round((1 - gate["agreement"]) * gate["n_examples"])
    assert any(a["answer"] and a["answer"] == q["answer"] for a, q in zip(answers, golden["questions"]))
    # the README's Kotlin reads the model's answer outputs; its proven facts are the manifest's gate of this model
    readme = (android / "README.md").read_text()
    assert 'output<Array<String>>("answer")' in readme and "windowStarts" not in readme
    assert f"on {gate['n_examples']} eval questions" in readme
    assert f"the Python pipeline on {gate['agreement']:.1%}" in readme and f"F1 {gate['metrics']['f1']:.2f}" in readme
    assert not [n for n in named_in_readme(readme) if not (android / n).exists()]
    # --executorch: the window model with the Kotlin answer routine and its golden file
    assert run_cli(capsys, "export", "android", "--run", qa_run, "--executorch",
                   "--out", tmp_path / "android-et").exit_code == 0
    for name in ("QaAnswer.kt", "qa_golden.json", "model.int8.pte", "tokenizer.json"):
        assert (tmp_path / "android-et" / name).read_bytes() == (export / name).read_bytes(), name
    assert "qaAnswer(startLogits, endLogits, contextIndex, nBest, maxAnswerLength)" in (
        tmp_path / "android-et" / "README.md").read_text()


@pytest.mark.parametrize("options", [(), ("--target", "ios27"), ("--executorch",)], ids=["coreml", "ios27", "pte"])
def test_qa_ios_folders_carry_the_answer_routine(qa_run, capsys, tmp_path, options):
    export, ios = qa_run / "export", tmp_path / "ios"
    result = run_cli(capsys, "export", "ios", "--run", qa_run, *options, "--out", ios)
    assert result.exit_code == 0, result.err
    for name in ("QaAnswer.swift", "qa_golden.json"):  # beside the model and the resources, as the export wrote them
        assert (ios / name).read_bytes() == (export / name).read_bytes(), name
    readme = (ios / "README.md").read_text()
    assert "windowStarts(contextTokens:" in readme and "qaAnswer(startLogits:" in readme
    assert "`QaAnswer.swift` is type-checked here, not run" in readme
    # (Core AI's Swift names its program by its stem: forResource: "PocketBertQA", withExtension: "aimodel")
    missing = [n for n in named_in_readme(readme) if not (ios / n).exists() and not (ios / f"{n}.aimodel").exists()]
    assert not missing
    if "ios27" in options:  # the Core AI program gives both logits, read per window
        assert 'outputs.remove("start_logits")' in readme and '"token_type_ids": NDArray(' in readme
    if "--executorch" in options:
        assert "module.forward([inputIds, mask, types])" in readme


def test_qa_app_folders_refuse_an_export_without_the_one_call_model(qa_run, capsys, tmp_path):
    """An export made before model.qa.ort and the answer routines existed: one line, exit 2, no folder."""
    import os
    import shutil

    old = tmp_path / "old"
    shutil.copytree(qa_run / "export", old / "export", copy_function=os.link)  # hard links: nothing copied
    manifest = json.loads((old / "export" / "manifest.json").read_text())
    later = ("model.qa.onnx", "model.qa.int8.onnx", "model.qa.ort", "model.qa.required_operators.config",
             "qa_golden.json", "qa_answer.mjs", "QaAnswer.kt", "QaAnswer.swift")
    for name in later:
        (old / "export" / name).unlink()  # the link only
        manifest["metrics"]["parity"].pop(name, None)
        manifest["artifacts"].pop(name, None)
    (old / "export" / "manifest.json").unlink()  # a new file, not the shared one rewritten
    (old / "export" / "manifest.json").write_text(json.dumps(manifest))
    said = {}
    for platform in ("android", "ios"):
        refused = run_cli(capsys, "export", platform, "--run", old, "--out", tmp_path / platform)
        said[platform] = error_line(refused)
        assert refused.exit_code == 2 and "re-run `pocketbert export" in said[platform], refused.err
        assert [p.name for p in tmp_path.iterdir()] == ["old"]  # no folder, not even a temporary one
    assert "QaAnswer.kt" in said["android"] and "QaAnswer.swift" in said["ios"]


MIN_QA_TEXT_IN_AGREEMENT = 0.99
FIT_RECOVERY_STEPS = 0  # a QA student's answers are cut per word piece: no recovery to match them to (refused)


def test_a_qa_student_fits_its_vocabulary_and_exports_it(qa_run, capsys, tmp_path, shared_data):
    """`train vocabulary` and `export --vocabulary fitted` on a QA run: the fit compares answers with the task's own
    span search, and every program of the fitted export passes its gate with the smaller table."""
    run = linked_copy(qa_run, tmp_path / "run", ["teacher", "student"])
    fitted = run_cli(capsys, "train", "vocabulary", "--run", run, "--data-dir", shared_data, "--device", "cpu",
                     "--vocabulary-recovery-steps", str(FIT_RECOVERY_STEPS))
    assert fitted.exit_code == 0, error_line(fitted)
    record = json.loads((run / "student_fitted" / "manifest.json").read_text())["metrics"]["vocabulary"]
    assert record["rows_after"] < record["rows_before"]
    assert {"exact_match", "f1"} <= set(record["against_full_student"]["fitted_student"])
    exported = run_cli(capsys, "export", "--run", run, "--data-dir", shared_data, "--vocabulary", "fitted",
                       "--vocabulary-recovery-steps", str(FIT_RECOVERY_STEPS), *QUICK_EXPORT)
    assert exported.exit_code == 0, error_line(exported)
    parity = json.loads((run / "export" / "parity.json").read_text())
    assert parity and all(r["passed"] for r in parity)
    manifest = json.loads((run / "export" / "manifest.json").read_text())
    assert manifest["config"]["vocabulary"] == "fitted"
    assert json.loads((run / "export" / "config.json").read_text())["vocab_size"] == record["rows_after"]


