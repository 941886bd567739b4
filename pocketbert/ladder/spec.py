"""The ladder, typed: which students (rungs) to build from one teacher, and the setting every stage runs them at.

A ladder is a YAML file (pocketbert/ladder/specs/<name>.yaml, or a path): the rungs, each a training preset with
its own recipe keys, then what every rung's distillation, export (with the vocabulary fit it may run first) and
bench take. Everything is checked here, before any work: the file's keys, each rung's recipe with its overrides
(core/config/recipe.py, the same messages as --set), its export and vocabulary keys, and the bench keys.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_serializer, field_validator, model_validator

from pocketbert.core.students.models import layer_count
from pocketbert.core.config.recipe import (ExportSection, Recipe, Section, VocabularySection, available_presets,
                                           read_recipe, typed_section, with_overrides)
from pocketbert.core.students.student_shape import check_layer_map, resolve_shape
from pocketbert.core.errors import ConfigError
from pocketbert.core.run.run_files import LADDER_COMPARE_DIR
from pocketbert.ladder.run_transfer import RunTransfer, check_transfer_files

SPEC_DIR = Path(__file__).resolve().parent / "specs"
RUNG_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")  # a folder name, and a row of the table
NO_TRANSFER = RunTransfer()  # a ladder read without its run (its rungs inherit nothing)
COMPARED_THREADS = 1  # the ladder compares int8 latency at one ONNX Runtime thread: bench must time it


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


# The recipe sections a ladder and a rung give each rung's export: the export's own, and the vocabulary fit's it may
# run first (export.vocabulary: fitted).
EXPORT_SECTIONS = ("export", "vocabulary")


def written_keys(section: Section) -> dict[str, Any]:
    """The keys of an export or vocabulary section a ladder or rung writes, as JSON: what ladder.json records of them
    (the rest is each rung's recipe's, not the section's defaults)."""
    return section.model_dump(mode="json", exclude_unset=True)


class Rung(_Strict):
    name: str                   # its run folder in the ladder (the run itself for the in_run rung)
    label: str                  # what the table says it is
    preset: str                 # pocketbert/configs/<task>-<preset>.yaml
    in_run: bool = False        # the run's own student (`train distill --run R`, what `make distill` makes)
    student_init: Optional[Literal["teacher", "random"]] = None  # random: the same shape from random weights
    ship: bool = True           # export and bench it; false: a control, trained and evaluated only
    set: dict[str, Any] = Field(default_factory=dict)  # recipe keys for this rung's distillation, as --set
    # keys of the recipe's export and vocabulary sections for this rung that differ from the ladder's (a BiLSTM has
    # no Core AI program to ask for): checked by the recipe's own ExportSection and VocabularySection, given to its
    # export as --set export.KEY=VALUE and vocabulary.KEY=VALUE
    export: ExportSection = Field(default_factory=ExportSection)
    vocabulary: VocabularySection = Field(default_factory=VocabularySection)

    @field_serializer(*EXPORT_SECTIONS)
    def _written(self, section: Section) -> dict:
        return written_keys(section)

    @field_validator("name")
    @classmethod
    def _folder_name(cls, value):
        if not RUNG_NAME.match(value):
            raise ValueError(f"a rung's name is a folder name: lower-case letters, digits and '-' (got '{value}')")
        if value == LADDER_COMPARE_DIR:
            raise ValueError(f"'{value}' is the ladder folder's comparison, not a rung's name: choose another")
        return value


class TrainSetting(_Strict):
    max_train_examples: Optional[int] = Field(None, gt=0)  # null: each preset's own
    set: dict[str, Any] = Field(default_factory=dict)       # recipe keys for every rung, as --set
    # the rungs the ladder trains learn from the run's transfer data too, when its recipe has some (run_transfer.py)
    run_transfer: bool = True


class BenchSetting(_Strict):
    set: dict[str, Any] = Field(default_factory=dict)       # bench section keys (threads, time_cap_s, ...)


class Ladder(_Strict):
    description: str = ""
    rungs: list[Rung] = Field(min_length=2)
    train: TrainSetting = Field(default_factory=TrainSetting)
    export: ExportSection = Field(default_factory=ExportSection)  # every rung's export keys; those written are given
    # every rung's vocabulary keys (the fit of an export with export.vocabulary: fitted); those written are given
    vocabulary: VocabularySection = Field(default_factory=VocabularySection)
    bench: BenchSetting = Field(default_factory=BenchSetting)
    within_points: float = Field(1.0, gt=0)  # "as good as the teacher": at most this many points below it

    @field_serializer(*EXPORT_SECTIONS)
    def _written(self, section: Section) -> dict:
        return written_keys(section)

    @model_validator(mode="after")
    def _rungs(self):
        names = [r.name for r in self.rungs]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"rung names must differ: {', '.join(twice)} given twice")
        if sum(r.in_run for r in self.rungs) > 1:
            raise ValueError("at most one rung is the run's own student (in_run: true)")
        if sum(r.ship for r in self.rungs) < 2:
            raise ValueError("a ladder ships at least two rungs (ship: true) to compare")
        return self

    def rung(self, name: str) -> Rung:
        return next(r for r in self.rungs if r.name == name)


