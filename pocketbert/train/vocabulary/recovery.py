"""A short distillation after fitting (vocabulary.recovery_steps): the fitted student learns to read words cut into
smaller pieces, toward the full student's answers on the full tokenizer's cuts. This module chooses the texts
and computes the targets; the training loop (train/trainer.py) trains on them with the distillation's soft-target
loss (the task's soft_loss at distill.temperature).

What moves an answer is a word of the app's text whose piece the fitted vocabulary dropped, now cut into smaller
pieces the student saw less often. The training text itself is nearly all cut as before (its pieces were counted),
so recovery makes such cuts on it: the recipe's training and transfer text is split in two halves, a vocabulary is
fitted to the first half alone (the same rule, within the kept rows), and the second half, cut by it, meets pieces
the first half held too rarely, as an app's unseen text meets the fitted vocabulary. Those texts make half of what
the batches are drawn from, texts it cuts as before the other half, which holds the rest of the student in place.
The target is the full student, not the teacher: the export must keep the student's answers. The evaluation text is
never trained on (the fitted student's cost is measured on it).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from pocketbert.core.students import piece_counts
from pocketbert.core.errors import ConfigError
from pocketbert.train.vocabulary.tokenizer import fitted_tokenizer

RECOVERY_BATCH = 32
RECOVERY_TEXT = "recovery text"


def check_task(task) -> None:
    """Recovery matches one answer row per text: a task whose answers are per word piece cannot be lined up across
    two segmentations."""
    if task.per_token_outputs:
        raise ConfigError(f"vocabulary.recovery_steps: a {task.name} student answers per word piece, and a "
                          "fitted vocabulary cuts words into other pieces, so its answers cannot be matched to the "
                          "full student's: set it to 0")


def training_texts(texts: dict[str, tuple[int, list[str]]]) -> list[str]:
    """The distinct texts of every counted split (training and transfer: counted_text.py counts no evaluation
    text)."""
    return list(dict.fromkeys(t for _, split in texts.values() for t in split))


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
    counts = piece_counts.count_pieces(full_tokenizer, {"first half": (len(first), first)}).counts
    return second, [i for i in kept_ids if i in forced or counts[i] >= min_count]


def loop_section(distill, learning_rate: float):
    """What the training loop runs the recovery with: batches of RECOVERY_BATCH at the distillation's length, the
    recovery's learning rate decaying to 0 over the steps, no warm-up, no weight decay."""
    from pocketbert.core.config.recipe import TrainingSection

    return TrainingSection(max_length=distill.max_length, batch_size=RECOVERY_BATCH, epochs=1,
                           learning_rate=learning_rate, warmup_ratio=0.0, weight_decay=0.0,
                           checkpoint_every=distill.checkpoint_every, pad_to_multiple=distill.pad_to_multiple,
                           cuda_graphs=distill.cuda_graphs)


def table_alone(model):
    """`model` with its word-piece table the only parameter that learns: the layers stay the full student's, so
    text cut as before keeps its answers."""
    table = model.get_input_embeddings().weight
    for parameter in model.parameters():
        parameter.requires_grad_(parameter is table)
    return model


def soft_loss(task, temperature: float):
    """loss(model, batch): the distillation's soft-target loss (the task's, at `temperature`) of the model against
    the full student's logits the batch carries (teacher_cache's batch tensors)."""
    from pocketbert.train.teacher_cache import teacher_targets

    def loss(model, batch):
        inputs = {k: batch[k] for k in task.input_names if k in batch}
        return task.soft_loss(task.logits(model(**inputs)), teacher_targets(batch)[0], batch, temperature)

    return loss


@dataclass
class RecoveryRows:
    """What the recovery trains on: features the fitted student reads (the half vocabulary's cuts, in the fitted
    student's ids), the full student's logits on the full tokenizer's cuts of the same texts, row for row, and a
    record for the manifest."""

    features: list
    targets: np.ndarray | None   # [rows, classes]
    record: dict = field(default_factory=dict)


def recovery_rows(full_model, full_tokenizer, task, texts: list[str], kept_ids: list[int], forced: set[int],
                  min_count: int, max_length: int, batch_size: int, seed: int, device="cpu") -> RecoveryRows:
    """The rows of the recovery: the second half's texts the first half's vocabulary cuts differently, and as many
    it cuts as before. No such text leaves no rows, and the record says why."""
    from pocketbert.core.students.inference import batched_logits, torch_forward
    from pocketbert.core.tasks.registry import TextFeature

    second, half_ids = held_out_cut(full_tokenizer, texts, kept_ids, forced, min_count, seed)
    half_tokenizer = fitted_tokenizer(full_tokenizer, half_ids)
    changed, alike = split_by_cut(full_tokenizer, half_tokenizer, second, max_length)
    record = {"texts": len(texts), "second_half_rows": len(half_ids), "texts_cut_differently": len(changed)}
    if not changed:
        return RecoveryRows([], None, record | {
            "skipped": "no text of the second half is cut differently by the first half's vocabulary"})
    pool = changed + random.Random(seed).sample(alike, min(len(alike), len(changed)))
    examples = task.unlabeled_examples(pool, RECOVERY_TEXT)
    # the half vocabulary's ids as the fitted student numbers them (both keep their ids in ascending order)
    to_fitted = np.searchsorted(np.asarray(kept_ids), np.asarray(half_ids))
    features = [TextFeature([int(i) for i in to_fitted[f.input_ids]], f.label)
                for f in task.features(half_tokenizer, examples, max_length)]
    full_features = task.features(full_tokenizer, examples, max_length)
    targets = batched_logits(task, full_features, full_tokenizer.pad_token_id, batch_size,
                             torch_forward(full_model, task, device), "full student's answers")
    return RecoveryRows(features, np.stack(targets).astype(np.float32), record | {"texts_drawn_from": len(pool)})
