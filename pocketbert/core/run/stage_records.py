"""Each stage's manifest.json as one typed record: write_manifest writes a stage's manifest through its record class
and read_manifest reads it back through the same class, so a later stage reads fields, never string keys, and a
manifest that lacks what its readers read is refused when it is read. A record types what its readers read and keeps
anything else its writer recorded (extra fields) as it was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# The manifest key under which a stage records every file and folder it wrote (the manifest itself aside):
# {name: {"sha256": ..., "bytes": ...}}. The next stage checks them before it reads any (verify_artifacts).
ARTIFACTS = "artifacts"


class Part(BaseModel):
    """A part of a record: the fields its readers read, typed; the rest of what the writer recorded kept."""

    model_config = ConfigDict(extra="allow")


class InputFile(Part):
    path: str
    sha256: str | None = None


class ArtifactFile(Part):
    sha256: str
    bytes: int | None = None


class StageConfig(Part):
    pass


class StageMetrics(Part):
    pass


class StageRecord(Part):
    """What every stage's manifest holds: what it was given, what it made, and with which software."""

    stage: str
    created: str | None = None
    wall_time_s: float | None = None
    config: StageConfig
    inputs: dict[str, InputFile] = Field(default_factory=dict)
    metrics: StageMetrics
    versions: dict[str, str | None] = Field(default_factory=dict)
    git_commit: str | None = None
    command: str | None = None
    host: dict[str, str | None] = Field(default_factory=dict)
    # None: a folder written before stages recorded their files (read unchecked, with a note)
    artifacts: dict[str, ArtifactFile] | None = None

    def input_path(self, name: str) -> str | None:
        """The path the stage recorded for its input `name`, None when it had none."""
        given = self.inputs.get(name)
        return given.path if given is not None else None


# ---------------------------------------------------------------- training stages: teacher, student, student_fitted

class TrainedConfig(StageConfig):
    # the recipe the stage ran, as recorded (core/config/recipe.py complete_recipe reads it back)
    recipe: dict[str, Any]
    recipe_name: str | None = None
    dataset: str | None = None
    teacher: str | None = None  # the teacher folder a distillation read, as the command named it
    imported_from: str | None = None  # `pocketbert import`: the checkpoint the student came from
    seed: int | None = None
    device: str | None = None


class TrainedMetrics(StageMetrics):
    """What a training stage measured: its scores, its loop, the cross-domain scores and the teacher's cache."""

    eval: dict[str, Any] | None = None
    train: dict[str, Any] | None = None
    cross_domain: dict[str, Any] | None = None
    teacher_cache: dict[str, Any] | None = None
    augmentation: dict[str, Any] | None = None


class TrainedRecord(StageRecord):
    config: TrainedConfig
    metrics: TrainedMetrics


class TeacherRecord(TrainedRecord):
    pass


class StudentMetrics(TrainedMetrics):
    eval: dict[str, Any]
    primary_metric: str | None = None
    teacher_eval: dict[str, Any] | None = None
    fraction_of_teacher_kept: float | None = None
    parameters: int | None = None
    teacher_parameters: int | None = None
    pruning: dict[str, Any] | None = None
    transfer_data: dict[str, Any] | None = None
    eval_set: dict[str, Any] | None = None  # the eval file's md5 and the examples scored


class StudentConfig(TrainedConfig):
    dataset: str  # the data a student was trained and scored on: bench and compare name it beside its score


class StudentRecord(TrainedRecord):
    config: StudentConfig
    metrics: StudentMetrics


class FittedConfig(TrainedConfig):
    # the sha256 of the student's manifest.json the vocabulary was fitted from (a student trained again has another)
    fitted_from_student: str | None = None
    # the vocabulary section's settings it was fitted with (core/students/fitted_vocabulary.py FITTING_KEYS)
    vocabulary_settings: dict[str, Any] = Field(default_factory=dict)


class StudentsCompared(Part):
    """The fitted student against the full one on `examples` examples (train/vocabulary/cost.py): the share whose
    answer is the full student's, and each student's metrics by the task's metric names."""

    examples: int
    agreement: float
    fitted_student: dict[str, Any]
    full_student: dict[str, Any]

    def metrics_line(self) -> str:
        """Each numeric metric of the fitted student, with the full student's beside it."""
        return ", ".join(f"{k} {v:.4f} (full {self.full_student[k]:.4f})" for k, v in self.fitted_student.items()
                         if isinstance(v, float))


class VocabularyRecovery(Part):
    """The recovery distillation of a fitted vocabulary's table (train/vocabulary/step.py): its steps and the
    soft-target loss over its rows before and after them."""

    steps: int = 0
    loss_before: float | None = None
    loss_after: float | None = None
    train: dict[str, Any] | None = None  # the training loop's statistics


