"""The run lock through real processes of the CLI: readers share it, a writer is refused while one reads, the
lock file is pocketbert's own (never opened through a link), a read-only run is read, and the launch variables
skip the lock only in a process that joined a torchrun group.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_nothing_lost import tree
from test_one_writer import finished, start, wait_for_lock

from pocketbert.core.run.run_lock import lock_path

pytestmark = pytest.mark.slow

USAGE_ERROR = 2
MARKER = ".pocketbert_output.json"
JOIN_TIMEOUT_S = 3  # POCKETBERT_DDP_JOIN_TIMEOUT for a process whose peers never come
COMMAND_TIMEOUT_S = 600
LAUNCH_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def cli(*args, env: dict | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARIABLES}
    return subprocess.run([sys.executable, "-m", "pocketbert.cli", *map(str, args)], capture_output=True, text=True,
                          env={**clean, **(env or {})}, timeout=COMMAND_TIMEOUT_S)


def one_line_refusal(result: subprocess.CompletedProcess, *words: str) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == USAGE_ERROR, result.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-2000:]
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def writer(run: Path, tiny_base: Path, shared_data: Path) -> tuple:
    """A command that writes the run (refused at its lock, before any work, when the run is held)."""
    return ("train", "teacher", "--run", run, "--model", tiny_base, "--preset", "tiny", "--device", "cpu",
            "--data-dir", shared_data, "--overwrite")


@pytest.fixture
def run(quick_exported_run, tmp_path) -> Path:
    copy = tmp_path / "runs" / "run"
    shutil.copytree(quick_exported_run, copy)
    return copy


def hold(folder: Path, shared: bool) -> subprocess.Popen:
    """Another process holding `folder`'s lock until it is killed."""
    holder = subprocess.Popen([sys.executable, "-c", "import time\n"
                               "from pocketbert.core.run.run_lock import folder_lock\n"
                               f"with folder_lock({str(folder)!r}, shared={shared}):\n"
                               "    print('held', flush=True); time.sleep(600)"], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_two_readers_run_together(run, tmp_path):
    first = start("export", "android", "--run", run, "--out", tmp_path / "a")
    wait_for_lock(run, first)
    first.send_signal(signal.SIGSTOP)  # holds its shared lock while the second reads
    try:
        second = cli("export", "android", "--run", run, "--out", tmp_path / "b")
    finally:
        first.send_signal(signal.SIGCONT)
    assert second.returncode == 0, second.stderr[-2000:]
    finished(first)
    written = {name: tree(tmp_path / name) for name in ("a", "b")}
    for files in written.values():
        files.pop(MARKER)  # when and from where each was made
    assert written["a"] == written["b"] and written["a"], "the two readers' app folders differ"
    assert not lock_path(run).exists(), "the last reader leaves no lock file"


def test_a_writer_is_refused_while_a_reader_holds_the_run(run, tiny_base, shared_data):
    reader = hold(run, shared=True)
    try:
        before = tree(run)
        refused = cli(*writer(run, tiny_base, shared_data))
        one_line_refusal(refused, str(run), f"pid {reader.pid}", "being read")
        assert tree(run) == before
    finally:
        reader.kill()
        reader.wait()


def test_a_reader_is_refused_while_a_writer_holds_the_run(run, tmp_path):
    holder = hold(run, shared=False)
    try:
        one_line_refusal(cli("export", "android", "--run", run, "--out", tmp_path / "app"), f"pid {holder.pid}",
                         "being written")
        assert not (tmp_path / "app").exists()
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("reads", [False, True], ids=["writer", "reader"])
def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(reads, run, tmp_path, tiny_base, shared_data):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"the user's file, which a lock must never rewrite\n")
    digest = hashlib.sha256(victim.read_bytes()).hexdigest()
    lock_path(run).symlink_to(victim)
    command = ("export", "android", "--run", run, "--out", tmp_path / "app") if reads else \
        writer(run, tiny_base, shared_data)
    one_line_refusal(cli(*command), str(lock_path(run)), "link")
    assert hashlib.sha256(victim.read_bytes()).hexdigest() == digest
    assert lock_path(run).is_symlink(), "the user's link is left where it was"


@pytest.mark.parametrize("reads", [False, True], ids=["writer", "reader"])
def test_a_lock_file_that_is_a_hard_link_is_refused_and_the_other_name_kept(reads, run, tmp_path, tiny_base,
                                                                            shared_data):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"the user's file, which a lock must never rewrite\n")
    digest = hashlib.sha256(victim.read_bytes()).hexdigest()
    os.link(victim, lock_path(run))
    command = ("export", "android", "--run", run, "--out", tmp_path / "app") if reads else \
        writer(run, tiny_base, shared_data)
    one_line_refusal(cli(*command), str(lock_path(run)), "hard link")
    assert hashlib.sha256(victim.read_bytes()).hexdigest() == digest
    assert victim.stat().st_nlink == 2, "both names are left where they were"


