"""The text a fitted vocabulary is counted on, the rows it keeps there, and what it lacks of the evaluation text.

Counted: the dataset's training examples and each transfer source's passages (core/students/piece_counts.py
recipe_texts). Never counted: the evaluation split, and a transfer passage that is an evaluation text (of the
evaluation split or of a cross-domain dataset's, compared as the distillation's transfer set compares them: case and
runs of whitespace ignored), so that the fitted student's scores on them are scores on text it was not fitted to.

What the fit keeps is then measured on the evaluation text: the share of its word pieces, as the full tokenizer cuts
it, whose row the fitted table lacks (eval_unknown_rate: pieces the fitted table would look up as [UNK], which the
fitted tokenizer cuts into smaller kept pieces instead).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pocketbert.core.students import piece_counts
from pocketbert.core.students.piece_counts import EVAL_SPLIT, TRAINING_SPLIT
from pocketbert.core.tasks.data import text_key
from pocketbert.train.vocabulary.choice import KeptRows, choose_rows


@dataclass
class FitText:
    """The fit's text by split: split name -> (examples, their texts)."""

    counted: dict[str, tuple[int, list[str]]]       # the training split and each transfer source's
    evaluation: dict[str, tuple[int, list[str]]]    # the evaluation split alone: measured, never counted
    dropped_as_eval_text: dict[str, int] = field(default_factory=dict)  # transfer split -> passages left out


def split_texts(texts: dict[str, tuple[int, list[str]]], evaluated: list[str]) -> FitText:
    """recipe_texts' splits as the fit takes them: the evaluation split apart, and each transfer passage that is one
    of `evaluated` (every evaluation text: the evaluation split's and each cross-domain dataset's) left out."""
    excluded = {text_key(text) for text in evaluated}
    counted, dropped = {}, {}
    for name, (examples, split) in texts.items():
        if name == EVAL_SPLIT:
            continue
        if name != TRAINING_SPLIT:  # a transfer source: each passage an example
            kept = [text for text in split if text_key(text) not in excluded]
            dropped[name] = len(split) - len(kept)
            examples, split = len(kept), kept
        counted[name] = (examples, split)
    evaluation = {EVAL_SPLIT: texts[EVAL_SPLIT]} if EVAL_SPLIT in texts else {}
    return FitText(counted, evaluation, dropped)


def evaluation_texts(task, eval_texts: list[str], recipe, data_dir: Path | None, seed: int) -> list[str]:
    """Every evaluation text of the run: the dataset's evaluation split's (`eval_texts`) and each cross-domain
    dataset's (read only where the recipe has transfer sources, the one place these can reach the counted text)."""
    from pocketbert.core.config.recipe import cross_domain_datasets
    from pocketbert.core.tasks.task_data import load_task_data

    texts = list(eval_texts)
    if recipe.transfer.data:
        for name in cross_domain_datasets(recipe):
            other = load_task_data(name, task.name, data_dir, None, task.label_names or None, seed)
            texts += piece_counts.example_texts(task, other.eval)
    return texts


def fit_texts(task, data, recipe, data_dir: Path | None, seed: int) -> FitText:
    """The recipe's own text as the fit counts and measures it (recipe: the typed recipe)."""
    texts = piece_counts.recipe_texts(task, data, recipe.transfer, data_dir, seed)
    return split_texts(texts, evaluation_texts(task, texts[EVAL_SPLIT][1], recipe, data_dir, seed))


def fit_rows(tokenizer, text: FitText, forced: set[int], min_count: int,
             max_rows: int | None) -> tuple[KeptRows, dict]:
    """The rows kept on the counted text (choice.choose_rows, ranked under a cap by each piece's share of its
    source) and the fit's record: the rows, the text counted, the share of its pieces that kept their own row (the
    rest are cut into smaller kept pieces), and what the evaluation text lacks."""
    counted = piece_counts.count_pieces(tokenizer, text.counted)
    kept = choose_rows(counted.counts, forced, min_count, max_rows, counted.shares)
    for name, dropped in text.dropped_as_eval_text.items():
        counted.splits[name]["dropped_as_eval_text"] = dropped
    pieces = int(counted.counts.sum())
    record = {**kept.record(), "counted_on": counted.splits,
              "counted_pieces_kept": round(float(counted.counts[kept.ids].sum()) / pieces, 6) if pieces else None,
              **unknown_share(tokenizer, text.evaluation, kept.ids)}
    return kept, record


def unknown_share(tokenizer, evaluation: dict[str, tuple[int, list[str]]], kept_ids: list[int]) -> dict:
    """The evaluation text cut by the full `tokenizer` (each distinct text once, as the counted text is), and the
    share of its pieces whose row is not among `kept_ids`; None where it holds no piece."""
    counted = piece_counts.count_pieces(tokenizer, evaluation)
    pieces = int(counted.counts.sum())
    lacked = pieces - int(counted.counts[kept_ids].sum())
    split = counted.splits.get(EVAL_SPLIT, {"examples": 0, "texts": 0, "pieces": 0})
    return {"eval_text": {**split, "pieces_lacked": lacked},
            "eval_unknown_rate": round(lacked / pieces, 6) if pieces else None}