class VocabularyRecord(Part):
    """What fitting a vocabulary kept and cost (train/vocabulary/step.py), and, in an export's record, each token-id
    model's size had it kept the full table."""

    rows_before: int | None = None
    rows_after: int | None = None
    eval_unknown_rate: float | None = None  # the eval text's pieces whose row the fitted table lacks
    recovery: VocabularyRecovery | None = None
    against_full_student: StudentsCompared | None = None
    against_full_student_across_domains: dict[str, StudentsCompared] | None = None
    full_vocabulary_sizes_bytes: dict[str, int] = Field(default_factory=dict)


class FittedMetrics(TrainedMetrics):
    vocabulary: VocabularyRecord


class FittedStudentRecord(TrainedRecord):
    config: FittedConfig
    metrics: FittedMetrics


# ---------------------------------------------------------------- export

class VariantEntry(Part):
    file: str
    runtime: str
    precision: str


class ExportConfig(StageConfig):
    task: str
    max_length: int
    variants: dict[str, VariantEntry] = Field(default_factory=dict)
    coreml_variants: list[str] = Field(default_factory=list)
    coreai_variants: list[str] = Field(default_factory=list)
    executorch_variants: list[str] = Field(default_factory=list)
    parity_examples: int | None = None  # the eval examples the gates drew
    coreml_parity_examples: int | None = None  # of them, those the Apple programs' gates ran


class ParityRow(Part):
    """One gated model's row (export/checks/parity.py ParityResult, with its program's placement)."""

    artifact: str
    runtime: str | None = None
    precision: str | None = None
    n_examples: int
    agreement: float
    passed: bool
    metrics: dict[str, Any] = Field(default_factory=dict)
    student_metrics: dict[str, Any] = Field(default_factory=dict)
    max_abs_diff: float | None = None
    seconds_per_sequence: float | None = None
    by_length: dict[str, Any] | None = None
    by_windows: dict[str, Any] | None = None
    app_runtimes: dict[str, Any] | None = None
    drop_standard_error: float | None = None
    placement: dict[str, Any] | None = None


class QAInGraph(Part):
    settings: dict[str, Any] = Field(default_factory=dict)
    checked: dict[str, Any] = Field(default_factory=dict)


class ExportMetrics(StageMetrics):
    parity: dict[str, ParityRow]
    sizes_bytes: dict[str, int] = Field(default_factory=dict)
    placement: dict[str, Any] | None = None
    # the fitted student's record and the token-id models' sizes with the full table (export.vocabulary: fitted)
    vocabulary: VocabularyRecord | None = None
    coreai_entry_points: list[int] | None = None
    ort_mobile_usability: dict[str, Any] | None = None
    qa_in_graph: QAInGraph | None = None
    student_eval_on_parity_set: dict[str, Any] | None = None
    # what the export's steps took and found (export/steps/record.py writes each; the scripts that time and
    # compare exports read them)
    timings: dict[str, Any] | None = None
    int8_mixed_precision: dict[str, Any] | None = None
    int8_word_table: dict[str, Any] | None = None
    coreml_enumerated_lengths: Any = None
    text_in: dict[str, Any] | None = None
    text_in_tokenizer_exhaustive: dict[str, Any] | None = None
    app_tokenizer_exhaustive: dict[str, Any] | None = None
    tokenizer_golden: dict[str, Any] | None = None

    def full_vocabulary_size(self, file: str) -> int | None:
        """`file`'s size had it kept the full vocabulary, where the export fitted one and measured it."""
        return self.vocabulary.full_vocabulary_sizes_bytes.get(file) if self.vocabulary is not None else None


class ExportRecord(StageRecord):
    config: ExportConfig
    metrics: ExportMetrics
    app_files: list[str] = Field(default_factory=list)

    def variant_file(self, variant: str) -> str | None:
        """The file the export wrote for `variant`, None when it made none."""
        entry = self.config.variants.get(variant)
        return entry.file if entry is not None else None


# Each stage's record class, by the `stage` its manifest names (a stage not named here reads as StageRecord).
RECORDS: dict[str, type[StageRecord]] = {
    "teacher": TeacherRecord,
    "student": StudentRecord,
    "student_fitted": FittedStudentRecord,
    "export": ExportRecord,
}


def recorded_stage(manifest: Path) -> str | None:
    """The stage a manifest.json names, when its content is one pocketbert wrote (an object naming its stage), else
    None: read before the whole record is, so that a stage written by another version (other fields) is still known
    as one, and another tool's manifest.json (a web app's, a browser extension's) is not taken for one. A file that
    cannot be read, is not UTF-8 or not JSON raises OSError or ValueError: the caller decides what damage means."""
    recorded = json.loads(Path(manifest).read_text(encoding="utf-8"))
    stage = recorded.get("stage") if isinstance(recorded, dict) else None
    return stage if isinstance(stage, str) else None


def record_class(stage: object) -> type[StageRecord]:
    return RECORDS.get(str(stage), StageRecord)
