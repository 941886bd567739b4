"""`pocketbert export --vocabulary fitted` on a run without its fitted student: the training step runs first. The
export ships the student the run holds and trains nothing itself; pocketbert/cli.py, which wires the commands, hands
this step to the export command (export/cli.py STUDENT_STEPS), so neither stage imports the other; it reads the
export's typed request (core/config/export_request.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from pocketbert.core.config.export_request import ExportRequest
from pocketbert.core.errors import RunDirError
from pocketbert.core.students.fitted_vocabulary import (FIT_COMMAND, FITTING_KEYS, SECTION, fit_options,
                                                       missing_or_stale, other_settings)


def fit_before_export(request: ExportRequest) -> Path | None:
    """Fit the run's vocabulary where the export asks for a fitted one (the recipe's export.vocabulary, or the
    export's options over it) and the run holds none, or one fitted from another student. One fitted from this
    student with other settings than the options give is the user's to replace (`train vocabulary --overwrite`):
    refused, nothing written. Returns the fitted student's folder when it fitted one."""
    from pocketbert.train.vocabulary.step import fit_recipe

    if request.export.vocabulary != "fitted":
        return None
    asked = request.given_values(SECTION, FITTING_KEYS)
    reason = missing_or_stale(request.run_dir)
    if reason is None:
        differs = other_settings(request.run_dir, asked)
        if differs is None:
            return None
        raise RunDirError(f"the run's fitted student: {differs}; replace it with `{FIT_COMMAND} --run "
                          f"{request.run_dir}{fit_options(asked)} --overwrite`, then export again (or export with its "
                          "settings)")
    print(f"note: {reason}: fitting it first ({FIT_COMMAND})", file=sys.stderr)
    path, _ = fit_recipe(request.run_dir, request.recipe, request.data_dir, overwrite=True)
    return path
