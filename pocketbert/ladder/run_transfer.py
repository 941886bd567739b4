"""The run's transfer data, which the rungs the ladder trains inherit.

A student distilled with transfer data (unlabelled text of the app's domain that the teacher labels, the transfer
preset's IMDb reviews) keeps the teacher's accuracy across domains; one distilled on the labelled sentences alone
does not. So every rung the ladder trains gets the `transfer:` section of the recipe the run recorded: its
student's when it has one (what `make distill` trained), else its teacher's. The keys go first, so the ladder's and
a rung's own keys still win.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pocketbert.core.tasks.data import NAMED_DATASETS
from pocketbert.core.errors import ConfigError
from pocketbert.core.run.manifest import read_manifest
from pocketbert.core.config.recipe import Recipe, complete_recipe
from pocketbert.core.run.run_files import MANIFEST, STUDENT_DIR, TEACHER_DIR

SECTION = "transfer"
TRANSFER_DATA = f"{SECTION}.data"


@dataclass(frozen=True)
class RunTransfer:
    keys: dict[str, Any] = field(default_factory=dict)  # 'transfer.data': [...], ... as --set keys; {}: none
    source: str = ""             # the manifest they were read from
    student_made: bool = True    # the run has its student: the in_run rung is kept as its recipe trained it

    def for_rung(self, in_run: bool) -> dict[str, Any]:
        """The keys a rung inherits. The in_run rung is the run's own student: it inherits only when the ladder
        trains it now (the run has none yet), so that the student it makes records the transfer data the teacher's
        recipe gave, and the same ladder continued later reads the same from it."""
        return {} if in_run and self.student_made else dict(self.keys)


def read_run_transfer(run_dir: Path, enabled: bool = True) -> RunTransfer:
    """The transfer section of the run's recorded recipe, when it names data and the ladder takes it (enabled: the
    spec's train.run_transfer). Its paths are kept as the run recorded them: a manifest records no working folder,
    so a relative path means the folder the run was trained in (check_transfer_files refuses one not found)."""
    student_made = (Path(run_dir) / STUDENT_DIR / MANIFEST).is_file()
    stage_dir = Path(run_dir) / (STUDENT_DIR if student_made else TEACHER_DIR)
    # a key of an older version that this one no longer has is dropped (complete_recipe)
    recorded = complete_recipe(read_manifest(stage_dir).config.recipe).transfer if enabled else None
    if recorded is None or not recorded.data:
        return RunTransfer(student_made=student_made)
    return RunTransfer({f"{SECTION}.{key}": value for key, value in recorded.model_dump(mode="json").items()},
                       str(stage_dir / MANIFEST), student_made)


def check_transfer_files(rung: str, recipe: Recipe, transfer: RunTransfer) -> None:
    """Before any rung trains: each transfer source of the rung's recipe is a dataset name or a file found from
    here (the distillation reads it only after its teacher and data are loaded)."""
    inherited = transfer.keys.get(TRANSFER_DATA) or []
    for source in recipe.transfer.data:
        if source in NAMED_DATASETS or Path(source).exists():
            continue
        advice = ("the run recorded the path it was given, relative to the folder it ran in: run the ladder from "
                  "there, or set the ladder's train.run_transfer: false" if source in inherited else "check the path")
        raise ConfigError(f"rung {rung}: transfer data '{source}' is neither a file here nor a dataset name "
                          f"({', '.join(NAMED_DATASETS)}): {advice}")
