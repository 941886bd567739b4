"""One writer per run, through real concurrent processes of the CLI.

The first writer is caught holding its lock (read from the lock file it writes) and frozen with SIGSTOP, so the
second command certainly runs while the first holds the run: no timing decides the outcome. The survivor then
finishes, and what it printed is what is on disk.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import cli_process, linked_copy, run_with_teacher

from pocketbert.core.run import run_files
from pocketbert.core.run.run_lock import RunInUseError, folder_lock, lock_path

pytestmark = pytest.mark.slow
LOCK_TIMEOUT_S = 120     # for a command to start and take its lock, on a loaded 2-core machine
EXIT_TIMEOUT_S = 60      # for a process whose parent was killed to end
FINISH_TIMEOUT_S = 1800  # for a tiny stage to finish on a loaded 2-core machine
POLL_S = 0.01
TINY_EXPORT = ("--parity-examples", "8", "--coreml-examples", "1", "--coreml-variants", "fp16",
               "--coreai-variants", "none", "--executorch-variants", "none")


def start(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pocketbert.cli", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def lock_holder(folder: Path) -> dict | None:
    try:
        return json.loads(lock_path(folder).read_text())
    except (OSError, ValueError):
        return None


def wait_for_lock(folder: Path, process: subprocess.Popen, pid: int | None = None) -> dict:
    """The lock record of `folder` once it names `pid` (default: the process itself)."""
    pid = pid or process.pid
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    while True:
        holder = lock_holder(folder)
        if holder and holder.get("pid") == pid:
            return holder
        if process.poll() is not None:
            raise AssertionError(f"the command ended (exit {process.returncode}) before it held {folder}: "
                                 f"{process.communicate()[1][-1500:]}")
        assert time.monotonic() < deadline, f"no process took {folder}'s lock"
        time.sleep(POLL_S)


def run_while_frozen(first: subprocess.Popen, folder: Path, *commands) -> list[subprocess.CompletedProcess]:
    """Run the other commands while the first, holding `folder`, is frozen; the first then goes on."""
    wait_for_lock(folder, first)
    first.send_signal(signal.SIGSTOP)
    try:
        return [cli_process(*command) for command in commands]
    finally:
        first.send_signal(signal.SIGCONT)


def assert_refused_naming(second: subprocess.CompletedProcess, first: subprocess.Popen) -> None:
    lines = [line for line in second.stderr.splitlines() if line.strip()]
    assert second.returncode == 2, second.stderr
    assert lines[-1].startswith("error:") and f"pid {first.pid} on {socket.gethostname()}" in lines[-1], lines[-1]
    assert "Traceback" not in second.stderr


def finished(process: subprocess.Popen) -> str:
    out, err = process.communicate(timeout=FINISH_TIMEOUT_S)
    assert process.returncode == 0, err
    return out


@pytest.fixture(scope="module")
def student_run(quick_exported_run, tmp_path_factory):
    """The session's tiny teacher and student, in a run of this module's own that has no export yet."""
    return linked_copy(quick_exported_run, tmp_path_factory.mktemp("one-writer") / "student",
                       [run_files.TEACHER_DIR, run_files.STUDENT_DIR])


def test_a_second_distillation_is_refused_and_the_first_prints_what_it_wrote(teacher_run, tmp_path, shared_data):
    run = run_with_teacher(teacher_run, tmp_path / "run")
    args = ("train", "distill", "--run", run, "--preset", "tiny", "--data-dir", shared_data, "--device", "cpu")
    first = start(*args, "--seed", "1")
    [second] = run_while_frozen(first, run, (*args, "--seed", "2"))
    assert_refused_naming(second, first)
    printed = finished(first)
    manifest = json.loads((run / run_files.STUDENT_DIR / run_files.MANIFEST).read_text())
    assert manifest["config"]["recipe"]["seed"] == 1
    accuracy = float(re.search(r"student: accuracy (\d\.\d{4})", printed).group(1))
    assert accuracy == pytest.approx(manifest["metrics"]["eval"]["accuracy"], abs=5e-5)
    assert not lock_path(run).exists(), "the lock file outlived its command"


def test_a_second_teacher_is_refused_without_touching_the_first_ones_checkpoint(tiny_base, tmp_path, shared_data):
    run = tmp_path / "run"
    args = ("train", "teacher", "--run", run, "--model", tiny_base, "--preset", "tiny", "--data-dir", shared_data,
            "--device", "cpu")
    first = start(*args)
    [second] = run_while_frozen(first, run, args)
    assert_refused_naming(second, first)
    finished(first)
    assert (run / run_files.TEACHER_DIR / run_files.MANIFEST).is_file()


def test_a_second_export_and_an_app_folder_are_refused_and_the_first_export_is_whole(student_run, tmp_path,
                                                                                       shared_data):
    """Both write the run: another export, and `export android` (whose folder lies inside the run)."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(student_run, run)
    args = ("export", "--run", run, "--data-dir", shared_data, *TINY_EXPORT)
    first = start(*args)
    for second in run_while_frozen(first, run, (*args, "--overwrite"), ("export", "android", "--run", run)):
        assert_refused_naming(second, first)
    printed = finished(first)
    parity = json.loads((run / run_files.EXPORT_DIR / run_files.PARITY).read_text())
    count = int(re.search(r"export: (\d+) models passed", printed).group(1))
    assert count == len(parity)


