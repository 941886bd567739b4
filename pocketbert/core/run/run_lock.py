"""One writer per run, or readers: an advisory lock on every folder a command writes (exclusive) or only reads
(shared), held for the whole command.

The lock is `fcntl.flock` on a small file beside the folder (`.<name>.pocketbert-lock`), not inside it, so a
folder's contents stay the command's own (an empty run stays empty, a ladder's folder holds only its rungs). The
kernel drops a flock when its process dies, however it dies, so a crash or SIGKILL never leaves a stale lock: a
lock file left behind is just re-taken. A second writer does not wait: it ends in one line naming the first
holder's process, host and command, exit 2. The lock file is pocketbert's own: never opened through a link,
refused when it is not a regular file, and written only once held.

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
LOCK_RECORD_MAX = 64 * 1024  # a holder's description is a few hundred bytes
REOPEN_ATTEMPTS = 20  # each a lost race with a holder removing its lock file: a handful at most in practice


class RunInUseError(RunDirError):
    """Another pocketbert process is writing the folder."""


def lock_path(folder: Path) -> Path:
    """The lock file of `folder`, beside it: the same file for every spelling of the folder's path."""
    folder = Path(folder).expanduser().resolve()
    return folder.parent / f".{folder.name}{LOCK_SUFFIX}"


def _holder_line(path: Path) -> str:
    """Who holds the lock, as its holder wrote it into the lock file: `being written by ...`, `being read by ...`."""
    try:
        with open(path, encoding="utf-8", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW | os.O_NONBLOCK)) as file:
            holder = json.loads(file.read(LOCK_RECORD_MAX))
        since = time.strftime("%H:%M:%S", time.localtime(float(holder["since"])))
        doing = "read" if holder.get("mode") == "read" else "written"
        return f"being {doing} by pid {int(holder['pid'])} on {holder['host']}, `{holder['command']}` since {since}"
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        # taken a moment ago and not yet described, or written by a process that died while describing itself
        return "in use by another pocketbert process"


def _describe_self(shared: bool) -> str:
    args = " ".join(sys.argv[1:])
    return json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(),
                       "command": f"pocketbert {args}".strip(), "mode": "read" if shared else "write"})


def _is_distributed_worker() -> bool:
    """torchrun's other processes share their main process's run: only rank 0 writes it (train/distributed.py).
    Only a process that has joined its process group counts: launch variables alone (left in a shell) never
    skip the lock."""
    import sys as _sys

    from pocketbert.core.process.launch_env import launch

    if launch().rank == 0:
        return False
    dist = getattr(_sys.modules.get("torch"), "distributed", None)  # never imported here: torch is slow to load
    return bool(dist is not None and dist.is_available() and dist.is_initialized())


def _own_file(path: Path, folder: Path, shared: bool) -> int | None:
    """The lock file opened as pocketbert's own: never through a link (O_NOFOLLOW), a regular file, not
    truncated (it is written only once held). None: a reader of a folder it may not write (a read-only run),
    which then reads without a lock."""
    import errno
    import stat

    from pocketbert.core.run.storage import storage_error

    flags = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # O_NONBLOCK: a FIFO in its place must not hang the open
    try:
        fd = os.open(path, flags | os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RunDirError(f"the lock file {path} is a link, and pocketbert opens only its own lock file: remove "
                              "the link (rm it), then run the command again") from None
        if exc.errno == errno.EISDIR:
            raise RunDirError(f"the lock file {path} is a folder, not pocketbert's lock file: move it away, then "
                              "run the command again") from None
        if not (shared and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS)):
            raise (storage_error(exc, Path(folder), path) or exc) from exc
        try:  # a reader of a read-only run: the lock file if a writer left one, else no lock
            fd = os.open(path, flags | os.O_RDONLY)
        except FileNotFoundError:
            return None
        except OSError as again:
            if again.errno == errno.ELOOP:
                raise RunDirError(f"the lock file {path} is a link, and pocketbert opens only its own lock file: "
                                  "remove the link (rm it), then run the command again") from None
            return None
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        os.close(fd)
        raise RunDirError(f"the lock file {path} is not a regular file: move it away, then run the command again")
    if status.st_nlink > 1:  # a hard link: the file has another name, a user's file that the lock would rewrite
        os.close(fd)
        raise RunDirError(f"the lock file {path} is a hard link to a file with another name, and pocketbert writes "
                          "only its own lock file: remove this name (rm it; the other stays), then run the command "
                          "again")
    os.set_blocking(fd, True)
    return fd


# How a process torchrun started joins its group: set by the stage that trains in process groups (train/cli.py),
# which the core does not import.
_group_joiner: Callable[[str | None], object] | None = None


def join_launched_groups_with(joiner: Callable[[str | None], object]) -> None:
    """joiner(device) joins the process group torchrun's variables name (train's pick_device)."""
    global _group_joiner
    _group_joiner = joiner


