"""export.vocabulary: fitted, as one step of the export: count the recipe's text, choose the rows, gather them
into a copy of the student and rebuild its tokenizer. It runs before the export writes anything, so a setting that
keeps nothing ends the export with no files; the rest of the export then runs from the fitted student as it would
from the student."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pocketbert.export.vocabulary import choice, cost, counting, rows
from pocketbert.export.vocabulary.tokenizer import fitted_tokenizer, wordpiece_vocabulary


@dataclass
class FittedVocabulary:
    model: Any            # the fitted student
    tokenizer: Any        # its tokenizer
    full_model: Any       # the student as trained, for the cost
    full_tokenizer: Any
    record: dict          # for the export's manifest

    def measure(self, task, examples: list, features: list, logits: list, max_length: int, doc_stride: int | None,
                batch_size: int, eval_cfg: dict) -> dict:
        """The fitted student's answers (`logits` on its `features`) against the full student's: into the record."""
        self.record["against_full_student"] = cost.against_full(
            task, examples, self.full_model, self.full_tokenizer, features, logits, max_length, doc_stride,
            batch_size, eval_cfg)
        return self.record


def fit_vocabulary(model, tokenizer, task, data, recipe: dict, data_dir: Path | None, seed: int) -> FittedVocabulary:
    """The student and its tokenizer cut to the rows the recipe's own text uses (export.vocabulary_min_count,
    export.vocabulary_max_rows)."""
    export_cfg = recipe["export"]
    vocab, prefix = wordpiece_vocabulary(tokenizer)
    counted = counting.count_pieces(tokenizer, counting.recipe_texts(task, data, recipe["transfer"], data_dir, seed))
    special = set(tokenizer.all_special_ids) | set(getattr(tokenizer, "added_tokens_decoder", {}) or {})
    kept = choice.choose_rows(counted.counts, choice.forced_ids(vocab, sorted(special), prefix),
                              int(export_cfg["vocabulary_min_count"]), export_cfg["vocabulary_max_rows"])
    pieces = int(counted.counts.sum())
    record = {**kept.record(), "counted_on": counted.splits,
              # the counted text's pieces whose own row was kept: the rest are cut into smaller kept pieces
              "counted_pieces_kept": round(float(counted.counts[kept.ids].sum()) / pieces, 6) if pieces else None}
    return FittedVocabulary(rows.fitted_student(model, kept.ids), fitted_tokenizer(tokenizer, kept.ids), model,
                            tokenizer, record)
