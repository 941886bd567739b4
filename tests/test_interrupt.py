"""Stages killed midway leave the earlier complete artifact or none, never a partial one."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time

import pytest
from helpers import QUICK_EXPORT, cli_process, linked_copy

from pocketbert.core.run import atomic_folder, run_files
from pocketbert.train.checkpoint import FAULT_ENV

pytestmark = pytest.mark.slow
EXPORT_FILES = (run_files.MANIFEST, run_files.PARITY, run_files.ONNX_FP32, run_files.ONNX_INT8, run_files.ORT_MODEL, run_files.LABELS,
                *run_files.TOKENIZER_FILES)
KILL_DELAYS_S = (0.0, 2.0)  # after the export starts writing; writing the tiny student's export takes several s
WRITE_START_TIMEOUT_S = 120


def start(*args):
    return subprocess.Popen([sys.executable, "-m", "pocketbert.cli", *map(str, args)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def is_complete_export(folder) -> bool:
    return all((folder / name).is_file() for name in EXPORT_FILES) and \
        (folder / run_files.coreml_package_name("PocketBertSentiment")).is_dir()


@pytest.fixture(scope="module")
def student_run(tmp_path_factory, quick_exported_run):
    """The session's tiny teacher and student, in a run of this module's own that has no export yet."""
    return linked_copy(quick_exported_run, tmp_path_factory.mktemp("interrupt") / "run", [run_files.TEACHER_DIR,
                                                                                       run_files.STUDENT_DIR])


def wait_until_writing(process, run, stage) -> None:
    """Return once the stage's temporary folder exists; fail if the stage ends or never starts writing."""
    deadline = time.monotonic() + WRITE_START_TIMEOUT_S
    while not list(run.glob(f".{stage}.tmp-*")):
        assert process.poll() is None, "the stage ended before it started writing"
        assert time.monotonic() < deadline, "the stage never started writing"
        time.sleep(0.02)


def kill_while_writing(process, run, stage, delay):
    """SIGKILL the stage once its temporary folder exists, `delay` s later; fail unless the kill landed mid-write."""
    wait_until_writing(process, run, stage)
    time.sleep(delay)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL, "the stage finished before the kill: nothing was interrupted"


def test_killed_teacher_training_leaves_no_teacher(tmp_path, tiny_base, shared_data):
    run = tmp_path / "run"
    killed = cli_process("train", "teacher", "--run", run, "--model", tiny_base, "--preset", "tiny", "--data-dir", shared_data,
                 env={FAULT_ENV: "kill_after_step:2"})
    assert killed.returncode == -signal.SIGKILL
    assert not (run / run_files.TEACHER_DIR).exists()


def test_export_killed_at_random_moments(student_run, quick_exported_run, shared_data):
    rng = random.Random(7)
    export = student_run / run_files.EXPORT_DIR
    previous = None
    for attempt in range(3):
        args = ["export", "--run", student_run, "--data-dir", shared_data, *QUICK_EXPORT] + \
            (["--overwrite"] if previous else [])
        kill_while_writing(start(*args), student_run, run_files.EXPORT_DIR, rng.uniform(*KILL_DELAYS_S))
        before_rename = bool(list(student_run.glob(f".{run_files.EXPORT_DIR}.tmp-*")))  # killed before its rename
        if export.exists():
            assert is_complete_export(export), f"partial export after a kill (attempt {attempt})"
        elif previous is not None:
            # The replaced folder may be set aside only for an instant; the next stage puts it back.
            atomic_folder.recover_stage(student_run, run_files.EXPORT_DIR)
            assert is_complete_export(export)
        if previous is not None and before_rename:  # the interrupted run replaced nothing: the earlier one stays
            assert (export / run_files.MANIFEST).read_text() == previous
        if not export.exists() and previous is None:
            # what the command writes: the session's export of this student with these options, linked in
            linked_copy(quick_exported_run, student_run / "linked", [run_files.EXPORT_DIR])
            (student_run / "linked" / run_files.EXPORT_DIR).rename(export)
            (student_run / "linked").rmdir()
        elif not export.exists():
            done = cli_process("export", "--run", student_run, "--data-dir", shared_data, *QUICK_EXPORT)
            assert done.returncode == 0, done.stderr
        previous = (export / run_files.MANIFEST).read_text()
    done = cli_process("export", "--run", student_run, "--data-dir", shared_data, *QUICK_EXPORT, "--overwrite")
    assert done.returncode == 0, done.stderr
    assert is_complete_export(export)
    assert not list(export.glob("*.pte"))  # --executorch-variants none
    assert not [p.name for p in student_run.iterdir() if p.name.startswith(".")], "temporary folders were not cleaned"


def test_export_terminated_cleans_up_what_it_made(student_run, tmp_path, shared_data):
    """SIGTERM (a `kill`, a CI timeout) ends the export as Ctrl-C does: exit 143, its staging folder and the run's
    lock file removed, no export published."""
    from pocketbert.core.process.exit_codes import TERMINATED
    from pocketbert.core.run.run_lock import lock_path

    run = linked_copy(student_run, tmp_path / "run", [run_files.TEACHER_DIR, run_files.STUDENT_DIR])
    process = start("export", "--run", run, "--data-dir", shared_data, *QUICK_EXPORT)
    wait_until_writing(process, run, run_files.EXPORT_DIR)
    process.send_signal(signal.SIGTERM)
    process.wait()
    assert process.returncode == TERMINATED
    assert not (run / run_files.EXPORT_DIR).exists()
    assert not [p.name for p in run.iterdir() if p.name.startswith(".")], "temporary folders were left"
    assert not lock_path(run).exists()