def available_ladders() -> list[str]:
    return sorted(p.stem for p in SPEC_DIR.glob("*.yaml"))


def read_ladder(name_or_path: str) -> Ladder:
    """A built-in ladder by name (specs/<name>.yaml) or a YAML file, validated."""
    path = Path(name_or_path)
    if not path.suffix:
        path = SPEC_DIR / f"{name_or_path}.yaml"
        if not path.is_file():
            raise ConfigError(f"no ladder '{name_or_path}': choose one of {', '.join(available_ladders())} or give "
                              "a YAML file")
    if not path.is_file():
        raise ConfigError(f"ladder file {path} does not exist: give a YAML file or one of "
                          f"{', '.join(available_ladders())}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read ladder {path}: {' '.join(str(exc).split())[:200]}; fix the YAML") from None
    try:
        return Ladder.model_validate(data if isinstance(data, dict) else {"rungs": None})
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "the file"
        raise ConfigError(f"ladder {path}: {where}: {error['msg']}") from None


def rung_overrides(ladder: Ladder, rung: Rung, transfer: RunTransfer = NO_TRANSFER) -> dict[str, Any]:
    """The recipe keys the rung's distillation is given (--set): the run's transfer keys where the rung inherits
    them (run_transfer.py), then the ladder's, then the rung's own, which win (a rung may train on more than the
    ladder's budget, and the table's "trained on" column says so)."""
    overrides = {**transfer.for_rung(rung.in_run), **ladder.train.set}
    if ladder.train.max_train_examples is not None:
        overrides["distill.max_train_examples"] = ladder.train.max_train_examples
    return {**overrides, **rung.set}


def rung_recipe(ladder: Ladder, rung: Rung, task: str, transfer: RunTransfer = NO_TRANSFER) -> Recipe:
    """The recipe the rung will train with: its preset, then the run's transfer keys, the ladder's and its own,
    validated."""
    if rung.preset not in available_presets(task):
        raise ConfigError(f"rung {rung.name}: no preset '{rung.preset}' for task '{task}': choose one of "
                          f"{', '.join(available_presets(task))}")
    overrides = rung_overrides(ladder, rung, transfer)
    if rung.student_init is not None:
        overrides["student.init"] = rung.student_init
    return with_overrides(read_recipe(task, rung.preset), overrides, f"rung {rung.name}", keep_none=True)


def check_ladder(ladder: Ladder, task: str, teacher_config=None,
                 transfer: RunTransfer = NO_TRANSFER) -> dict[str, Recipe]:
    """Every rung's recipe (with the run's transfer keys where the rung inherits them), its export settings (when
    read) and the bench keys checked before any work, and, given the teacher's config, every cut's shape against
    the teacher: a later rung that cannot be built is found before the first trains. The recipes by rung name."""
    recipes = {rung.name: rung_recipe(ladder, rung, task, transfer) for rung in ladder.rungs}
    for name, recipe in recipes.items():
        check_transfer_files(name, recipe, transfer)
    for rung in ladder.rungs:
        rung_export(ladder, rung)
    if teacher_config is not None:
        for name, recipe in recipes.items():
            check_cut(name, recipe, teacher_config)
    bench = typed_section("bench", ladder.bench.set, "the ladder's bench.set")
    if "threads" in ladder.bench.set and COMPARED_THREADS not in bench.threads:
        raise ConfigError(f"the ladder's bench.set.threads must include {COMPARED_THREADS}: the table compares int8 "
                          f"latency at {COMPARED_THREADS} thread")
    return recipes


def check_cut(rung: str, recipe: Recipe, teacher_config) -> None:
    """A rung whose student is cut from the teacher (a shape or teacher layers asked for): the teacher can give it."""
    student = recipe.student
    if student.model is not None or not (student.shape_given() or student.layer_map):
        return
    try:
        resolve_shape(teacher_config, student)
        if student.layer_map:
            check_layer_map(student.layer_map, layer_count(teacher_config))
    except ConfigError as exc:
        raise ConfigError(f"rung {rung}: {exc}") from None


def rung_export(ladder: Ladder, rung: Rung) -> dict[str, Any]:
    """The export and vocabulary keys the rung's export is given, as dotted recipe keys ('export.vocabulary',
    'vocabulary.recovery_steps'): those the ladder writes, then the rung's own, which win; what neither writes stays
    the recipe's. Each section's checked together by the recipe's own class."""
    given = {}
    for name in EXPORT_SECTIONS:
        written = {**written_keys(getattr(ladder, name)), **written_keys(getattr(rung, name))}
        typed_section(name, written, f"rung {rung.name}")
        given.update({f"{name}.{key}": value for key, value in written.items()})
    return given


def as_set_value(value: Any) -> str:
    """A value as --set parses it back (a YAML scalar or flow list)."""
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("\n...").strip()
