"""Where pocketbert keeps what it can rebuild: BERT-base reference exports and teacher outputs."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "POCKETBERT_CACHE"


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV, Path.home() / ".cache" / "pocketbert"))
