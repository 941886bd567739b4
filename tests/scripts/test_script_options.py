"""Every script under scripts/ answers an option it does not take, or an argument that is no run or folder, with a
usage or error line and a non-zero status: never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = sorted(p for p in (Path(__file__).resolve().parents[2] / "scripts").glob("*.py")
                 if "__main__" in p.read_text())

pytestmark = pytest.mark.slow  # a process per script, each importing its libraries


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_a_bad_option_is_one_line_not_a_traceback(script):
    proc = subprocess.run([sys.executable, str(script), "--no-such-option"], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, cwd=script.parent.parent, timeout=300)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr[-600:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "error" in last.lower() or "usage" in last.lower(), last
