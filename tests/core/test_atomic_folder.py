"""The run-directory contract: a stage's folder appears whole or not at all."""

from __future__ import annotations

import json

import pytest

from pocketbert.core.errors import RunDirError
from pocketbert.core.run.atomic_folder import recover_stage, require_stage, staged_output
from pocketbert.core.run.run_files import MANIFEST


def test_failed_stage_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with staged_output(tmp_path, "export") as out:
            (out / "model.onnx").write_text("partial")
            raise RuntimeError("conversion failed")
    assert list(tmp_path.iterdir()) == []


def test_failed_overwrite_keeps_the_earlier_complete_folder(tmp_path):
    with staged_output(tmp_path, "export") as out:
        (out / "model.onnx").write_text("v1")
        (out / MANIFEST).write_text(json.dumps({"stage": "export"}))
    with pytest.raises(KeyboardInterrupt):
        with staged_output(tmp_path, "export", overwrite=True) as out:
            (out / "model.onnx").write_text("v2-partial")
            raise KeyboardInterrupt
    assert (tmp_path / "export" / "model.onnx").read_text() == "v1"
    assert [p.name for p in tmp_path.iterdir()] == ["export"]


def test_overwrite_replaces_and_refusal_without_it(tmp_path):
    with staged_output(tmp_path, "student") as out:
        (out / "a").write_text("1")
        (out / MANIFEST).write_text(json.dumps({"stage": "student"}))
    with pytest.raises(RunDirError, match="already exists: pass --overwrite"):
        with staged_output(tmp_path, "student"):
            pass
    with staged_output(tmp_path, "student", overwrite=True) as out:
        (out / "b").write_text("2")
    assert sorted(p.name for p in (tmp_path / "student").iterdir()) == ["b"]


@pytest.mark.parametrize("record", [None, "not json", json.dumps({"stage": "teacher"})])
def test_overwrite_replaces_only_a_folder_the_stage_wrote(tmp_path, record):
    """A folder that only bears the stage's name (no manifest, an unreadable one, another stage's) is kept."""
    own = tmp_path / "student"
    own.mkdir()
    (own / "notes.txt").write_text("the user's")
    if record is not None:
        (own / MANIFEST).write_text(record)
    with pytest.raises(RunDirError, match="is not one"):
        with staged_output(tmp_path, "student", overwrite=True):
            pass
    assert (own / "notes.txt").read_text() == "the user's"


def test_require_stage_needs_a_manifest(tmp_path):
    (tmp_path / "teacher").mkdir()
    with pytest.raises(RunDirError, match="pocketbert train teacher"):
        require_stage(tmp_path, "teacher", "pocketbert train teacher")
    (tmp_path / "teacher" / MANIFEST).write_text("{}")
    assert require_stage(tmp_path, "teacher", "x") == tmp_path / "teacher"


def test_killed_between_the_two_renames_restores_the_earlier_folder(tmp_path):
    dead_pid = 2 ** 22 + 12345  # above the default pid_max: no such process
    aside = tmp_path / f".export.old-{dead_pid}-abcd1234"
    aside.mkdir()
    (aside / MANIFEST).write_text("{}")
    leftover = tmp_path / f".export.tmp-{dead_pid}-abcd1234"
    leftover.mkdir()
    (leftover / "model.onnx").write_text("partial")
    assert require_stage(tmp_path, "export", "pocketbert export") == tmp_path / "export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]


def test_a_running_stage_keeps_its_temporary_folder(tmp_path):
    import os

    mine = tmp_path / f".export.tmp-{os.getpid()}-abcd1234"
    mine.mkdir()
    recover_stage(tmp_path, "export")
    assert mine.exists()


def test_another_hosts_folder_in_progress_is_left_alone(tmp_path):
    """On a disk shared between machines, a dead local PID says nothing of another host's writer."""
    import os
    import time

    from pocketbert.core.run.atomic_folder import FOREIGN_TEMP_MAX_AGE_S

    dead_pid = 2 ** 22 + 777  # above the default pid_max: no such process on this host
    elsewhere = tmp_path / f".student.tmp-{dead_pid}-abcd1234@another-machine.example"
    elsewhere.mkdir()
    here = tmp_path / f".student.tmp-{dead_pid}-abcd5678@{__import__('socket').gethostname()}"
    here.mkdir()
    recover_stage(tmp_path, "student")
    assert elsewhere.is_dir(), "another machine's fill in progress was deleted"
    assert not here.exists(), "this host's killed writer's leftover was kept"
    stale = time.time() - FOREIGN_TEMP_MAX_AGE_S - 60
    os.utime(elsewhere, (stale, stale))
    recover_stage(tmp_path, "student")
    assert not elsewhere.exists(), "another machine's leftover, untouched for a day, was kept"


def test_temporary_folders_name_their_host(tmp_path):
    import socket

    with staged_output(tmp_path, "student") as out:
        assert out.name.endswith("@" + socket.gethostname())
