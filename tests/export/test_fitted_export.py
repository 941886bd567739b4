"""The export ships the student the run holds: with export.vocabulary: fitted, the fitted student that `pocketbert
train vocabulary` wrote (its rows in every file, its record in the manifest), fitted first by the command where the
run lacks it; a recipe that does not ask exports the full vocabulary as before. The export itself trains nothing."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from helpers import QUICK_EXPORT, error_line, linked_copy, run_cli

from pocketbert.core.run import run_files
from pocketbert.core.errors import RunDirError


RECOVERY_STEPS = 5
INT4_SHARE = 0.5
FULL_SIZE_SLACK = 1024  # bytes: the grown table's file and the full export's differ in names and lengths alone
EXPORT_PACKAGE = Path(__file__).resolve().parents[2] / "pocketbert" / "export"
# What training looks like in PyTorch: an optimizer, or a backward pass
TRAINING = re.compile(r"torch\.optim|\.backward\(|\boptimizer\b|requires_grad_\(True\)")


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _manifest(folder) -> dict:
    return json.loads((folder / run_files.MANIFEST).read_text())


def test_the_export_holds_no_optimizer_and_no_backward_pass():
    found = [f"{path.relative_to(EXPORT_PACKAGE)}:{n}: {line.strip()}"
             for path in sorted(EXPORT_PACKAGE.rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if TRAINING.search(line)]
    assert found == []
    assert TRAINING.search("opt = torch.optim.AdamW(params)") and TRAINING.search("loss.backward()")  # a control


def test_a_recipe_that_does_not_ask_exports_the_full_vocabulary_as_before(exported_run):
    """The session's shared export (the tiny recipe names no vocabulary): the student's own word pieces, every row,
    in every tokenizer file and in the model, and nothing fitted recorded."""
    student, export = exported_run / run_files.STUDENT_DIR, exported_run / run_files.EXPORT_DIR
    pieces = json.loads((student / run_files.TOKENIZER_JSON).read_text())["model"]["vocab"]
    assert json.loads((export / run_files.TOKENIZER_JSON).read_text())["model"]["vocab"] == pieces
    assert (export / run_files.VOCAB).read_text().splitlines() == sorted(pieces, key=pieces.get)
    assert _digest(export / run_files.MODEL_CONFIG) == _digest(student / run_files.MODEL_CONFIG)
    manifest = _manifest(export)
    assert manifest["config"]["vocabulary"] == "full" and manifest["metrics"]["vocabulary"] is None
    assert "fitted_student" not in manifest["inputs"] and not (exported_run / run_files.FITTED_STUDENT_DIR).exists()


def _fake_run(folder: Path, student_manifest: dict, fitted_config: dict | None) -> Path:
    """A run folder with a student's and a fitted student's manifests alone: what the refit decision reads."""
    (folder / run_files.STUDENT_DIR).mkdir(parents=True)
    (folder / run_files.STUDENT_DIR / run_files.MANIFEST).write_text(json.dumps(student_manifest))
    if fitted_config is not None:
        (folder / run_files.FITTED_STUDENT_DIR).mkdir()
        (folder / run_files.FITTED_STUDENT_DIR / run_files.MANIFEST).write_text(json.dumps(
            {"stage": run_files.FITTED_STUDENT_DIR, "config": {"recipe": {}, **fitted_config},
             "metrics": {"vocabulary": {}}}))
    return folder


def test_a_fitted_student_is_refit_only_when_missing_from_another_student_or_with_other_settings(tmp_path):
    from pocketbert.core.students.fitted_vocabulary import FITTED_FROM, SETTINGS, student_identity, why_refit

    student = {"stage": "student", "config": {"recipe": {}}, "metrics": {"eval": {}}}
    settings = {"min_count": 2, "max_rows": None, "recovery_steps": 5, "recovery_learning_rate": 1e-4}
    assert why_refit(_fake_run(tmp_path / "none", student, None), {}) == "the run holds no fitted student"
    run = _fake_run(tmp_path / "fitted", student, {SETTINGS: settings})
    sha = student_identity(run)
    assert "student changed" in why_refit(run, {})
    run = _fake_run(tmp_path / "same", student, {SETTINGS: settings, FITTED_FROM: sha})
    assert why_refit(run, {}) is None  # no option given: the fit the run holds
    assert why_refit(run, {"recovery_steps": 5, "recovery_learning_rate": 0.0001}) is None
    assert why_refit(run, {"min_count": 3}) == "its vocabulary was fitted with vocabulary.min_count 2, not 3"
    assert why_refit(run, {"embedding_int4_share": 0.5, "jobs": 1}) is None  # not a fitting setting
    # a record that names no such setting is not taken for one fitted with it
    run = _fake_run(tmp_path / "unnamed", student, {SETTINGS: {}, FITTED_FROM: sha})
    assert why_refit(run, {}) is None
    assert why_refit(run, {"min_count": 2}) == "its record names no vocabulary.min_count, and 2 is asked"


@pytest.mark.slow
@pytest.mark.parametrize("refused", [["--coreml-variants", "int8"], ["--executorch-variants", "pte-int4"]])
def test_a_refused_program_choice_is_refused_before_any_fit(quick_exported_run, tmp_path, capsys, shared_data,
                                                            refused):
    """The export's plan refuses what it would refuse after a fit before the command fits: seconds, not a fit."""
    run = linked_copy(quick_exported_run, tmp_path / "run", ["teacher", "student"])
    result = run_cli(capsys, "export", "--run", run, "--data-dir", shared_data, "--vocabulary", "fitted", *refused)
    assert result.exit_code == 2 and refused[1] in error_line(result)
    assert "fitting it first" not in result.err
    assert not (run / run_files.FITTED_STUDENT_DIR).exists() and not (run / run_files.EXPORT_DIR).exists()


