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
