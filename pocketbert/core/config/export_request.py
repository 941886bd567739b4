"""One export command's request, typed: built once at the command line (export/steps/request.py) and handed to every
step, the vocabulary fit that may run first included. It lives in the core because that fit is training's step
(train/vocabulary/before_export.py), which imports no export code."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from pocketbert.core.config.export_families import ExportFamily
from pocketbert.core.config.recipe import ExportSection, Recipe

# The export settings that shape a fitted vocabulary (the fit's settings; core/students/fitted_vocabulary.py reads
# them off a fitted student's record).
VOCABULARY_SHAPING_PREFIX = "vocabulary_"


@dataclass(frozen=True)
class ExportRequest:
    """What `pocketbert export` was asked: the run's student's recorded recipe with the command's export settings
    over it (validated once, when the request was built), which export keys the command set, and the programs
    asked for by name per family (None: the recipe's choice)."""

    run_dir: Path
    data_dir: Optional[Path]
    student_dir: Path                   # verified (its files' hashes) when the request was built
    recipe: Recipe
    given: frozenset[str] = frozenset()  # the export section's keys the command line set
    asked: dict[ExportFamily, Optional[list[str]]] = field(default_factory=dict)
    overwrite: bool = False

    @property
    def export(self) -> ExportSection:
        return self.recipe.export

    def given_values(self, keys: tuple[str, ...]) -> dict[str, Any]:
        """Of `keys`, those the command line set, with their validated values."""
        return {key: getattr(self.export, key) for key in keys if key in self.given}

    def shaping_options(self) -> list[str]:
        """The fitted vocabulary's options the command line gave, as it spells them."""
        return sorted(f"--{key.replace('_', '-')}" for key in self.given if key.startswith(VOCABULARY_SHAPING_PREFIX))
