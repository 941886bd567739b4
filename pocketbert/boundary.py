"""The CLI's error boundary: any exception that ends a command becomes one line and an exit status.

The exit statuses are pocketbert/core/process/exit_codes.py's: a user's mistake and a file-system fault exit 2, an
interrupt 130, and anything else is a bug in pocketbert and exits 70, never 1, which `bench compare` keeps for "a
regression was found". POCKETBERT_DEBUG=1 adds the traceback above that line and changes nothing else: the exit
status stays the one a script reads. Whatever ended the command, the stage folders it was writing were temporary and are
gone (atomic_folder.atomic_folder), so the line can say that nothing half-written was kept.
"""

from __future__ import annotations

import os

import click

from pocketbert.core.process import exit_codes
from pocketbert.core.process.termination import Terminated
from pocketbert.core.errors import ConfigError, PocketbertError
from pocketbert.core.run.storage import describe, fault_behind

INTERRUPTED_LINE = "interrupted: nothing half-written was kept"
TERMINATED_LINE = "terminated (SIGTERM): nothing half-written was kept"
MAX_QUOTED = 300  # characters of an exception's own message quoted in the line
DEBUG_ENV = "POCKETBERT_DEBUG"
DEBUG_HINT = f"run again with {DEBUG_ENV}=1 to see the traceback"
DEBUG_VALUES = {"1": True, "true": True, "0": False, "false": False, "": False}  # "": set but empty, as unset


def debug_requested() -> bool:
    """Whether POCKETBERT_DEBUG asks for tracebacks; a value other than 0/1/true/false is refused rather than
    guessed (POCKETBERT_DEBUG=0 used to turn debugging on)."""
    raw = os.environ.get(DEBUG_ENV, "")
    if raw.strip().lower() not in DEBUG_VALUES:
        raise ConfigError(f"{DEBUG_ENV}={raw!r} is not one of 1, true, 0, false: set {DEBUG_ENV}=1 to see "
                          f"tracebacks, or `unset {DEBUG_ENV}`")
    return DEBUG_VALUES[raw.strip().lower()]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line if len(line) <= MAX_QUOTED else line[:MAX_QUOTED] + "…"


def _causes(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def verdict(exc: BaseException) -> tuple[str, int, bool]:
    """(the line to print, the exit status, whether POCKETBERT_DEBUG=1 should show the traceback instead).
    An empty line for a click usage error: click prints its own usage text and `Error:` line."""
    if isinstance(exc, PocketbertError):
        return f"error: {exc}", exc.exit_code, True
    if any(isinstance(link, Terminated) for link in _causes(exc)):
        return TERMINATED_LINE, exit_codes.TERMINATED, False
    if isinstance(exc, (KeyboardInterrupt, click.exceptions.Abort)):
        # click turns both Ctrl-C and a read past the end of a file (EOFError) into Abort: only the first is
        # an interrupt; the second is a truncated input, the user's to fix.
        ended = next((link for link in _causes(exc) if isinstance(link, EOFError)), None)
        if ended is not None and not any(isinstance(link, KeyboardInterrupt) for link in _causes(exc)):
            return (f"error: an input ended before it was complete ({_first_line(ended)}): the file is truncated; "
                    "copy or download it again", exit_codes.USAGE, True)
        return INTERRUPTED_LINE, exit_codes.INTERRUPTED, False
    if isinstance(exc, click.ClickException):
        return "", exit_codes.USAGE, False  # a usage error, whatever exit code the exception class carries
    fault = fault_behind(exc)
    if fault is not None:
        return f"error: {describe(fault)}", exit_codes.USAGE, True
    if isinstance(exc, OSError):  # no errno: a library's "cannot load ..." about a file it was given
        return f"error: {_first_line(exc)}", exit_codes.USAGE, True
    if isinstance(exc, MemoryError):
        return ("error: out of memory: use a smaller preset, batch or sequence length, or a machine with more "
                "memory", exit_codes.USAGE, True)
    return (f"error: internal error, a bug in pocketbert ({type(exc).__name__}: {_first_line(exc)}); {DEBUG_HINT}, "
            "and report it", exit_codes.INTERNAL, True)
