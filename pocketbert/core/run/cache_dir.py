"""Where pocketbert keeps what it can rebuild: BERT-base reference exports and teacher outputs."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

CACHE_ENV = "POCKETBERT_CACHE"


def cache_root() -> Path:
    # An empty POCKETBERT_CACHE= (a cleared variable in a CI file) means "not set", never the working directory.
    value = os.environ.get(CACHE_ENV, "").strip()
    return Path(value) if value else Path.home() / ".cache" / "pocketbert"


@contextmanager
def building(entry: Path):
    """Held while one process builds a cache entry: a second process that wants the same entry (two benches on one
    machine, two test workers) waits here and then finds it built, instead of building it again beside the first
    and replacing the folder the first is reading. The lock file sits beside the entry and outlives it (removing
    it would let a third process lock a new file while the second holds the old one)."""
    import fcntl

    entry.parent.mkdir(parents=True, exist_ok=True)
    with open(entry.parent / f".{entry.name}.building", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
