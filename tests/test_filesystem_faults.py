"""File-system faults through the real CLI: a full disk, a read-only folder, a file where a folder should be.

Each ends in exit status 2 and one `error:` line that names the path, with no traceback, nothing written and
the folders that were there before byte-identical. The disks are real: a small tmpfs filled up, or a
read-only bind mount (both need root; the tests skip with the reason where the machine refuses a mount).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from helpers import error_line, run_cli, run_with_teacher

from pocketbert.core.run.cache_dir import CACHE_ENV
from pocketbert.core.process.exit_codes import USAGE
from pocketbert.train.teacher_cache import CACHE_SUBDIR

pytestmark = pytest.mark.slow
LEFT_FREE = 128 * 1024  # bytes left on a "full" disk: room for folders and a manifest, none for weights
CHUNK = 1024 * 1024


@pytest.fixture
def mounts():
    """mount(kind, where, size=None): a tmpfs of `size`, or `where` bind-mounted onto itself read-only;
    unmounted after the test. Skips the test where the machine does not allow mounts."""
    made: list[Path] = []

    def mount(kind: str, where: Path, size: str | None = None) -> Path:
        where.mkdir(parents=True, exist_ok=True)
        commands = ([["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)]] if kind == "tmpfs" else
                    [["mount", "--bind", str(where), str(where)], ["mount", "-o", "remount,bind,ro", str(where)]])
        if os.geteuid() != 0 or not shutil.which("mount"):
            pytest.skip("mounting a tmpfs or a read-only bind mount needs root and mount(8)")
        for command in commands:
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                pytest.skip(f"this machine refuses `{' '.join(command[:3])}`: {done.stderr.strip()}")
            if command is commands[0]:
                made.append(where)
        return where

    yield mount
    for where in reversed(made):
        subprocess.run(["umount", "-l", str(where)], check=True)


def fill(disk: Path, leave: int = LEFT_FREE) -> None:
    """Fill the file system holding `disk` until only `leave` bytes are free."""
    filler = disk / ".filler"
    with open(filler, "wb", buffering=0) as handle:  # unbuffered: the ENOSPC comes from write, not from close
        try:
            while handle.write(b"\0" * CHUNK):
                pass
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    os.truncate(filler, max(0, filler.stat().st_size - leave))


def snapshot(folder: Path) -> dict[str, str]:
    """Every path under `folder` with its content's sha256 ('dir' for a folder): equal snapshots, equal trees."""
    return {str(p.relative_to(folder)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(folder).rglob("*"))}


def assert_one_line_error(result, *named: str) -> str:
    assert result.exit_code == USAGE, (result.exit_code, result.err)
    assert "Traceback" not in result.err
    line = error_line(result)
    assert line.startswith("error: "), result.err
    for text in named:
        assert text in line, line
    return line


def no_leftovers(folder: Path) -> None:
    assert not [p for p in Path(folder).rglob(".*.tmp-*")], "a temporary folder was left behind"


# --- the run directory -------------------------------------------------------------------------------------------

def test_run_that_is_a_file_is_one_line(tmp_path, capsys, tiny_base, shared_data):
    run = tmp_path / "notes.txt"
    run.write_text("not a run directory\n")
    result = run_cli(capsys, "train", "teacher", "--run", run, "--model", tiny_base, "--preset", "tiny",
                     "--data-dir", shared_data)
    assert_one_line_error(result, str(run))
    assert run.read_text() == "not a run directory\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_read_only_run_directory_is_one_line(tmp_path, capsys, mounts, tiny_base, shared_data):
    disk = tmp_path / "ro"
    (disk / "earlier").mkdir(parents=True)
    (disk / "earlier" / "keep.txt").write_text("kept")
    mounts("ro", disk)
    before = snapshot(disk)
    result = run_cli(capsys, "train", "teacher", "--run", disk / "run", "--model", tiny_base, "--preset", "tiny",
                     "--data-dir", shared_data)
    line = assert_one_line_error(result, str(disk / "run"), "read-only")
    assert "nothing half-written" in line
    assert snapshot(disk) == before


def test_full_disk_while_writing_the_student(tmp_path, capsys, mounts, teacher_run, shared_data):
    disk = mounts("tmpfs", tmp_path / "disk", size="24m")
    run = run_with_teacher(teacher_run, disk / "run")
    fill(disk)
    before = snapshot(disk)
    result = run_cli(capsys, "train", "distill", "--run", run, "--preset", "tiny", "--data-dir", shared_data)
    assert_one_line_error(result, str(run), "no space left")
    no_leftovers(disk)
    assert snapshot(disk) == before, "the failed stage left something, or changed the teacher"


