"""A ladder stopped with Ctrl-C waits for its step to clean up: when it says nothing half-written was kept, the
step's staging folder is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

STEP_CLEANUP_S = 1.0  # longer than subprocess.run's grace before it kills an interrupted child (0.25 s)
START_TIMEOUT_S = 60


@pytest.mark.skipif(sys.platform == "win32", reason="process groups and SIGINT")
def test_the_ladder_waits_for_an_interrupted_step_to_remove_its_staging_folder(tmp_path):
    staging = tmp_path / "rung" / ".staging-student"
    step = tmp_path / "step.py"
    step.write_text(textwrap.dedent(f"""
        import os, shutil, signal, sys, time
        from pathlib import Path
        staging = Path(sys.argv[1])
        def cleanup(*_):
            time.sleep({STEP_CLEANUP_S})  # a stage removing what it wrote
            shutil.rmtree(staging)
            sys.exit(130)
        signal.signal(signal.SIGINT, cleanup)
        staging.mkdir(parents=True)
        time.sleep(600)
    """))
    driver = ("import sys; from pocketbert.ladder.flow import Step, run_plan; "
              f"run_plan([Step('rung', 'distill', [{str(step)!r}, {str(staging)!r}])], print, command=[sys.executable])")
    ladder = subprocess.Popen([sys.executable, "-c", driver], start_new_session=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    deadline = time.time() + START_TIMEOUT_S
    while not staging.is_dir():
        assert time.time() < deadline and ladder.poll() is None, ladder.communicate()
        time.sleep(0.05)
    os.killpg(ladder.pid, signal.SIGINT)  # a terminal's Ctrl-C: the ladder and its step alike
    _, err = ladder.communicate(timeout=START_TIMEOUT_S)
    assert b"KeyboardInterrupt" in err  # the ladder stopped, as its command line then reports
    assert not staging.exists()
