"""One writer per run: an advisory lock on every folder a command writes, held for the whole command.

The lock is `fcntl.flock` on a small file beside the folder (`.<name>.pocketbert-lock`), not inside it, so a
folder's contents stay the command's own (an empty run stays empty, a ladder's folder holds only its rungs). The
kernel drops a flock when its process dies, however it dies, so a crash or SIGKILL never leaves a stale lock: a
lock file left behind is just re-taken. A second writer does not wait: it ends in one line naming the first
writer's process, host and command, exit 2.

The lock file is removed by its holder while it still holds it; a process that opened the old file just before
takes the lock on a file that is no longer at the path, notices (the path's inode differs from its own), and
opens the path again, so two processes never both believe they hold one folder.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import sys
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Callable, Iterator

from pocketbert.core.errors import RunDirError

LOCK_SUFFIX = ".pocketbert-lock"
REOPEN_ATTEMPTS = 20  # each a lost race with a holder removing its lock file: a handful at most in practice


class RunInUseError(RunDirError):
    """Another pocketbert process is writing the folder."""


def lock_path(folder: Path) -> Path:
    """The lock file of `folder`, beside it: the same file for every spelling of the folder's path."""
    folder = Path(folder).expanduser().resolve()
    return folder.parent / f".{folder.name}{LOCK_SUFFIX}"


def _holder_line(path: Path) -> str:
    """Who holds the lock, as its holder wrote it into the lock file."""
    try:
        holder = json.loads(path.read_text(encoding="utf-8"))
        since = time.strftime("%H:%M:%S", time.localtime(float(holder["since"])))
        return f"pid {int(holder['pid'])} on {holder['host']}, `{holder['command']}` since {since}"
    except (OSError, ValueError, KeyError, TypeError):
        # taken a moment ago and not yet described, or written by a process that died while describing itself
        return "another pocketbert process"


def _describe_self() -> str:
    args = " ".join(sys.argv[1:])
    return json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(),
                       "command": f"pocketbert {args}".strip()})


def _is_distributed_worker() -> bool:
    """torchrun's other processes share their main process's run: only rank 0 writes it (train/distributed.py).
    A launch set that does not hold together is refused here too, so a stray RANK never skips the lock."""
    from pocketbert.core.launch_env import launch

    return launch().rank > 0


@contextmanager
def folder_lock(folder: Path) -> Iterator[Path]:
    """Hold `folder`'s lock for the block, or raise RunInUseError naming its holder."""
    import fcntl

    from pocketbert.core.storage import storage_error

    if _is_distributed_worker():
        yield Path(folder)
        return
    path = lock_path(folder)
    made_parent = not path.parent.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise (storage_error(exc, Path(folder), path) or exc) from exc
    for _ in range(REOPEN_ATTEMPTS):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise (storage_error(exc, Path(folder), path) or exc) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunInUseError(f"{folder} is being written by {_holder_line(path)}: wait for that command to "
                                "finish, or stop it; one command writes a folder at a time") from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the holder removed the file we opened: take the lock on the file now at the path
    else:
        raise RunInUseError(f"{folder}'s lock kept changing hands: another command is starting on it; try again")
    try:
        try:
            os.ftruncate(fd, 0)
            os.write(fd, _describe_self().encode())
        except OSError:
            pass  # a full disk: the lock holds without its description, and the command's own write says why
        yield path
    finally:
        try:
            path.unlink(missing_ok=True)  # still ours: no other process can hold a lock on this file now
            if made_parent:
                path.parent.rmdir()  # only if nothing else was written there
        except OSError:
            pass
        os.close(fd)  # releases the lock


@contextmanager
def folder_locks(folders) -> Iterator[None]:
    """Hold the locks of several folders (each once, in one order, so two commands never wait on each other)."""
    unique = sorted({lock_path(f): Path(f) for f in folders if f is not None}.items())
    with ExitStack() as stack:
        for _, folder in unique:
            stack.enter_context(folder_lock(folder))
        yield


def writes(*parameters: str, resolve: Callable[[str, object], Path | None] | None = None):
    """Decorate a click command that writes the folders its `parameters` name (`run`, `out`, ...): their locks are
    taken before the command's first step and released when it ends, whatever ends it.

    `resolve(name, value)` turns a parameter's value into the folder (a --run name into its run directory);
    None values (an --out left to its default inside the run) are skipped: the run's own lock covers them.
    """
    def decorate(command):
        @functools.wraps(command)
        def locked(*args, **kwargs):
            folders = []
            for name in parameters:
                value = kwargs.get(name)
                if value is None:
                    continue
                folders.append(resolve(name, value) if resolve else Path(value))
            with folder_locks(folders):
                return command(*args, **kwargs)
        return locked
    return decorate