def test_full_disk_while_importing_a_phone_measurement(tmp_path, capsys, mounts):
    disk = mounts("tmpfs", tmp_path / "disk", size="1m")
    run = disk / "run"
    (run / "earlier").mkdir(parents=True)
    (run / "earlier" / "keep.txt").write_text("kept")
    phone = tmp_path / "phone.json"  # on another disk: only the import's own write meets the full one
    phone.write_text(json.dumps({"device": "iPhone 15 Pro", "compute_units": "ComputeUnit.ALL",
                                 "predict": {"statistics": {"median": 4.0}, "samples": [4.0, 4.1, 3.9, 4.0]}}))
    fill(disk, leave=0)
    before = snapshot(disk)
    result = run_cli(capsys, "bench", "import", phone, "--run", run, "--device", "iphone-15-pro",
                     "--sequence-length", "32")
    assert_one_line_error(result, str(run), "no space left")
    assert snapshot(disk) == before, "a failed import left a partial file or an empty folder"


# --- the cache ---------------------------------------------------------------------------------------------------

@pytest.fixture
def cache_at(monkeypatch):
    def point(path: Path) -> Path:
        monkeypatch.setenv(CACHE_ENV, str(path))
        return path
    return point


def distill_from(teacher_run, tmp_path, capsys, shared_data):
    run = run_with_teacher(teacher_run, tmp_path / f"run-{uuid.uuid4().hex[:6]}")
    before = snapshot(run)
    result = run_cli(capsys, "train", "distill", "--run", run, "--preset", "tiny", "--data-dir", shared_data)
    assert snapshot(run) == before, "a refused distillation wrote into the run"
    return result


def test_cache_that_is_a_file_is_one_line(tmp_path, capsys, cache_at, teacher_run, shared_data):
    cache = cache_at(tmp_path / "cache-file")
    cache.write_text("a file, not a folder")
    line = assert_one_line_error(distill_from(teacher_run, tmp_path, capsys, shared_data), str(cache), CACHE_ENV)
    assert "None" not in line
    assert cache.read_text() == "a file, not a folder"


def test_read_only_cache_is_one_line(tmp_path, capsys, mounts, cache_at, teacher_run, shared_data):
    cache = cache_at(mounts("ro", tmp_path / "ro-cache"))
    line = assert_one_line_error(distill_from(teacher_run, tmp_path, capsys, shared_data), str(cache), CACHE_ENV)
    assert "None" not in line
    assert list(cache.iterdir()) == []


def test_full_disk_under_the_cache_says_so(tmp_path, capsys, mounts, cache_at, teacher_run, shared_data):
    """A real ENOSPC while the teacher's outputs are written: numpy reports it with no errno, which the cache's
    message once printed as 'None'."""
    cache = cache_at(mounts("tmpfs", tmp_path / "cache-disk", size="1m"))
    fill(cache, leave=32 * 1024)
    line = assert_one_line_error(distill_from(teacher_run, tmp_path, capsys, shared_data), "disk filled up",
                                 CACHE_ENV)
    assert "None" not in line
    assert [p.name for p in cache.rglob("*") if p.name != ".filler"] == [CACHE_SUBDIR]


# --- app folders (--out) -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("app", ["ios", "android"])
def test_full_disk_while_writing_an_app_folder(app, tmp_path, capsys, mounts, exported_run):
    disk = mounts("tmpfs", tmp_path / "disk", size="4m")
    (disk / "earlier").mkdir()
    (disk / "earlier" / "keep.txt").write_text("kept")
    fill(disk)
    before, run_before = snapshot(disk), snapshot(exported_run)
    result = run_cli(capsys, "export", app, "--run", exported_run, "--out", disk / app)
    assert_one_line_error(result, str(disk / app), "no space left")
    no_leftovers(disk)
    assert snapshot(disk) == before
    assert snapshot(exported_run) == run_before


def test_read_only_out_parent_is_one_line(tmp_path, capsys, mounts, exported_run):
    disk = mounts("ro", tmp_path / "ro")
    result = run_cli(capsys, "export", "android", "--run", exported_run, "--out", disk / "android")
    assert_one_line_error(result, str(disk / "android"), "read-only")
    assert list(disk.iterdir()) == []


def test_out_parent_that_is_a_file_is_one_line(tmp_path, capsys, exported_run):
    blocker = tmp_path / "apps"
    blocker.write_text("a file")
    result = run_cli(capsys, "export", "android", "--run", exported_run, "--out", blocker / "android")
    assert_one_line_error(result, str(blocker))
    assert blocker.read_text() == "a file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["apps"]
