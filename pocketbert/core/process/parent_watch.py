"""A command started by another pocketbert command (a ladder's step) ends when the command that started it ends.

Without this, a ladder killed by SIGKILL (what the out-of-memory killer sends) leaves its running step writing a
rung alone, and the next ladder starts a second writer there. The parent passes its pid in PARENT_ENV; the child
asks the kernel for SIGTERM when its parent dies (Linux), or watches its parent pid where the kernel cannot do
that (macOS). Either way the child's run lock goes with it (run_lock.py).
"""

from __future__ import annotations

import os
import signal
import sys
import threading

PARENT_ENV = "POCKETBERT_PARENT_PID"
WATCH_INTERVAL_S = 1.0
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def child_environment() -> dict[str, str]:
    """The environment of a child command that should end with this process."""
    return {**os.environ, PARENT_ENV: str(os.getpid())}


def _end_self() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


def stop_with_parent() -> None:
    """Called once as a command starts: if a pocketbert parent started it, end when that parent ends."""
    value = os.environ.pop(PARENT_ENV, "")  # not passed on: this process's own children watch this process
    if not value.isdigit():
        return
    parent = int(value)
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) == 0:
            if os.getppid() != parent:  # the parent died before the request was made
                _end_self()
            return

    def watch() -> None:
        stopped = threading.Event()
        while not stopped.wait(WATCH_INTERVAL_S):
            if os.getppid() != parent:
                _end_self()

    threading.Thread(target=watch, name="stop-with-parent", daemon=True).start()
