"""A cache entry is built by one process at a time: the second waits for the first, then finds the entry built."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from pocketbert.core.run.cache_dir import building

HOLDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from pocketbert.core.run.cache_dir import building
    entry = Path(sys.argv[1])
    with building(entry):
        print("holding", flush=True)
        sys.stdin.readline()  # held until the test says
        (entry.parent / "order").open("a").write("first released\\n")
""")


def blocked_or_done(process: subprocess.Popen, bound_s: float = 60.0) -> None:
    """Until `process` waits on a lock (the kernel lists it with "->" in /proc/locks) or has ended."""
    import time

    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return
        locks = [line.split() for line in Path("/proc/locks").read_text().splitlines()]
        if any(fields[1:2] == ["->"] and str(process.pid) in fields for fields in locks):
            return
        time.sleep(0.05)
    raise AssertionError(f"process {process.pid} neither waited on the lock nor ended in {bound_s} s")


def test_a_second_builder_waits_for_the_first(tmp_path):
    entry = tmp_path / "reference" / "bert-base-x"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(entry)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        waiter = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
            from pathlib import Path
            from pocketbert.core.run.cache_dir import building
            entry = Path({str(entry)!r})
            with building(entry):
                (entry.parent / "order").open("a").write("second got it\\n")
        """)])
        blocked_or_done(waiter)
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.wait(timeout=60) == 0 and waiter.wait(timeout=60) == 0
    finally:
        holder.kill()
    # the order file is written inside each lock: had the second not waited, it would have ended first
    assert (entry.parent / "order").read_text().splitlines() == ["first released", "second got it"]


def test_the_lock_is_taken_again_after_it_is_released(tmp_path):
    entry = Path(tmp_path) / "e"
    with building(entry):
        pass
    with building(entry):  # would block for ever if the first had not released it
        assert (tmp_path / ".e.building").is_file()
