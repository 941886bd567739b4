"""Nothing lost: --out with --overwrite replaces only an earlier output of the same command; app
folders and bench take only the files whose hashes the export recorded; compare reads no path outside the runs
it was given; a run is read from any folder. Every refusal: exit 2, one `error:` line, nothing written or deleted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import QUICK_EXPORT, error_line, run_cli, run_cli_steps, run_with_teacher

pytestmark = pytest.mark.slow

USAGE_ERROR = 2
TINY = ["--preset", "tiny"]
LOCAL_DATA_ROWS = 200  # a local data file: enough for the tiny recipe's eval split
OUTSIDE_WALL_TIME_S = 12345.0  # a number only a manifest outside the runs holds
MARKER = ".pocketbert_output.json"


def tree(root: Path) -> dict:
    """Every file and link under root, with its bytes' hash (or link target): equal trees, nothing lost."""
    found = {}
    for path in sorted(Path(root).rglob("*")):
        key = str(path.relative_to(root))
        if path.is_symlink():
            found[key] = "link -> " + os.readlink(path)
        elif path.is_file():
            found[key] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            found[key] = "dir"
    return found


def exit_code_of(*args) -> int:
    """The real CLI in-process, for module fixtures (capsys is per test): its exit status."""
    from pocketbert.cli import main

    try:
        main([str(a) for a in args])
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


def refused(result, *words) -> str:
    """A one-line refusal: exit 2, a single `error:` line, no traceback; the line names each of `words`."""
    line = error_line(result)
    assert result.exit_code == USAGE_ERROR, result.err
    assert line.startswith("error: ") and "Traceback" not in result.err, result.err
    for word in words:
        assert word in line, line
    return line


@pytest.fixture(scope="module")
def exported(teacher_run, tmp_path_factory):
    """A run imported from the tiny teacher with a local data file named relative to one folder, then exported
    by `--run <absolute path>` from another folder. Returns the run and that export's exit status; where it
    failed, the run is exported again from the first folder, so the other tests still have an export."""
    root = tmp_path_factory.mktemp("nothing-lost")
    trained_in, elsewhere = root / "trained-in", root / "elsewhere"
    trained_in.mkdir()
    elsewhere.mkdir()
    rows = (Path(os.environ["POCKETBERT_DATA_DIR"]) / "sst2" / "train.tsv").read_text().splitlines()
    (trained_in / "reviews.tsv").write_text("\n".join(rows[:LOCAL_DATA_ROWS + 1]) + "\n")
    run = root / "runs" / "local"
    with contextlib.chdir(trained_in):
        run_cli_steps(["import", "--run", run, "--model", teacher_run / "teacher", *TINY, "--dataset", "reviews.tsv"])
    with contextlib.chdir(elsewhere):
        relocated = exit_code_of("export", "--run", run, *QUICK_EXPORT)
    if relocated != 0:
        with contextlib.chdir(trained_in):
            run_cli_steps(["export", "--run", run, *QUICK_EXPORT])
    return run, relocated


@pytest.fixture(scope="module")
def sst2_runs(teacher_run, tmp_path_factory, shared_data):
    """Two runs whose students are the tiny teacher, imported (no teacher of their own): compare's inputs."""
    root = tmp_path_factory.mktemp("imported")
    runs = [root / "a", root / "b"]
    run_cli_steps(*[["import", "--run", run, "--model", teacher_run / "teacher", *TINY, "--dataset", "sst2",
                     "--data-dir", shared_data] for run in runs])
    return runs


@pytest.fixture
def run_copy(exported, tmp_path):
    """A copy of the exported run, for a test that edits its files."""
    return Path(shutil.copytree(exported[0], tmp_path / "run"))


# --- class 8: a run is read from any folder ---------------------------------------------------------------------

def test_export_reads_a_run_from_another_folder(exported):
    run, relocated = exported
    assert relocated == 0, "`export --run <absolute path>` from another folder did not find the run's dataset"
    recorded = json.loads((run / "student" / "manifest.json").read_text())["config"]["recipe"]["dataset"]
    assert Path(recorded).is_absolute() and Path(recorded).is_file()


def test_an_empty_run_name_is_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for command in (["export", "ios"], ["export", "android"], ["bench"]):
        refused(run_cli(capsys, *command, "--run", ""), "--run is empty")
    assert list(tmp_path.iterdir()) == []  # not ./runs


# --- class 1: --overwrite replaces only an earlier output of the same command ---------------------------------

OVERWRITE_REFUSALS = {  # test id: (command, --out, words the error line holds); {run} is the run directory
    "android-over-the-run": ("android", "{run}", ("holds", "export", "choose another --out")),
    "ios-over-the-export": ("ios", "{run}/export", ("is", "which `pocketbert export ios` reads")),
    "android-inside-the-export": ("android", "{run}/export/android", ("lies inside",)),
    "ios-over-the-folder-of-runs": ("ios", "{run}/..", ("holds",)),
    "android-over-a-stage": ("android", "{run}/student", ("is a stage folder",)),
}


