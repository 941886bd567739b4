"""Silence for the converters: coremltools, torch.export and ExecuTorch warn about every step, print progress
bars, and log on import; none of it is the user's concern when pocketbert reports its own progress."""

from __future__ import annotations

import contextlib
import io
import logging
import warnings


@contextlib.contextmanager
def quiet_tools(stdout: bool = False):
    """Warnings, stderr and log records below ERROR are dropped inside the block; with stdout, stdout too."""
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()), \
            (contextlib.redirect_stdout(io.StringIO()) if stdout else contextlib.nullcontext()):
        warnings.simplefilter("ignore")
        previous = logging.root.manager.disable
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(previous)