def test_a_lock_whose_holder_died_is_taken_again(tmp_path):
    run = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                               "from pocketbert.core.run.run_lock import folder_lock\n"
                               f"with folder_lock({str(run)!r}):\n"
                               "    print('held', flush=True); time.sleep(600)"],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(RunInUseError, match=f"pid {holder.pid}"):
        with folder_lock(run):
            pass
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert lock_path(run).exists(), "a killed holder cannot remove its lock file"
    with folder_lock(run):  # the kernel released the dead holder's lock: the stale file is no obstacle
        assert lock_holder(run)["pid"] == os.getpid()


TINY_RUNG = """
description: killed in its first rung
rungs:
  - {name: default, label: the run's own student, preset: tiny, in_run: true}
  - {name: static, label: static table, preset: tiny,
     set: {distill.recipe: static, distill.cos_weight: 0, static.pca_dims: 16}}
train: {max_train_examples: 64}
within_points: 1.0
"""


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie still answers: it is gone once its parent (init, after the ladder's death) reaped it
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1].startswith("Z")
    except OSError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to tell a zombie")
def test_a_killed_ladder_takes_its_running_step_with_it_and_runs_again(teacher_run, tmp_path, shared_data):
    run = run_with_teacher(teacher_run, tmp_path / "run")
    spec = tmp_path / "one-rung.yaml"
    spec.write_text(TINY_RUNG)
    args = ("ladder", "--run", run, "--ladder", spec, "--device", "cpu", "--data-dir", shared_data)
    ladder = start(*args)
    ladder_lock = wait_for_lock(tmp_path / "run-ladder", ladder)
    assert ladder_lock["pid"] == ladder.pid
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    while (lock_holder(run) or {}).get("pid") in (None, ladder.pid):
        assert ladder.poll() is None and time.monotonic() < deadline, "the ladder's step never took the rung's lock"
        time.sleep(POLL_S)
    step_pid = lock_holder(run)["pid"]
    ladder.send_signal(signal.SIGKILL)  # what the out-of-memory killer does: no handler runs in the ladder
    ladder.communicate()
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    while not gone(step_pid):
        assert time.monotonic() < deadline, f"the ladder's step (pid {step_pid}) outlived the killed ladder"
        time.sleep(POLL_S)
    again = start(*args)
    student = run / run_files.STUDENT_DIR / run_files.MANIFEST
    deadline = time.monotonic() + 600
    while not student.is_file():
        assert again.poll() is None, f"the ladder run again stopped: {again.communicate()[1][-2000:]}"
        assert time.monotonic() < deadline, "the ladder run again never finished its rung"
        time.sleep(0.1)
    again.kill()
    again.communicate()
    assert json.loads(student.read_text())["stage"] == run_files.STUDENT_DIR
