"""Folders that appear whole or not at all: a stage writes into a temporary sibling and renames it into place,
a later run tells a live writer's temporary folder from a killed one's leftover, and `--overwrite` replaces only
a stage's own earlier output."""

from __future__ import annotations

import os
import re
import shutil
import socket
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from pocketbert.core.errors import RunDirError
from pocketbert.core.run.run_files import MANIFEST, STAGE_RECORDS, stage_path


TEMP_NAME = re.compile(r"\.(?:tmp|old)-(?P<pid>\d+)-[0-9a-f]+(?:@(?P<host>[^/]+))?$")
FOREIGN_TEMP_MAX_AGE_S = 24 * 3600  # another host's temporary folder untouched this long is a leftover


def temp_name(final: Path, kind: str) -> Path:
    """.<name>.<kind>-<pid>-<random>@<host>: a later run, on any machine sharing the disk, tells a writer's
    folder from a killed writer's leftover (owner_alive)."""
    return final.parent / f".{final.name}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}@{socket.gethostname()}"


def owner_alive(folder: Path) -> bool:
    """Whether the process that made a temporary folder may still be writing it.

    On this host: whether its process runs. On another host sharing the disk no process can be asked: the folder
    counts as in use until it has gone untouched for FOREIGN_TEMP_MAX_AGE_S.
    """
    match = TEMP_NAME.search(folder.name)
    if not match:
        return False
    host = match.group("host")
    if host is not None and host != socket.gethostname():
        try:
            return time.time() - folder.stat().st_mtime < FOREIGN_TEMP_MAX_AGE_S
        except OSError:
            return False
    try:
        os.kill(int(match.group("pid")), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover_stage(run_dir: Path, stage: str) -> None:
    """Undo what a killed stage left behind: its temporary folder, and a replaced folder not yet put back."""
    final = stage_path(run_dir, stage)
    parent = final.parent
    if not parent.is_dir():
        return
    for leftover in sorted(parent.glob(f".{stage}.tmp-*")):
        if not owner_alive(leftover):
            shutil.rmtree(leftover, ignore_errors=True)
    for previous in sorted(parent.glob(f".{stage}.old-*")):
        if owner_alive(previous):
            continue
        if not final.exists():  # killed between moving the old folder aside and moving the new one in
            os.replace(previous, final)
        else:
            shutil.rmtree(previous, ignore_errors=True)


def require_stage(run_dir: Path, stage: str, made_by: str) -> Path:
    """The folder of a finished stage, or an error naming the command that makes it."""
    recover_stage(run_dir, stage)
    path = stage_path(run_dir, stage)
    if not (path / MANIFEST).is_file():
        raise RunDirError(f"{path} holds no finished {stage} (no {MANIFEST}): run `{made_by}` first")
    return path


def is_stage_output(folder: Path, stage: str) -> bool:
    """Whether `folder` is recognisably an earlier output of `stage` (links are not taken as proof)."""
    record = Path(folder) / STAGE_RECORDS.get(stage, MANIFEST)
    if record.is_symlink() or not record.is_file():
        return False
    if record.name != MANIFEST:
        return True
    from pocketbert.core.run.stage_records import recorded_stage

    try:
        return recorded_stage(record) == stage
    except (OSError, ValueError):  # damaged: no proof of an earlier output
        return False


def check_writable(run_dir: Path, stage: str, overwrite: bool) -> Path:
    """Refuse early, before any work, to replace a finished stage without --overwrite, and, with it, a folder
    that is not recognisably that stage's earlier output (a folder of the user's that bears the stage's name)."""
    recover_stage(run_dir, stage)
    final = stage_path(run_dir, stage)
    if final.exists() and not final.is_dir():
        raise RunDirError(f"{final} is not a folder this stage wrote: move it away, or choose another --run")
    if final.exists() and any(final.iterdir()):
        if not overwrite:
            raise RunDirError(f"{final} already exists: pass --overwrite to replace it, or choose another --run")
        if not is_stage_output(final, stage):
            raise RunDirError(f"--overwrite replaces only an earlier {stage} stage, and {final} is not one (no "
                              f"{STAGE_RECORDS.get(stage, MANIFEST)} of that stage): choose another --run")
    return final


@contextmanager
def atomic_folder(final: Path):
    """Yield a temporary sibling of `final`; it replaces `final` only when the block finishes without error.

    Its name (temp_name) lets a later run tell a killed writer's leftovers (owner_alive).
    """
    from pocketbert.core.errors import PocketbertError
    from pocketbert.core.run.storage import storage_error

    final = Path(final)
    tmp = temp_name(final, "tmp")
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
    except OSError as exc:  # read-only, not permitted, a file in the way: said of `final`, not of `tmp`
        raise (storage_error(exc, final, tmp) or exc) from exc
    try:
        yield tmp
    except PocketbertError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except Exception as exc:
        # Whether the disk was full is read before the half-written part is removed (it frees the space).
        said = storage_error(exc, final, tmp)
        shutil.rmtree(tmp, ignore_errors=True)
        if said is not None:
            raise said from exc
        raise
    except BaseException:  # Ctrl-C, SystemExit
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _put_in_place(tmp, final)


def _put_in_place(tmp: Path, final: Path) -> None:
    """Rename the finished `tmp` to `final`, setting an earlier `final` aside first; if a rename fails, the
    earlier folder is put back and `tmp` removed, so a refused rename leaves what was there before."""
    old = None
    try:
        if final.exists():
            old = temp_name(final, "old")
            os.replace(final, old)
        os.replace(tmp, final)
    except BaseException:
        if old is not None and not final.exists():
            os.replace(old, final)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_text_atomically(path: Path, text: str) -> None:
    """A file that is whole or absent: written beside `path` and renamed over it; a failed write (a full disk)
    removes the partial file and leaves an earlier `path` as it was."""
    path = Path(path)
    partial = temp_name(path, "tmp")
    try:
        partial.write_text(text)
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        if exc.errno is None:
            raise
        # A failed write names no file (or the temporary one): the error line names the file the user asked for.
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


@contextmanager
def staged_output(run_dir: Path, stage: str, overwrite: bool = False):
    """Yield a temporary folder for a stage; it becomes <run>/<stage> only when the block finishes.

    An interrupted or failed stage leaves the earlier complete folder (or none), never a partial one.
    """
    with atomic_folder(check_writable(run_dir, stage, overwrite)) as tmp:
        yield tmp