@pytest.mark.parametrize("case", OVERWRITE_REFUSALS, ids=list(OVERWRITE_REFUSALS))
def test_overwrite_never_replaces_a_run_a_stage_or_an_input(capsys, run_copy, case):
    platform, out, words = OVERWRITE_REFUSALS[case]
    before = tree(run_copy.parent)
    result = run_cli(capsys, "export", platform, "--run", run_copy, "--out", out.format(run=run_copy), "--overwrite")
    refused(result, *words)
    assert tree(run_copy.parent) == before


def test_overwrite_refuses_a_folder_the_command_did_not_make(capsys, exported, tmp_path):
    run = exported[0]
    mine = tmp_path / "MyApp"
    mine.mkdir()
    (mine / "ContentView.swift").write_text("// the app's own code")
    before = tree(tmp_path)
    refused(run_cli(capsys, "export", "ios", "--run", run, "--out", mine), "pass --overwrite")
    refused(run_cli(capsys, "export", "ios", "--run", run, "--out", mine, "--overwrite"), "not one", MARKER)
    # an Android folder is not an iOS folder: each command replaces only its own output
    assert run_cli(capsys, "export", "android", "--run", run, "--out", tmp_path / "android").exit_code == 0
    before = tree(tmp_path)
    refused(run_cli(capsys, "export", "ios", "--run", run, "--out", tmp_path / "android", "--overwrite"),
            "export ios", "not one")
    assert tree(tmp_path) == before


@pytest.mark.parametrize("platform", ["ios", "android"])
def test_overwrite_replaces_the_same_commands_earlier_output(capsys, exported, tmp_path, platform):
    run, out = exported[0], tmp_path / platform
    assert run_cli(capsys, "export", platform, "--run", run, "--out", out).exit_code == 0
    assert json.loads((out / MARKER).read_text())["made_by"] == f"export {platform}"
    again = run_cli(capsys, "export", platform, "--run", run, "--out", out, "--overwrite")
    assert again.exit_code == 0, again.err
    assert (out / "README.md").is_file()


@pytest.mark.parametrize("platform", ["ios", "android"])
def test_overwrite_refuses_an_app_folder_holding_files_the_command_did_not_write(capsys, exported, tmp_path,
                                                                                platform):
    """--overwrite never deletes files the user added to an app folder: it names them and keeps them; a file of the
    command's that the user changed counts as the user's."""
    run, out = exported[0], tmp_path / platform
    assert run_cli(capsys, "export", platform, "--run", run, "--out", out).exit_code == 0
    (out / "MyNotes.txt").write_text("the user's own file")
    (out / "README.md").write_text((out / "README.md").read_text() + "\nthe user's own paragraph\n")
    before = tree(tmp_path)
    refused(run_cli(capsys, "export", platform, "--run", run, "--out", out, "--overwrite"),
            "did not write", "MyNotes.txt", "README.md (changed since)")
    assert tree(tmp_path) == before
    (out / "MyNotes.txt").unlink()
    (out / "README.md").unlink()
    assert run_cli(capsys, "export", platform, "--run", run, "--out", out, "--overwrite").exit_code == 0
    assert (out / "README.md").is_file()


def test_compare_never_overwrites_a_run_or_its_inputs(capsys, sst2_runs, run_copy, tmp_path):
    before = tree(tmp_path)
    refused(run_cli(capsys, "compare", *sst2_runs, "--out", run_copy, "--overwrite"), "is a run")
    refused(run_cli(capsys, "compare", *sst2_runs, "--out", sst2_runs[0], "--overwrite"), "is", "reads")
    refused(run_cli(capsys, "compare", *sst2_runs, "--out", sst2_runs[0].parent, "--overwrite"), "holds")
    assert tree(tmp_path) == before
    out = tmp_path / "compare"
    assert run_cli(capsys, "compare", *sst2_runs, "--out", out).exit_code == 0
    assert run_cli(capsys, "compare", *sst2_runs, "--out", out, "--overwrite").exit_code == 0


def test_a_training_stage_never_replaces_its_own_input(capsys, teacher_run, tmp_path, shared_data):
    """`train prune --out-run` equal to `--run`, and `train distill --teacher <run>/student`: the folder the
    stage would replace is the one it reads."""
    run = run_with_teacher(teacher_run, tmp_path / "run")
    data = ["--data-dir", shared_data]
    assert run_cli(capsys, "train", "distill", "--run", run, *TINY, *data).exit_code == 0
    before = tree(tmp_path)
    refused(run_cli(capsys, "train", "prune", "--run", run, "--out-run", run, *TINY, *data, "--overwrite"),
            "--out-run", "which `pocketbert train prune` reads")
    refused(run_cli(capsys, "train", "distill", "--run", run, "--teacher", run / "student", *TINY, *data,
                    "--overwrite"), "which `pocketbert train distill` reads")
    assert tree(tmp_path) == before


