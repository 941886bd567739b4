"""The export's first step, plan: the student and its recipe read, the programs chosen family by family, the parity
examples drawn, all before anything is written. Every refusal a user can cause comes from here, so a refused export
costs seconds and leaves nothing behind."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from pocketbert.core.config import export_families as families
from pocketbert.core.config.export_request import ExportRequest
from pocketbert.core.config.recipe import ExportSection, Recipe
from pocketbert.core.errors import ConfigError
from pocketbert.core.run.atomic_folder import check_writable
from pocketbert.core.run.run_files import EXPORT_DIR
from pocketbert.core.run.user_paths import recorded_dataset
from pocketbert.core.students.architectures import architecture_of
from pocketbert.core.students.piece_counts import count_pieces, recipe_texts
from pocketbert.core.students.stage_folder import load_stage_model, read_task_info
from pocketbert.core.tasks.data import subsample
from pocketbert.core.tasks.registry import make_task
from pocketbert.core.tasks.task_data import load_task_data
from pocketbert.export.programs import table_rows, variants
from pocketbert.export.steps.fitted_student import FittedStudent, read_fitted_student


@dataclass
class ExportPlan:
    """What the export will build, from which student, and gate on which examples."""

    run_dir: Path
    started: float
    student_dir: Path
    recipe: Recipe
    model: Any                  # the student the export ships: the run's student, or its fitted one
    tokenizer: Any
    task: Any
    architecture: Any
    max_length: int
    doc_stride: Optional[int]
    programs: dict              # families.ExportFamily -> the names chosen in that family
    variants: list              # variants.Variant, in build order
    data: Any                   # the dataset: its train split calibrates, its eval split gates
    examples: list              # the eval examples every gate runs
    n_coreml: int               # of them, those the Core ML and Core AI gates run
    fitted: Optional[FittedStudent]
    row_shares: Any             # each table row's share of the recipe's text, where rows go to 4 bits
    jobs: int                   # processes building and gating at once

    @property
    def export(self) -> ExportSection:
        return self.recipe.export

    def description(self) -> str:
        return f"pocketbert {self.task.name} student ({self.architecture.describe(self.model)})"

    def chosen(self, family: families.ExportFamily) -> list[str]:
        """The family's programs the plan builds, by the family's names, in build order."""
        return [v.name[len(family.variant_prefix):] for v in self.variants if v.family == family.name]


def export_jobs(export: ExportSection) -> int:
    """export.jobs, or every core this process may run on where the recipe leaves it unset."""
    from pocketbert.export.steps.job_graph import machine_cores

    return export.jobs or machine_cores()


def _chosen_programs(request: ExportRequest, task, architecture, notes: bool = True) -> dict:
    """Each family's programs, by its record's choice rule; a ConfigError or ExportError for what cannot apply."""
    shaping = request.shaping_options()
    if shaping and request.export.vocabulary != "fitted":
        raise ConfigError(f"{', '.join(shaping)} shape a fitted vocabulary, and this export keeps the full one: add "
                          "--vocabulary fitted")
    return {family: family.choose(request.asked.get(family), getattr(request.export, family.recipe_key),
                                  variants.applies(family, task, architecture), task.name, architecture.name, notes)
            for family in families.CHOSEN}


def check_request(request: ExportRequest) -> None:
    """What the plan would refuse in the request, read from the student's files without loading it, and whether
    the export may be written: the command runs this before any step (a vocabulary fit may come first), so a refused
    export costs seconds, not a fit."""
    check_writable(request.run_dir, EXPORT_DIR, request.overwrite)
    info = read_task_info(request.student_dir)
    check_positions(request.export, request.student_dir)
    _chosen_programs(request, make_task(info["task"], info["label_names"]), architecture_of(info), notes=False)


def check_positions(export: ExportSection, student_dir: Path) -> None:
    """export.max_length within the student's position table: a longer length would export, and the app's model
    would then fail on every input longer than its positions."""
    from pocketbert.core.files import read_json_object
    from pocketbert.core.run.run_files import MODEL_CONFIG

    if export.max_length is None or not (student_dir / MODEL_CONFIG).is_file():
        return
    positions = read_json_object(student_dir / MODEL_CONFIG, ConfigError,
                                 "train the student again").get("max_position_embeddings")
    if isinstance(positions, int) and export.max_length > positions:
        raise ConfigError(f"export.max_length {export.max_length} is beyond the student's {positions} positions: give "
                          f"at most {positions}")


def plan_export(request: ExportRequest) -> ExportPlan:
    """The plan of a request check_request passed: the student loaded, its programs chosen (with their notes), the
    parity examples drawn."""
    started = time.time()
    run_dir, data_dir, recipe = request.run_dir, request.data_dir, request.recipe
    model, tokenizer, task, info = load_stage_model(request.student_dir)
    architecture = architecture_of(info)
    export = recipe.export
    programs = _chosen_programs(request, task, architecture)
    seed = recipe.seed
    dataset = recorded_dataset(run_dir, recipe.dataset)  # a local file, wherever this command runs from
    data = load_task_data(dataset, task.name, data_dir, None, task.label_names or None, seed)
    examples = subsample(data.eval, export.parity_examples, seed)
    n_coreml = len(examples) if export.coreml_parity_examples is None else min(export.coreml_parity_examples,
                                                                              len(examples))
    chosen_variants = variants.selected(programs[families.COREML], task, architecture, programs[families.COREAI],
                                        programs[families.EXECUTORCH])
    fitted = None
    if export.vocabulary == "fitted":  # the run's fitted student (`pocketbert train vocabulary`), as trained
        fitted = read_fitted_student(request)
        model, tokenizer = fitted.model, fitted.tokenizer
    shares = None
    if export.embedding_int4_share:  # the rarest rows of the table go to 4 bits: rank them on the recipe's text
        table_rows.int4_group(model.get_input_embeddings().embedding_dim)  # a width that cannot be packed: refused now
        # as the shipped tokenizer cuts it: a fitted student carries its rows' shares, counted when it was fitted
        shares = fitted.shares() if fitted is not None else count_pieces(tokenizer, recipe_texts(
            task, data, recipe.transfer, data_dir, seed)).shares
    return ExportPlan(run_dir=Path(run_dir), started=started, student_dir=request.student_dir, recipe=recipe,
                      model=model, tokenizer=tokenizer, task=task, architecture=architecture,
                      max_length=export.max_length or info["max_length"], doc_stride=info.get("doc_stride"),
                      programs=programs, variants=chosen_variants, data=data, examples=examples, n_coreml=n_coreml,
                      fitted=fitted, row_shares=shares, jobs=export_jobs(export))
