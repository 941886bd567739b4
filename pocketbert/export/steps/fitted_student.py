"""export.vocabulary: fitted: the export ships the run's fitted student (<run>/student_fitted/, written by `pocketbert
train vocabulary`) as it ships a student, and carries its record (the rows kept, the text counted, the recovery, the
cost against the full student) into its own manifest, adding what only the exported files can tell: each token-id
ONNX model's size had it kept the full vocabulary."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pocketbert.core.config.export_request import ExportRequest
from pocketbert.core.errors import RunDirError
from pocketbert.core.students.fitted_vocabulary import FIT_COMMAND, FITTING_KEYS, SECTION, fit_options, why_refit
from pocketbert.core.run.manifest import verified_stage
from pocketbert.core.run.stage_records import VocabularyRecord
from pocketbert.core.run.run_files import FITTED_STUDENT_DIR, PIECE_SHARES
from pocketbert.export.programs import table_rows


@dataclass
class FittedStudent:
    folder: Path
    model: Any
    tokenizer: Any
    record: VocabularyRecord  # the fitted manifest's metrics.vocabulary, carried into the export's manifest

    def shares(self):
        """Each row's largest share of one source's pieces, counted when it was fitted, as its tokenizer cuts the
        recipe's text (what export.embedding_int4_share ranks the rows by)."""
        import numpy as np

        shares = np.load(self.folder / PIECE_SHARES, allow_pickle=False)
        if shares.shape != (self.record.rows_after,):
            raise RunDirError(f"{self.folder / PIECE_SHARES} holds {shares.shape} values for "
                              f"{self.record.rows_after} rows: re-run `{FIT_COMMAND} --run {self.folder.parent} "
                              "--overwrite`")
        return shares

    def with_full_sizes(self, onnx_files: list[Path]) -> VocabularyRecord:
        """The record with each ONNX model's size had it kept the full vocabulary (table_rows.size_with_rows), so
        that a report can show both sizes."""
        sizes = {path.name: table_rows.size_with_rows(path, self.record.rows_after, self.record.rows_before)
                 for path in onnx_files}
        return self.record.model_copy(update={"full_vocabulary_sizes_bytes": sizes})


def read_fitted_student(request: ExportRequest) -> FittedStudent:
    """The run's fitted student, checked to be fitted from the run's student with the vocabulary settings the
    request's options give."""
    from pocketbert.core.students.stage_folder import load_stage_model

    asked = request.given_values(SECTION, FITTING_KEYS)
    reason = why_refit(request.run_dir, asked)
    if reason is not None:
        raise RunDirError(f"{reason}: run `{FIT_COMMAND} --run {request.run_dir}{fit_options(asked)} --overwrite` "
                          "first (`pocketbert export` runs it itself)")
    folder, manifest = verified_stage(request.run_dir, FITTED_STUDENT_DIR, FIT_COMMAND)
    model, tokenizer, _, _ = load_stage_model(folder)
    return FittedStudent(folder, model, tokenizer, manifest.metrics.vocabulary)
