"""What a fitted vocabulary costs: the fitted student (fed its own tokenizer's cuts) against the full student (fed
the full tokenizer's) on the export's evaluation examples, as answers and as the task's metrics.

A piece the fitted vocabulary dropped is cut into smaller pieces the student saw less often in training: the
change of segmentation, not the table, is what can move an answer.
"""

from __future__ import annotations


def against_full(task, examples: list, full_model, full_tokenizer, fitted_features: list, fitted_logits: list,
                 max_length: int, doc_stride: int | None, batch_size: int, eval_cfg: dict) -> dict:
    """Agreement (the share of examples whose answer is the full student's) and both students' metrics."""
    import numpy as np

    from pocketbert.core.inference import batched_logits, torch_forward

    full_features = task.features(full_tokenizer, examples, max_length, doc_stride)
    full_logits = batched_logits(task, full_features, full_tokenizer.pad_token_id, batch_size,
                                 torch_forward(full_model, task), "full vocabulary")
    fitted = task.answers(examples, fitted_features, fitted_logits, eval_cfg)
    full = task.answers(examples, full_features, full_logits, eval_cfg)
    return {"examples": len(examples),
            "agreement": float(np.mean([a == b for a, b in zip(fitted, full)])),
            "fitted_student": task.score_answers(examples, full_features, fitted),
            "full_student": task.score_answers(examples, full_features, full)}


def across_domains(task, recipe: dict, data_dir, seed: int, full_model, full_tokenizer, fitted_model,
                   fitted_tokenizer, max_length: int, doc_stride: int | None, batch_size: int, eval_cfg: dict) -> dict:
    """The same comparison on each eval.cross_domain dataset (eval.cross_domain_max_examples of its evaluation
    split): text the vocabulary was not fitted to, where a dropped piece is met most."""
    from pocketbert.core.data import subsample
    from pocketbert.core.inference import batched_logits, torch_forward
    from pocketbert.core.recipe import cross_domain_datasets
    from pocketbert.core.task_data import load_task_data

    out = {}
    for name in cross_domain_datasets(recipe):
        other = load_task_data(name, task.name, data_dir, None, task.label_names or None, seed)
        examples = subsample(other.eval, int(recipe["eval"]["cross_domain_max_examples"]), seed)
        features = task.features(fitted_tokenizer, examples, max_length, doc_stride)
        logits = batched_logits(task, features, fitted_tokenizer.pad_token_id, batch_size,
                                torch_forward(fitted_model, task), f"fitted vocabulary on {name}")
        out[name] = against_full(task, examples, full_model, full_tokenizer, features, logits, max_length, doc_stride,
                                 batch_size, eval_cfg)
    return out
