"""One export command's request, typed: built once at the command line (export/cli.py) and handed to every step, the
vocabulary fit that may run first included. It lives in the core because that fit is training's step
(train/vocabulary/before_export.py), which imports no export code."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from pocketbert.core.config.export_families import ExportFamily
from pocketbert.core.config.recipe import ExportSection, Recipe

# The recipe keys that shape a fitted vocabulary: the vocabulary section's (the fit's settings;
# core/students/fitted_vocabulary.py reads them off a fitted student's record).
VOCABULARY_SHAPING_PREFIX = "vocabulary."


@dataclass(frozen=True)
class ExportRequest:
    """What `pocketbert export` was asked: the run's student's recorded recipe with the command's export and
    vocabulary settings over it (validated once, when the request was built), which of their keys the command set,
    and the programs asked for by name per family (None: the recipe's choice)."""

    run_dir: Path
    data_dir: Optional[Path]
    student_dir: Path                   # verified (its files' hashes) when the request was built
    recipe: Recipe
    given: frozenset[str] = frozenset()  # the recipe keys the command line set, dotted (export.jobs, vocabulary.min_count)
    asked: dict[ExportFamily, Optional[list[str]]] = field(default_factory=dict)
    overwrite: bool = False

    @property
    def export(self) -> ExportSection:
        return self.recipe.export

    def given_values(self, section: str, keys: tuple[str, ...]) -> dict[str, Any]:
        """Of `section`'s `keys`, those the command line set, with their validated values."""
        values = getattr(self.recipe, section)
        return {key: getattr(values, key) for key in keys if f"{section}.{key}" in self.given}

    def shaping_options(self) -> list[str]:
        """The fitted vocabulary's options the command line gave, as it spells them (--vocabulary-min-count)."""
        return sorted(f"--{key.replace('.', '-').replace('_', '-')}" for key in self.given
                      if key.startswith(VOCABULARY_SHAPING_PREFIX))