def test_a_lock_file_that_is_a_folder_is_refused(run, tmp_path):
    lock_path(run).mkdir()
    one_line_refusal(cli("export", "android", "--run", run, "--out", tmp_path / "app"), str(lock_path(run)),
                     "folder")


def read_only(folder: Path):
    """Make `folder` read-only for this process, really: a read-only bind mount as root (chmod does not stop
    root), the permission bits otherwise. Returns the undo."""
    if os.geteuid() != 0:
        mode = folder.stat().st_mode
        os.chmod(folder, 0o555)
        return lambda: os.chmod(folder, mode)
    if not shutil.which("mount"):
        pytest.skip("root ignores permission bits, and no mount(8) is here for a read-only bind mount")
    for command in (["mount", "--bind", str(folder), str(folder)], ["mount", "-o", "remount,bind,ro", str(folder)]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)
            pytest.skip(f"root ignores permission bits, and this machine refuses a read-only bind mount: "
                        f"{done.stderr.strip()}")
    return lambda: subprocess.run(["umount", "-l", str(folder)], check=True)


def test_a_read_only_run_is_read(run, tmp_path):
    """The run and the folder beside it (where its lock file would go) cannot be written: a reader goes on."""
    before = tree(run.parent)
    undo = read_only(run.parent)
    try:
        assert not os.access(run.parent, os.W_OK) or os.geteuid() == 0
        with pytest.raises(OSError):
            (run.parent / "probe").write_text("")  # the mount (or the bits) really refuses
        done = cli("export", "android", "--run", run, "--out", tmp_path / "app")
    finally:
        undo()
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "app").is_dir()
    assert tree(run.parent) == before


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("rank", [0, 1])
def test_launch_variables_in_a_shell_never_skip_the_lock(rank, run, tiny_base, shared_data):
    """A shell that kept torchrun's variables: rank 0 meets the lock; rank 1 waits for a group that never forms
    and ends in one line; neither writes the locked run."""
    holder = hold(run, shared=False)
    env = {"WORLD_SIZE": "2", "RANK": str(rank), "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
           "POCKETBERT_DDP_JOIN_TIMEOUT": str(JOIN_TIMEOUT_S)}
    try:
        before = tree(run)
        refused = cli(*writer(run, tiny_base, shared_data), env=env)
        one_line_refusal(refused, *([f"pid {holder.pid}"] if rank == 0 else ["could not join", "MASTER_ADDR"]))
        assert tree(run) == before
    finally:
        holder.kill()
        holder.wait()


def test_leftover_launch_variables_make_no_command_that_trains_nothing_wait_for_a_group(run):
    """bench and export never train in process groups: a shell's leftover RANK=1 leaves them as they are, meeting
    the lock like any process, instead of waiting for peers that never come."""
    holder = hold(run, shared=False)
    env = {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port()), "POCKETBERT_DDP_JOIN_TIMEOUT": str(JOIN_TIMEOUT_S)}
    try:
        for command in (("bench", "--run", run, "--overwrite"), ("export", "--run", run, "--overwrite")):
            one_line_refusal(cli(*command, env=env), f"pid {holder.pid}")
    finally:
        holder.kill()
        holder.wait()


def test_a_torchrun_address_that_does_not_resolve_is_one_line(run, tiny_base, shared_data):
    env = {"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "no-such-host.invalid", "MASTER_PORT": str(free_port()),
           "POCKETBERT_DDP_JOIN_TIMEOUT": str(JOIN_TIMEOUT_S)}
    before = tree(run)
    one_line_refusal(cli(*writer(run, tiny_base, shared_data), env=env), "could not join", "no-such-host.invalid")
    assert tree(run) == before


def test_an_invalid_thread_count_is_said_once(run, tmp_path):
    done = cli("export", "android", "--run", run, "--out", tmp_path / "app", env={"OMP_NUM_THREADS": "many"})
    assert done.returncode == 0, done.stderr[-2000:]
    said = [line for line in done.stderr.splitlines() if "OMP_NUM_THREADS" in line]
    assert len(said) == 1 and said[0].startswith("warning: ") and "'many'" in said[0], done.stderr
    assert "libgomp" not in done.stderr, done.stderr
