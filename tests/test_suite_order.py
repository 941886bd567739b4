"""The test files go to the test processes longest first by the recorded run's seconds, a file the record does not
know first; the record itself is the durations of a whole run of this suite."""

from __future__ import annotations

from pathlib import Path

from suite_order import RECORDED_DURATIONS, REPO_ROOT, longest_first, recorded_file_seconds

# The recorded run is a whole `make test`: it times the files that hold most of the suite's tests.
MIN_RECORDED_SHARE = 0.9


def test_the_longest_recorded_file_goes_first_and_an_unrecorded_one_before_it():
    seconds = {"tests/a.py": 10.0, "tests/b.py": 300.0, "tests/c.py": 0.5}
    assert longest_first(["tests/a.py", "tests/b.py", "tests/c.py"], seconds) == ["tests/b.py", "tests/a.py",
                                                                                  "tests/c.py"]
    assert longest_first(["tests/c.py", "tests/new.py", "tests/b.py"], seconds) == ["tests/new.py", "tests/b.py",
                                                                                    "tests/c.py"]
    assert longest_first(["tests/x.py", "tests/y.py"], {}) == ["tests/x.py", "tests/y.py"]  # no record: as collected


def test_the_record_times_the_files_of_this_suite():
    recorded = recorded_file_seconds()
    assert recorded, f"{RECORDED_DURATIONS} is missing or unreadable: make test DURATIONS={RECORDED_DURATIONS}"
    files = {p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "tests").rglob("test_*.py")}
    assert sum(f in recorded for f in files) >= MIN_RECORDED_SHARE * len(files)
    assert all(Path(REPO_ROOT / f).suffix == ".py" and seconds >= 0 for f, seconds in recorded.items())
