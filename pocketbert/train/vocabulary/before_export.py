"""`pocketbert export --vocabulary fitted` on a run without its fitted student: the training step runs first. The
export ships the student the run holds and trains nothing itself; pocketbert/cli.py, which wires the commands, hands
this step to the export command (export/cli.py STUDENT_STEPS), so neither stage imports the other."""

from __future__ import annotations

import sys
from pathlib import Path

from pocketbert.core.errors import RunDirError
from pocketbert.core.students.fitted_vocabulary import FIT_COMMAND, FITTING_KEYS, missing_or_stale, other_settings


def fit_before_export(run_dir: Path, data_dir: Path | None, settings: dict) -> Path | None:
    """Fit the run's vocabulary where the export asks for a fitted one (the recipe's export.vocabulary, or the
    export's options `settings` over it) and the run holds none, or one fitted from another student. One fitted
    from this student with other settings than the options give is the user's to replace (`train vocabulary
    --overwrite`): refused, nothing written. Returns the fitted student's folder when it fitted one."""
    from pocketbert.core.run.atomic_folder import require_stage
    from pocketbert.core.run.manifest import read_manifest
    from pocketbert.core.config.recipe import complete_recipe, recipe_dict, recorded_section
    from pocketbert.core.run.run_files import STUDENT_DIR
    from pocketbert.train.vocabulary.step import STAGE_MADE_BY, fit_vocabulary

    student = require_stage(run_dir, STUDENT_DIR, STAGE_MADE_BY)
    recorded = recipe_dict(complete_recipe(read_manifest(student)["config"]["recipe"]))
    if recorded_section(recorded, "export", settings, "export option").vocabulary != "fitted":
        return None
    asked = {key: value for key, value in settings.items() if key in FITTING_KEYS}
    reason = missing_or_stale(run_dir)
    if reason is None:
        differs = other_settings(run_dir, asked)
        if differs is None:
            return None
        given = "".join(f" --{key.replace('_', '-')} {value}" for key, value in asked.items())
        raise RunDirError(f"the run's fitted student: {differs}; replace it with `{FIT_COMMAND} --run {run_dir}{given} "
                          "--overwrite`, then export again (or export with its settings)")
    print(f"note: {reason}: fitting it first ({FIT_COMMAND})", file=sys.stderr)
    path, _ = fit_vocabulary(run_dir, {f"export.{key}": value for key, value in asked.items()}, data_dir,
                             overwrite=True)
    return path