def _join_launched_group(device: str | None) -> None:
    """A process torchrun started as rank > 0 joins its group before the locks (then it skips them: rank 0 holds
    the run for all). A shell's leftover RANK=1 thus waits for a peer that never comes and ends in one line,
    instead of writing without the lock. A command of a stage that never trains in a group registers no joiner:
    it takes its locks as any process does."""
    from pocketbert.core.process.launch_env import launch

    here = launch()
    if here.world_size > 1 and here.rank > 0 and _group_joiner is not None:
        _group_joiner(device)


def _missing_folders(folder: Path) -> list[Path]:
    """folder and those of its parents that do not exist, the deepest first."""
    missing = []
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            break
        missing.append(candidate)
    return missing


@contextmanager
def folder_lock(folder: Path, shared: bool = False) -> Iterator[Path]:
    """Hold `folder`'s lock for the block, or raise RunInUseError naming its holder. Exclusive for a writer;
    shared for a command that only reads the folder: readers run together, a writer is refused while any
    reads, and a reader while one writes. A reader of a folder it cannot write reads without the lock."""
    import fcntl

    from pocketbert.core.run.storage import storage_error

    if _is_distributed_worker():
        yield Path(folder)
        return
    path = lock_path(folder)
    made = _missing_folders(path.parent)  # deepest first: what this lock makes, and removes again if still empty
    made_parent = bool(made)
    if made_parent and shared:
        yield Path(folder)  # nothing to read there yet: the command itself says so
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise (storage_error(exc, Path(folder), path) or exc) from exc
    for _ in range(REOPEN_ATTEMPTS):
        fd = _own_file(path, Path(folder), shared)
        if fd is None:
            yield Path(folder)
            return
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunInUseError(f"{folder} is {_holder_line(path)}: wait for that command to finish, or stop "
                                "it; a folder has one writer, or readers, at a time") from None
        try:
            same = os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the holder removed the file we opened: take the lock on the file now at the path
    else:
        raise RunInUseError(f"{folder}'s lock kept changing hands: another command is starting on it; try again")
    try:
        try:  # held now, so ours to rewrite (readers may overwrite each other's words: any of them is a reader)
            os.ftruncate(fd, 0)
            os.pwrite(fd, _describe_self(shared).encode(), 0)
        except OSError:
            pass  # a full disk, a read-only run: the lock holds without its description
        yield path
    finally:
        try:
            if shared:  # the last reader removes the file: only when no other holds it (it may take it alone)
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            path.unlink(missing_ok=True)  # ours alone: no other process can hold a lock on this file now
            for made_folder in made:
                made_folder.rmdir()  # only if nothing else was written there (a refused --run a/b/c leaves no a/)
        except OSError:
            pass
        os.close(fd)  # releases the lock


@contextmanager
def folder_locks(folders, shared_folders=()) -> Iterator[None]:
    """Hold the locks of several folders (each once, in one order, so two commands never wait on each other):
    exclusive for `folders`, shared for `shared_folders` that are not also written."""
    wanted = {lock_path(f): (Path(f), True) for f in shared_folders if f is not None}
    wanted.update({lock_path(f): (Path(f), False) for f in folders if f is not None})
    with ExitStack() as stack:
        for _, (folder, shared) in sorted(wanted.items()):
            stack.enter_context(folder_lock(folder, shared=shared))
        yield


def writes(*parameters: str, reads: tuple[str, ...] = (),
           resolve: Callable[[str, object], Path | None] | None = None,
           defaults: Callable[[dict], dict] | None = None, joins_launched_group: bool = False):
    """Decorate a click command that writes the folders its `parameters` name (`run`, `out`, ...) and only reads
    those `reads` names: exclusive locks on the first, shared on the others, taken before the command's first
    step and released when it ends, whatever ends it.

    `resolve(name, value)` turns a parameter's value into the folder (a --run name into its run directory);
    None values (an --out left to its default inside the run) are skipped: the run's own lock covers them. A
    parameter holding several values (compare's runs) names a folder each. `defaults(kwargs)` gives the values
    of parameters left unset that still name a folder the command writes (an app folder inside a run it reads).
    joins_launched_group: a command that trains in torchrun's process groups joins its group first; any other
    ignores launch variables a shell left behind rather than wait for peers that never come.
    """
    def folders_of(names, kwargs) -> list[Path]:
        found = []
        for name in names:
            values = kwargs.get(name)
            for value in (values if isinstance(values, (tuple, list)) else [values]):
                if value is not None:
                    found.append(resolve(name, value) if resolve else Path(value))
        return found

    def decorate(command):
        @functools.wraps(command)
        def locked(*args, **kwargs):
            if joins_launched_group:
                _join_launched_group(kwargs.get("device"))
            named = {**kwargs, **{k: v for k, v in (defaults(kwargs) if defaults else {}).items()
                                  if kwargs.get(k) is None}}
            with folder_locks(folders_of(parameters, named), folders_of(reads, named)):
                return command(*args, **kwargs)
        return locked
    return decorate
