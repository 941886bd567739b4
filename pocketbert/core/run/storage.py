"""File-system faults said in one line: which path, what the system refused, what to do about it.

A full disk rarely reaches Python as a plain OSError with a file name: torch.save raises a RuntimeError
(the OSError, if any, is only its __context__), safetensors a SafetensorError ending "(os error 28)", and
numpy's tofile an OSError with no errno ("N requested and M written"). `fault_behind` finds the system's
error behind such wrappers; `atomic_folder` adds what only it can know (the folder being written, and
whether that disk was full when the write failed).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from pathlib import Path

from pocketbert.core.run.cache_dir import CACHE_ENV, cache_root
from pocketbert.core.errors import PocketbertError

# A disk with less than this free when a write failed was full for that write: a failed write of a large file
# leaves its written part in place (we look before the temporary folder is removed), so the disk reads as full.
NEARLY_FULL_BYTES = 1024 * 1024

RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")
PYTHON_OS_ERROR = re.compile(r"\[Errno (\d+)\]")  # how shutil.Error (copytree) carries each file's OSError

FIX_SPACE = "free space on that disk, or write to another one (a --run or --out elsewhere), then run again"
# errno -> (what the system said, in words; what the user can do)
REASONS = {
    errno.ENOSPC: ("no space left on the disk", FIX_SPACE),
    errno.EDQUOT: ("your disk quota is used up", FIX_SPACE),
    errno.EFBIG: ("the file grew past the size limit (ulimit -f, or the file system's)",
                  "raise the limit, or write to another disk"),
    errno.EROFS: ("the file system is read-only", "choose a writable location, or remount it read-write"),
    errno.EACCES: ("permission denied", "make it writable for your user, or choose another location"),
    errno.EPERM: ("operation not permitted", "make it writable for your user, or choose another location"),
    errno.ENOTDIR: ("a part of this path is a file, not a folder", "remove or rename that file, or choose another path"),
    errno.EEXIST: ("a file is in the way where a folder should be made", "remove or rename it, or choose another path"),
    errno.EISDIR: ("this is a folder where a file was expected", "name a file"),
    errno.ENOENT: ("no such file or folder", "check the path"),
    errno.ENAMETOOLONG: ("the name is too long for the file system", "choose a shorter path"),
    errno.ELOOP: ("too many levels of symbolic links", "fix the link, or name the real path"),
    errno.EMFILE: ("too many open files", "raise the limit (ulimit -n) and run again"),
    errno.ENFILE: ("the system has too many open files", "close other programs and run again"),
    errno.EIO: ("input/output error", "check the disk (dmesg), or write to another one"),
}
WRITE_FAULTS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}  # said of the file written


class StorageError(PocketbertError):
    """The file system refused a read or a write: full, read-only, not permitted, or a file in a folder's place."""

    def __init__(self, message: str, fault: OSError):
        super().__init__(message)
        self.fault = fault  # the system's error, for a caller that words it its own way (the teacher cache)


def _chain(exc: BaseException):
    """`exc`, then what it was raised from or while handling: (exception, reached only through __cause__)."""
    seen, explicit = set(), True
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc, explicit
        explicit = explicit and exc.__cause__ is not None
        exc = exc.__cause__ or exc.__context__


def fault_behind(exc: BaseException) -> OSError | None:
    """The operating system's error that `exc` is or wraps, or None when it is not a file-system fault.

    An OSError that was only being handled when `exc` was raised (its __context__: torch.save's wrapping of a
    full disk) counts only as a write fault: a bug raised while handling a missing file is still a bug."""
    for link, explicit in _chain(exc):
        if isinstance(link, StorageError):
            return link.fault
        if isinstance(link, OSError) and link.errno is not None and (explicit or link.errno in WRITE_FAULTS):
            return link
        if isinstance(link, shutil.Error) and link.args and isinstance(link.args[0], list):
            for _source, destination, why in link.args[0]:  # copytree: one (src, dst, reason) per failed file
                found = PYTHON_OS_ERROR.search(str(why))
                if found:
                    code = int(found.group(1))
                    return OSError(code, os.strerror(code), destination)
        found = RUST_OS_ERROR.search(str(link))
        if found and int(found.group(1)) in REASONS:
            code = int(found.group(1))
            return OSError(code, os.strerror(code))
    return None


def free_bytes(path: Path) -> int | None:
    """Bytes free to this user on the disk holding `path` (its nearest existing parent), or None if unknown."""
    path = Path(path)
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def disk_was_full(path: Path) -> bool:
    free = free_bytes(path)
    return free is not None and free < NEARLY_FULL_BYTES


def _within(path: Path, folder: Path) -> bool:
    try:
        Path(os.path.abspath(path)).relative_to(os.path.abspath(folder))
        return True
    except ValueError:
        return False


def describe(fault: OSError, path: Path | None = None) -> str:
    """One line: the path, what the system said, and what to do. `path` stands in where the error names none."""
    named = fault.filename2 if fault.filename2 is not None and fault.errno in WRITE_FAULTS else fault.filename
    where = os.fsdecode(named) if named is not None else (str(path) if path is not None else None)
    reason, fix = REASONS.get(fault.errno, (fault.strerror or str(fault) or type(fault).__name__,
                                            "check the path and the disk, then run again"))
    if where is not None and _within(where, cache_root()):
        fix = f"point {CACHE_ENV} at a writable folder on a disk with space (now {cache_root()})"
    head = f"{where}: {reason}" if where is not None else reason
    return f"{head}; {fix}"


def storage_error(exc: BaseException, folder: Path, staged: Path) -> StorageError | None:
    """A one-line StorageError for a failure while `staged` was being written to become `folder`, or None when
    the failure is not the disk's. Call it before `staged` is removed: a full disk reads as full only while the
    half-written part is there. The line names `folder`, the path the user knows, not the temporary one."""
    fault = fault_behind(exc)
    if fault is None and disk_was_full(staged):
        fault = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    if fault is None:
        return None
    named = fault.filename2 if fault.filename2 is not None and fault.errno in WRITE_FAULTS else fault.filename
    if named is not None and _within(os.fsdecode(named), staged):  # said of the path it was to have
        inside = Path(os.path.abspath(os.fsdecode(named))).relative_to(os.path.abspath(staged))
        fault = OSError(fault.errno, fault.strerror, str(Path(folder) / inside))
    return StorageError(describe(fault, folder) + "; nothing half-written was kept", fault)
