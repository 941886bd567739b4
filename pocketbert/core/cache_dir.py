"""Where pocketbert keeps what it can rebuild: BERT-base reference exports and teacher outputs."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "POCKETBERT_CACHE"


def cache_root() -> Path:
    # An empty POCKETBERT_CACHE= (a cleared variable in a CI file) means "not set", never the working directory.
    value = os.environ.get(CACHE_ENV, "").strip()
    return Path(value) if value else Path.home() / ".cache" / "pocketbert"
