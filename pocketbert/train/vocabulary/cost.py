"""What a fitted vocabulary costs: the fitted student (fed its own tokenizer's cuts) against the full student (fed
the full tokenizer's) on the recipe's evaluation examples that the export checks parity on (export.parity_examples),
as answers and as the task's metrics, and on each eval.cross_domain dataset.

A piece the fitted vocabulary dropped is cut into smaller pieces the student saw less often in training: the
change of segmentation, not the table, is what can move an answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pocketbert.core.config.recipe import EvalSection
from pocketbert.core.run.stage_records import StudentsCompared


@dataclass
class Compared:
    """The two students, each with its tokenizer, and how they are fed: what every measure below reads."""

    task: Any
    full_model: Any
    full_tokenizer: Any
    fitted_model: Any
    fitted_tokenizer: Any
    max_length: int
    doc_stride: int | None
    batch_size: int
    eval_cfg: EvalSection  # how answers are chosen (a QA span's n_best and longest answer)
    device: Any = "cpu"

    def logits(self, model, tokenizer, examples: list, what: str) -> tuple[list, list]:
        from pocketbert.core.students.inference import batched_logits, torch_forward

        features = self.task.features(tokenizer, examples, self.max_length, self.doc_stride)
        return features, batched_logits(self.task, features, tokenizer.pad_token_id, self.batch_size,
                                        torch_forward(model, self.task, self.device), what)


def against_full(compared: Compared, examples: list, what: str = "") -> StudentsCompared:
    """Agreement (the share of examples whose answer is the full student's) and both students' metrics."""
    import numpy as np

    task, eval_cfg = compared.task, compared.eval_cfg
    fitted_features, fitted_logits = compared.logits(compared.fitted_model, compared.fitted_tokenizer, examples,
                                                     f"fitted vocabulary{what}")
    full_features, full_logits = compared.logits(compared.full_model, compared.full_tokenizer, examples,
                                                 f"full vocabulary{what}")
    fitted = task.answers(examples, fitted_features, fitted_logits, eval_cfg)
    full = task.answers(examples, full_features, full_logits, eval_cfg)
    return StudentsCompared(examples=len(examples), agreement=float(np.mean([a == b for a, b in zip(fitted, full)])),
                            fitted_student=task.score_answers(examples, full_features, fitted),
                            full_student=task.score_answers(examples, full_features, full))


def across_domains(compared: Compared, recipe, data_dir, seed: int) -> dict[str, StudentsCompared]:
    """The same comparison on each eval.cross_domain dataset of the typed recipe (eval.cross_domain_max_examples
    of its evaluation split): text the vocabulary was not fitted to, where a dropped piece is met most."""
    from pocketbert.core.tasks.data import subsample
    from pocketbert.core.config.recipe import cross_domain_datasets
    from pocketbert.core.tasks.task_data import load_task_data

    task = compared.task
    out = {}
    for name in cross_domain_datasets(recipe):
        other = load_task_data(name, task.name, data_dir, None, task.label_names or None, seed)
        examples = subsample(other.eval, recipe.eval.cross_domain_max_examples, seed)
        out[name] = against_full(compared, examples, f" on {name}")
    return out
