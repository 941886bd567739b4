"""export.vocabulary: fitted, as one step of the export: count the recipe's text, choose the rows, gather them
into a copy of the student, rebuild its tokenizer and, when the recipe asks, distil it briefly toward the full
student. It runs before the export writes anything, so a setting that keeps nothing ends the export with no files;
the rest of the export then runs from the fitted student as it would from the student."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pocketbert.export import table_rows
from pocketbert.export.vocabulary import choice, cost, counting, recovery, rows
from pocketbert.export.vocabulary.tokenizer import fitted_tokenizer, wordpiece_vocabulary


@dataclass
class FittedVocabulary:
    model: Any            # the fitted student
    tokenizer: Any        # its tokenizer
    full_model: Any       # the student as trained, for the cost
    full_tokenizer: Any
    record: dict          # for the export's manifest
    texts: dict           # the recipe's text it was fitted to, by split (counting.recipe_texts)
    recipe: dict          # its eval.cross_domain datasets are measured too
    data_dir: Path | None
    seed: int

    def measure(self, task, examples: list, features: list, logits: list, max_length: int, doc_stride: int | None,
                batch_size: int, eval_cfg: dict) -> dict:
        """The fitted student's answers (`logits` on its `features`) against the full student's, and on each
        cross-domain dataset of the recipe: into the record."""
        self.record["against_full_student"] = cost.against_full(
            task, examples, self.full_model, self.full_tokenizer, features, logits, max_length, doc_stride,
            batch_size, eval_cfg)
        self.record["against_full_student_across_domains"] = cost.across_domains(
            task, self.recipe, self.data_dir, self.seed, self.full_model, self.full_tokenizer, self.model,
            self.tokenizer, max_length, doc_stride, batch_size, eval_cfg)
        return self.record

    def measure_full_sizes(self, onnx_files: list[Path]) -> dict:
        """Each ONNX model's size had it kept the full vocabulary (table_rows.size_with_rows): into the record, so
        that a report can show both sizes."""
        self.record["full_vocabulary_sizes_bytes"] = {
            path.name: table_rows.size_with_rows(path, self.record["rows_after"], self.record["rows_before"])
            for path in onnx_files}
        return self.record


def fit_vocabulary(model, tokenizer, task, data, recipe: dict, data_dir: Path | None, seed: int) -> FittedVocabulary:
    """The student and its tokenizer cut to the rows the recipe's own text uses (export.vocabulary_min_count,
    export.vocabulary_max_rows), then distilled export.vocabulary_recovery_steps steps toward the full student."""
    export_cfg = recipe["export"]
    steps = int(export_cfg["vocabulary_recovery_steps"])
    if steps:
        recovery.check_task(task)
    vocab, prefix = wordpiece_vocabulary(tokenizer)
    texts = counting.recipe_texts(task, data, recipe["transfer"], data_dir, seed)
    counted = counting.count_pieces(tokenizer, texts)
    special = set(tokenizer.all_special_ids) | set(getattr(tokenizer, "added_tokens_decoder", {}) or {})
    forced = choice.forced_ids(vocab, sorted(special), prefix)
    min_count = int(export_cfg["vocabulary_min_count"])
    kept = choice.choose_rows(counted.counts, forced, min_count, export_cfg["vocabulary_max_rows"], counted.shares)
    pieces = int(counted.counts.sum())
    record = {**kept.record(), "counted_on": counted.splits,
              # the counted text's pieces whose own row was kept: the rest are cut into smaller kept pieces
              "counted_pieces_kept": round(float(counted.counts[kept.ids].sum()) / pieces, 6) if pieces else None}
    fitted_model, fitted_tok = rows.fitted_student(model, kept.ids), fitted_tokenizer(tokenizer, kept.ids)
    if steps:
        record["recovery"] = recovery.recover(
            fitted_model, model, tokenizer, task, recovery.training_texts(texts), kept.ids, forced, min_count, steps,
            float(export_cfg["vocabulary_recovery_learning_rate"]), int(recipe["distill"]["max_length"]), seed)
    return FittedVocabulary(fitted_model, fitted_tok, model, tokenizer, record, texts, recipe, data_dir, seed)