def test_overwrite_never_replaces_a_folder_that_only_bears_a_stages_name(capsys, tiny_base, tmp_path, shared_data):
    own = tmp_path / "teacher"  # the user's folder, in the folder given as --run
    own.mkdir()
    (own / "notes.txt").write_text("the user's")
    before = tree(tmp_path)
    refused(run_cli(capsys, "train", "teacher", "--run", tmp_path, "--model", tiny_base, *TINY,
                    "--data-dir", shared_data, "--overwrite"), "not one", "manifest.json")
    assert tree(tmp_path) == before


# --- class 7: compare reads only the runs it was given ----------------------------------------------------------

def test_compare_of_imported_runs_needs_no_teacher(capsys, sst2_runs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an empty recorded teacher path once meant: hash the working directory
    result = run_cli(capsys, "compare", *sst2_runs, "--out", tmp_path / "cmp")
    assert result.exit_code == 0, result.err
    rows = json.loads((tmp_path / "cmp" / "compare.json").read_text())["rows"]
    assert len(rows) == len(sst2_runs) and all(r["kind"].startswith("student") for r in rows)


def test_compare_follows_no_teacher_path_out_of_the_runs(capsys, sst2_runs, tmp_path):
    """A student manifest naming a teacher outside its run: compare must not read that folder."""
    outside = tmp_path / "somewhere-else"
    outside.mkdir()
    (outside / "manifest.json").write_text(json.dumps({"wall_time_s": OUTSIDE_WALL_TIME_S}))
    runs = [Path(shutil.copytree(run, tmp_path / run.name)) for run in sst2_runs]
    for run in runs:
        path = run / "student" / "manifest.json"
        manifest = json.loads(path.read_text())
        manifest["config"]["teacher"] = str(outside)
        manifest["inputs"]["teacher"] = {"path": str(outside), "sha256": "0" * 64}
        manifest["metrics"]["teacher_eval"] = manifest["metrics"]["eval"]
        path.write_text(json.dumps(manifest))
    result = run_cli(capsys, "compare", *runs, "--out", tmp_path / "cmp")
    assert result.exit_code == 0, result.err
    rows = json.loads((tmp_path / "cmp" / "compare.json").read_text())["rows"]
    teachers = [r for r in rows if r["kind"] == "teacher"]
    assert len(teachers) == 1  # one teacher, by its recorded hash
    assert teachers[0]["training_seconds"] is None
    assert not any(str(outside) in source for r in rows for source in r["sources"])


# --- class 6: app folders and bench take only what the export proved ----------------------------------------------

def test_export_manifest_hashes_every_artifact(exported):
    from pocketbert.export.programs.artifacts import verified
    from pocketbert.core.run.manifest import read_manifest, sha256_of
    from pocketbert.core.run.stage_records import ExportRecord

    export = exported[0] / "export"
    recorded = json.loads((export / "manifest.json").read_text())["artifacts"]
    on_disk = {p.name for p in export.iterdir() if p.name != "manifest.json"}
    assert set(recorded) == on_disk
    for name, entry in recorded.items():
        assert entry["sha256"] == sha256_of(export / name), name
    # and an untouched export passes the check app folders and bench make, every artifact at once
    manifest = read_manifest(export, ExportRecord)
    assert verified(export, manifest, sorted(recorded), exported[0]) == [export / name for name in sorted(recorded)]


def swap_labels(export: Path) -> None:
    labels = json.loads((export / "labels.json").read_text())
    (export / "labels.json").write_text(json.dumps(labels[::-1]))


@pytest.mark.parametrize("platform", ["ios", "android"])
def test_app_folder_refuses_labels_edited_after_export(capsys, run_copy, platform):
    swap_labels(run_copy / "export")
    before = tree(run_copy)
    result = run_cli(capsys, "export", platform, "--run", run_copy)
    refused(result, "labels.json", "changed after the export", "pocketbert export")
    assert tree(run_copy) == before and not (run_copy / platform).exists()


@pytest.mark.parametrize("platform", ["ios", "android"])
def test_app_folder_follows_no_link_out_of_the_export(capsys, run_copy, tmp_path, platform):
    """A link to a file of the very same bytes is still refused: an export holds its own files."""
    golden = run_copy / "export" / "tokenizer_golden.json"
    outside = tmp_path / "outside.json"
    shutil.copyfile(golden, outside)
    golden.unlink()
    golden.symlink_to(outside)
    result = run_cli(capsys, "export", platform, "--run", run_copy)
    refused(result, "tokenizer_golden.json", "symbolic link")
    assert not (run_copy / platform).exists()


def test_bench_refuses_a_model_changed_after_export(capsys, run_copy):
    export = run_copy / "export"
    # a valid model, but not the one the parity gate proved: the fp32 graph under the int8 name
    shutil.copyfile(export / "model.onnx", export / "model.int8.onnx")
    result = run_cli(capsys, "bench", "--run", run_copy, "--time-cap", "0.1")
    refused(result, "model.int8.onnx", "changed after the export")
    assert not (run_copy / "bench").exists()
