"""SIGTERM ends a command the way Ctrl-C does: raised as an exception in the main thread, so every staging folder,
lock file and temporary app folder the command made is cleaned up on the way out (a `kill`, a CI job's timeout and a
ladder's ended parent all send it). A KeyboardInterrupt, so every path that already cleans up after Ctrl-C (the export
workers' pool among them) does the same here; its own exit status says which signal it was."""

from __future__ import annotations

import signal
import threading


class Terminated(KeyboardInterrupt):
    """The command received SIGTERM."""


def _raise_terminated(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM during the clean-up ends the process at once
    raise Terminated()


def end_on_sigterm_as_on_ctrl_c() -> None:
    """Called once as a command starts (signal handlers belong to the main thread)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_terminated)