@pytest.mark.slow
def test_the_export_of_a_run_holding_a_fitted_student_ships_its_rows(quick_exported_run, tmp_path, capsys,
                                                                     shared_data):
    run = linked_copy(quick_exported_run, tmp_path / "run", ["teacher", "student"])
    result = run_cli(capsys, "train", "vocabulary", "--run", run, "--data-dir", shared_data, "--device", "cpu",
                     "--vocabulary-recovery-steps", str(RECOVERY_STEPS))
    assert result.exit_code == 0, error_line(result)
    fitted_dir = run / run_files.FITTED_STUDENT_DIR
    fitted_manifest = _manifest(fitted_dir)
    record = fitted_manifest["metrics"]["vocabulary"]
    rows = record["rows_after"]

    result = run_cli(capsys, "export", "--run", run, "--data-dir", shared_data, "--vocabulary", "fitted",
                     "--vocabulary-recovery-steps", str(RECOVERY_STEPS), "--embedding-int4-share", str(INT4_SHARE),
                     *QUICK_EXPORT)
    assert result.exit_code == 0, error_line(result)
    assert "fitting it first" not in result.err  # the run's fitted student, as the training step wrote it
    assert _manifest(fitted_dir) == fitted_manifest
    export = run / run_files.EXPORT_DIR
    assert all(r["passed"] for r in json.loads((export / run_files.PARITY).read_text()))
    full_export = quick_exported_run / run_files.EXPORT_DIR
    for name in (run_files.ONNX_FP32, run_files.ONNX_INT8, run_files.ORT_MODEL):
        assert (export / name).stat().st_size < (full_export / name).stat().st_size, name

    manifest = _manifest(export)
    shipped = manifest["metrics"]["vocabulary"]
    assert manifest["config"]["vocabulary"] == "fitted"
    assert manifest["inputs"]["fitted_student"]["path"] == str(fitted_dir)
    # the fitted student's record, carried on, with what only the exported files tell: the sizes with the full table
    assert {k: v for k, v in shipped.items() if k != "full_vocabulary_sizes_bytes"} == record
    assert "vocabulary fitted: 30522 -> " in result.out
    full = full_export / run_files.ONNX_FP32
    assert abs(shipped["full_vocabulary_sizes_bytes"][run_files.ONNX_FP32] - full.stat().st_size) < FULL_SIZE_SLACK
    assert shipped["full_vocabulary_sizes_bytes"][run_files.ONNX_INT8] > (export / run_files.ONNX_INT8).stat().st_size
    table = manifest["metrics"]["int8_word_table"]
    assert table["rows"] == rows and table["int4_rows"] == round(INT4_SHARE * rows)

    # tokenizer.json, vocab.txt, config.json and the golden file are the fitted student's, and agree on its ids
    tokenizer = json.loads((export / run_files.TOKENIZER_JSON).read_text())
    assert tokenizer["model"]["vocab"] == json.loads((fitted_dir / run_files.TOKENIZER_JSON).read_text())["model"][
        "vocab"]
    vocab_lines = (export / run_files.VOCAB).read_text(encoding="utf-8").splitlines()
    assert len(vocab_lines) == len(tokenizer["model"]["vocab"]) == rows
    assert all(tokenizer["model"]["vocab"][token] == i for i, token in enumerate(vocab_lines))
    assert json.loads((export / run_files.MODEL_CONFIG).read_text())["vocab_size"] == rows
    assert tokenizer["post_processor"]["special_tokens"]["[CLS]"]["ids"] == [vocab_lines.index("[CLS]")]
    golden = json.loads((export / run_files.TOKENIZER_GOLDEN).read_text())
    assert all(0 <= i < rows for row in golden["texts"] for i in row["ids"])

    # other settings than the fit's: the library refuses before writing, naming the step; the command fits first
    from pocketbert.core.config.export_request import ExportRequest
    from pocketbert.core.config.recipe import complete_recipe, with_overrides
    from pocketbert.core.run.manifest import read_manifest
    from pocketbert.export.steps.pipeline import export_run

    # The other setting: a cap on the rows no smaller than the fit kept, so the refit keeps the very rows (its
    # tokenizer's checks are the first fit's, found in the cache) with other weights (no recovery steps).
    cap = str(rows)
    asked = {"export.vocabulary": "fitted", "vocabulary.max_rows": rows}
    recipe = with_overrides(complete_recipe(read_manifest(run / run_files.STUDENT_DIR).config.recipe), asked)
    request = ExportRequest(run, shared_data, run / run_files.STUDENT_DIR, recipe, frozenset(asked), overwrite=True)
    with pytest.raises(RunDirError, match=f"fitted with vocabulary.max_rows None, not {cap}.*pocketbert train "
                                          f"vocabulary .*--vocabulary-max-rows {cap} --overwrite"):
        export_run(request)
    assert _manifest(export) == manifest
    # the command replaces no fitted student without that stage's own --overwrite (the export's replaces export/)
    fitted_files = {p.name: _digest(p) for p in fitted_dir.iterdir() if p.is_file()}
    result = run_cli(capsys, "export", "--run", run, "--data-dir", shared_data, "--vocabulary", "fitted",
                     "--vocabulary-max-rows", cap, "--overwrite", *QUICK_EXPORT)
    assert result.exit_code == 2 and f"vocabulary.max_rows None, not {cap}" in error_line(result)
    assert "pocketbert train vocabulary" in error_line(result) and "--overwrite" in error_line(result)
    assert {p.name: _digest(p) for p in fitted_dir.iterdir() if p.is_file()} == fitted_files
    assert _manifest(export) == manifest
    first_model = _digest(export / run_files.ONNX_FP32)
    result = run_cli(capsys, "train", "vocabulary", "--run", run, "--data-dir", shared_data, "--device", "cpu",
                     "--vocabulary-max-rows", cap, "--overwrite")
    assert result.exit_code == 0, error_line(result)
    result = run_cli(capsys, "export", "--run", run, "--data-dir", shared_data, "--vocabulary", "fitted",
                     "--vocabulary-max-rows", cap, "--overwrite", *QUICK_EXPORT)
    assert result.exit_code == 0, error_line(result)
    assert "fitting it first" not in result.err
    refit = _manifest(fitted_dir)["metrics"]["vocabulary"]
    shipped = _manifest(export)["metrics"]["vocabulary"]
    assert refit["max_rows"] == rows and refit["rows_after"] == rows  # the cap kept every row the first fit kept
    assert {k: v for k, v in shipped.items() if k != "full_vocabulary_sizes_bytes"} == refit  # the refit's record
    assert _digest(export / run_files.ONNX_FP32) != first_model  # and its weights, not the first fit's
    assert "recovery" not in refit  # the recipe's own settings but the option given: no recovery steps
