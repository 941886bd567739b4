"""A short distillation after fitting (export.vocabulary_recovery_steps): the fitted student learns to read words cut
into smaller pieces, toward the full student's answers on the full tokenizer's cuts.

What moves an answer is a word of the app's text whose piece the fitted vocabulary dropped, now cut into smaller
pieces the student saw less often. The training text itself is nearly all cut as before (its pieces were counted),
so recovery makes such cuts on it: the recipe's training and transfer text is split in two halves, a vocabulary is
fitted to the first half alone (the same rule, within the kept rows), and the second half, cut by it, meets pieces
the first half held too rarely, as an app's unseen text meets the fitted vocabulary. Those texts make half of what
the batches are drawn from, texts it cuts as before the other half, which holds the rest of the student in place.
The target is the full student, not the teacher: the export must keep the student's answers. The evaluation text is
never trained on (the export's cost and gates are measured on it).
"""

from __future__ import annotations

import random
import time

import numpy as np

from pocketbert.core.errors import ConfigError
from pocketbert.export.vocabulary import counting
from pocketbert.export.vocabulary.tokenizer import fitted_tokenizer

RECOVERY_BATCH = 32
RECOVERY_TEMPERATURE = 2.0   # the distillation recipes' soft-target temperature
EVAL_SPLIT = "eval"          # counting.recipe_texts' name for the evaluation text


def check_task(task) -> None:
    """Recovery matches one answer row per text: a task whose answers are per word piece cannot be lined up across
    two segmentations."""
    if task.per_token_outputs:
        raise ConfigError(f"export.vocabulary_recovery_steps: a {task.name} student answers per word piece, and a "
                          "fitted vocabulary cuts words into other pieces, so its answers cannot be matched to the "
                          "full student's: set it to 0")


def training_texts(texts: dict[str, tuple[int, list[str]]]) -> list[str]:
    """The distinct texts of every split but the evaluation one."""
    return list(dict.fromkeys(t for name, (_, split) in texts.items() if name != EVAL_SPLIT for t in split))


def split_by_cut(full_tokenizer, other_tokenizer, texts: list[str], max_length: int) -> tuple[list[str], list[str]]:
    """(texts `other_tokenizer` cuts differently within max_length, texts it cuts as the full one does)."""
    def cuts(tokenizer):
        ids = tokenizer(texts, truncation=True, max_length=max_length, add_special_tokens=True)["input_ids"]
        return [tokenizer.convert_ids_to_tokens(row) for row in ids]

    changed, alike = [], []
    for text, full, other in zip(texts, cuts(full_tokenizer), cuts(other_tokenizer)):
        (changed if full != other else alike).append(text)
    return changed, alike


def held_out_cut(full_tokenizer, texts: list[str], kept_ids: list[int], forced: set[int], min_count: int,
                 seed: int) -> tuple[list[str], list[int]]:
    """(the second half of `texts`, the kept ids a vocabulary fitted to the first half keeps): the pieces the first
    half holds at least min_count times, and the forced ones."""
    shuffled = random.Random(seed).sample(texts, len(texts))
    first, second = shuffled[:len(shuffled) // 2], shuffled[len(shuffled) // 2:]
    counts = counting.count_pieces(full_tokenizer, {"first half": (len(first), first)}).counts
    return second, [i for i in kept_ids if i in forced or counts[i] >= min_count]


def recover(fitted_model, full_model, full_tokenizer, task, texts: list[str], kept_ids: list[int], forced: set[int],
            min_count: int, steps: int, learning_rate: float, max_length: int, seed: int) -> dict:
    """Train `fitted_model` (the rows of kept_ids) in place for `steps` batches; what it did, for the manifest."""
    import torch
    from tqdm.auto import tqdm

    from pocketbert.core.losses import soft_target_kl

    started = time.perf_counter()
    second, half_ids = held_out_cut(full_tokenizer, texts, kept_ids, forced, min_count, seed)
    half_tokenizer = fitted_tokenizer(full_tokenizer, half_ids)
    # the half vocabulary's ids as the fitted student numbers them (both keep their ids in ascending order)
    to_fitted = torch.from_numpy(np.searchsorted(np.asarray(kept_ids), np.asarray(half_ids)))
    changed, alike = split_by_cut(full_tokenizer, half_tokenizer, second, max_length)
    record = {"steps": 0, "learning_rate": learning_rate, "batch_size": RECOVERY_BATCH, "max_length": max_length,
              "texts": len(texts), "second_half_rows": len(half_ids), "texts_cut_differently": len(changed)}
    if not changed:
        return record | {"skipped": "no text of the second half is cut differently by the first half's vocabulary"}
    rng = random.Random(seed)
    pool = changed + rng.sample(alike, min(len(alike), len(changed)))
    record["texts_drawn_from"] = len(pool)

    def batch_of(tokenizer, chunk: list[str]) -> dict:
        features = task.features(tokenizer, task.unlabeled_examples(chunk, "recovery text"), max_length)
        arrays = task.collate(features, tokenizer.pad_token_id)
        return {k: torch.from_numpy(arrays[k]) for k in task.input_names if k in arrays}

    torch.manual_seed(seed)
    # The word-piece table alone: it is what reads the new cuts, and the layers stay as the full student's, so
    # texts cut as before keep their answers.
    table = fitted_model.get_input_embeddings().weight
    was_trainable = table.requires_grad
    table.requires_grad_(True)
    optimizer = torch.optim.AdamW([table], lr=learning_rate, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 - step / steps)
    # No dropout: the fitted student should learn the full student's answers, not a noisy version of them.
    fitted_model.eval()
    full_model.eval()
    losses, order = [], []
    try:
        for _ in tqdm(range(steps), desc="vocabulary recovery", unit="step", leave=False):
            if len(order) < RECOVERY_BATCH:
                order += rng.sample(pool, len(pool))
            chunk, order = order[:RECOVERY_BATCH], order[RECOVERY_BATCH:]
            with torch.no_grad():
                target = task.logits(full_model(**batch_of(full_tokenizer, chunk)))
            inputs = batch_of(half_tokenizer, chunk)
            inputs["input_ids"] = to_fitted[inputs["input_ids"]]
            loss = soft_target_kl(task.logits(fitted_model(**inputs)), target, RECOVERY_TEMPERATURE)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
    finally:
        table.requires_grad_(was_trainable)
    window = max(1, min(50, steps // 4))
    return record | {"steps": steps, "loss_first": sum(losses[:window]) / window,
                     "loss_last": sum(losses[-window:]) / window, "seconds": round(time.perf_counter() - started, 1)}
