"""The order the test processes take the test files in: the longest first, by the recorded run's seconds."""

from __future__ import annotations

import json
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# Each file's seconds in the last recorded run (`make test DURATIONS=results/tests/durations.json`).
RECORDED_DURATIONS = REPO_ROOT / "results" / "tests" / "durations.json"


def recorded_file_seconds() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(RECORDED_DURATIONS.read_text(encoding="utf-8"))["files"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def longest_first(files: list[str], seconds: dict[str, float]) -> list[str]:
    """The files in the order the test processes should take them: those the record does not know first (a new
    file may be long; started last, it would leave one process running it alone at the end), then the longest."""
    return sorted(files, key=lambda f: (f in seconds, -seconds.get(f, 0.0)))
