"""What an export or an app folder refuses before any work: an export length beyond the student's position table (the
app's model would fail on every input longer than its positions), and a program in export/ that the export did not
make (it has no gate, so no app folder ships it)."""

from __future__ import annotations

import json

from helpers import QUICK_EXPORT, error_line, linked_copy, run_cli

from pocketbert.core.run import run_files


def test_an_export_longer_than_the_students_positions_is_refused(quick_exported_run, tmp_path, capsys, shared_data):
    run = linked_copy(quick_exported_run, tmp_path / "run", ["teacher", "student"])
    positions = json.loads((run / run_files.STUDENT_DIR / run_files.MODEL_CONFIG).read_text())["max_position_embeddings"]
    result = run_cli(capsys, "export", "--run", run, "--data-dir", shared_data, "--set",
                     f"export.max_length={positions + 1}", *QUICK_EXPORT)
    assert result.exit_code == 2
    assert f"beyond the student's {positions} positions" in error_line(result)
    assert not (run / run_files.EXPORT_DIR).exists()


def test_a_package_the_export_did_not_make_is_never_shipped(quick_exported_run, tmp_path, capsys):
    import shutil

    from pocketbert.core.tasks.registry import TASK_CLASSES
    from pocketbert.core.run.run_files import coreml_package_name

    run = linked_copy(quick_exported_run, tmp_path / "run")
    export = run / run_files.EXPORT_DIR
    manifest = json.loads((export / run_files.MANIFEST).read_text())
    stem = TASK_CLASSES[manifest["config"]["task"]].coreml_class_stem
    made = manifest["config"]["coreml_variants"]
    assert "int8" not in made
    shutil.copytree(export / coreml_package_name(stem, made[0]), export / coreml_package_name(stem, "int8"),
                    copy_function=shutil.copy)  # a package copied in by hand
    result = run_cli(capsys, "export", "ios", "--run", run, "--variant", "int8", "--out", tmp_path / "app")
    assert result.exit_code == 2 and "no Core ML int8 variant" in error_line(result), result.err
    assert not (tmp_path / "app").exists()
