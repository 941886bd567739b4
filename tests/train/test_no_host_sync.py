"""A training step never makes the host wait for the device.

Every read of a device value on the host (`.item()`, `if tensor:`, boolean indexing, whose output size is a
value) makes a GPU run dry. On the CPU the same mistakes are caught by running the step on meta tensors:
they have shapes and no values, so any operation that needs a value fails there, and one that only queues
work runs. On a GPU, CUDA's own sync detector checks the same step.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForQuestionAnswering, BertForSequenceClassification

from pocketbert.core.tasks import losses
from pocketbert.core.config.recipe import TrainingSection
from pocketbert.core.tasks.registry import QATask, SentimentTask
from pocketbert.train import precision, trainer
from pocketbert.train.distill import distillation_loss
from pocketbert.train.teacher_cache import TeacherOutputs

META = torch.device("meta")
BATCH, LENGTH, HIDDEN, CLASSES = 4, 9, 16, 3
TARGETS = [1, 2]
# The loss parts each recipe's step computes, one per non-zero weight: a part dropped or left out of the loss fails.
DISTILBERT_WEIGHTS = {"kl": 1.0, "ce": 0.5, "cos": 0.5}
DISTILBERT_PARTS = {"kl", "ce", "cos"}
LAYERWISE_WEIGHTS = {**DISTILBERT_WEIGHTS, "hidden": 1.0, "embedding": 1.0, "attention": 1.0, "relation": 1.0}
LAYERWISE_PARTS = {"kl", "ce", "cos", "hidden", "embedding", "attention", "relation"}


def tiny_bert(cls, layers: int, **extra):
    config = BertConfig(vocab_size=64, hidden_size=HIDDEN, num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=32, **extra)
    return cls(config)


def meta_batch(task, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    batch = {"input_ids": torch.zeros(BATCH, LENGTH, dtype=torch.long, device=META),
             "attention_mask": torch.ones(BATCH, LENGTH, dtype=torch.long, device=META)}
    if isinstance(task, QATask):
        batch["token_type_ids"] = torch.zeros(BATCH, LENGTH, dtype=torch.long, device=META)
        batch["start_positions"] = torch.zeros(BATCH, dtype=torch.long, device=META)
        batch["end_positions"] = torch.zeros(BATCH, dtype=torch.long, device=META)
    else:
        batch["labels"] = torch.zeros(BATCH, dtype=torch.long, device=META) if labels is None else labels
    return batch


def meta_cache(per_token: bool, classes: int) -> TeacherOutputs:
    """Cached teacher outputs for 10 features of LENGTH tokens, on the meta device."""
    n, tokens = 10, 10 * LENGTH
    logits = torch.empty(tokens, 2, device=META) if per_token else torch.empty(n, classes, device=META)
    starts = torch.arange(n) * (LENGTH if per_token else 1)
    return TeacherOutputs(logits, torch.empty(tokens, len(TARGETS), HIDDEN, device=META), starts.to(META),
                          (torch.arange(n) * LENGTH).to(META), torch.full((n,), LENGTH, device=META), per_token)


def test_the_losses_read_nothing_back():
    s = torch.empty(BATCH, LENGTH, HIDDEN, device=META, requires_grad=True)
    t = torch.empty(BATCH, LENGTH, HIDDEN, device=META)
    mask = torch.ones(BATCH, LENGTH, dtype=torch.long, device=META)
    logits = torch.empty(BATCH, CLASSES, device=META, requires_grad=True)
    token_logits = torch.empty(BATCH, LENGTH, 64, device=META, requires_grad=True)
    target = torch.zeros(BATCH, dtype=torch.long, device=META)
    parts = {
        "cos": losses.hidden_cosine_loss([s, s], [t, t], mask),
        "ce": losses.cross_entropy(logits, target),
        "focal per class": losses.focal_loss(logits, target, alpha=[0.2, 0.3, 0.5]),
        "focal": losses.focal_loss(logits, target, alpha=0.25),
        "kl": losses.soft_target_kl(logits, logits.detach(), 2.0),
        "kl per row": losses.soft_target_kl_per_row(token_logits, torch.empty(BATCH, LENGTH, 64, device=META), 2.0,
                                                    mask),
    }
    # each loss is one number that the student's outputs reach (not a constant)
    assert {name: (v.shape, v.requires_grad) for name, v in parts.items()} == \
        {name: (torch.Size([]), True) for name in parts}
    torch.stack(list(parts.values())).sum().backward()
    assert all(x.grad is not None and x.grad.shape == x.shape for x in (s, logits, token_logits))


@pytest.mark.slow
@pytest.mark.parametrize("task", [SentimentTask(["a", "b", "c"]), QATask()], ids=["sentiment", "qa"])
@pytest.mark.parametrize("cached", [True, False], ids=["cached-teacher", "teacher-every-step"])
def test_a_distillation_step_reads_nothing_back(task, cached):
    cls = BertForQuestionAnswering if isinstance(task, QATask) else BertForSequenceClassification
    extra = {} if isinstance(task, QATask) else {"num_labels": CLASSES}
    student, teacher = tiny_bert(cls, 2, **extra), tiny_bert(cls, 3, **extra)
    teacher.to(META).eval()
    outputs = meta_cache(task.per_token_outputs, CLASSES) if cached else None
    step_loss, extras = distillation_loss(task, teacher, outputs, DISTILBERT_WEIGHTS, 2.0, TARGETS,
                                          losses.cross_entropy, META)
    run_one_step(student, task, step_loss, DISTILBERT_PARTS, extras=extras)


def narrow_student(teacher, task, random_start: bool):
    """Teacher layers 1 and 2 cut to half the width (one of two heads), the way the layerwise recipe cuts them."""
    from pocketbert.train import narrow
    from pocketbert.train.layerwise import StudentWithProjections

    half = HIDDEN // 2
    plan = narrow.CutPlan(layer_map=[1, 2], hidden=list(range(0, HIDDEN, 2)), heads=[[0], [1]],
                          ffn=[list(range(16)), list(range(16, 32))],
                          pooler=None if task.head_skips_pooler else list(range(half)), head_width=half)
    student = narrow.cut_student(teacher, plan)
    projections = None
    if random_start:
        student = narrow.random_like(student)
        projections = {k: torch.nn.Linear(half, HIDDEN, bias=False) for k in (0, 1, 2)}
    return StudentWithProjections(student, projections), plan


@pytest.mark.slow
@pytest.mark.parametrize("task", [SentimentTask(["a", "b", "c"]), QATask()], ids=["sentiment", "qa"])
@pytest.mark.parametrize("cached", [True, False], ids=["cached-teacher", "teacher-every-step"])
@pytest.mark.parametrize("random_start", [False, True], ids=["cut", "random"])
def test_a_layerwise_step_reads_nothing_back(task, cached, random_start):
    from pocketbert.train.layerwise import layerwise_loss, teacher_states

    cls = BertForQuestionAnswering if isinstance(task, QATask) else BertForSequenceClassification
    extra = {} if isinstance(task, QATask) else {"num_labels": CLASSES}
    teacher = tiny_bert(cls, 3, **extra).eval()
    student, plan = narrow_student(teacher, task, random_start)
    teacher.to(META)
    weights = LAYERWISE_WEIGHTS
    outputs = None
    if cached:
        n, tokens = 10, 10 * LENGTH
        logits = (torch.empty(tokens, 2, device=META) if task.per_token_outputs
                  else torch.empty(n, CLASSES, device=META))
        starts = torch.arange(n) * (LENGTH if task.per_token_outputs else 1)
        states = len(teacher_states(plan.layer_map, weights))
        outputs = TeacherOutputs(logits, torch.empty(tokens, states, HIDDEN, device=META), starts.to(META),
                                 (torch.arange(n) * LENGTH).to(META), torch.full((n,), LENGTH, device=META),
                                 task.per_token_outputs)
    step_loss, extras = layerwise_loss(task, teacher, student, outputs, plan, weights, 2.0, 4, losses.cross_entropy,
                                       not random_start, META)
    run_one_step(student, task, step_loss, LAYERWISE_PARTS, extras=extras)


@pytest.mark.slow
def test_unlabelled_rows_and_focal_loss_read_nothing_back():
    task = SentimentTask(["a", "b", "c"])
    student = tiny_bert(BertForSequenceClassification, 2, num_labels=CLASSES)
    labels = torch.full((BATCH,), losses.IGNORE_LABEL, dtype=torch.long, device=META)  # transfer rows
    focal = losses.hard_label_loss(TrainingSection(hard_loss="focal", focal_gamma=2.0, focal_alpha=[0.2, 0.3, 0.5]))
    step_loss, extras = distillation_loss(task, None, meta_cache(False, CLASSES), {"kl": 1.0, "ce": 0.5, "cos": 0.0},
                                          2.0, TARGETS, focal, META)
    run_one_step(student, task, step_loss, {"kl", "ce"}, labels, extras)


def every_part_in_the_loss(step_loss, expected: set[str]):
    """step_loss, checking on each call that it computed the `expected` parts, each from the student's outputs
    and each reaching the loss it returns."""

    def checked(forward_model, batch):
        loss, parts = step_loss(forward_model, batch)
        assert set(parts) == expected
        assert [name for name, part in parts.items() if not part.requires_grad] == [], "not from the student"
        reached = torch.autograd.grad(loss, list(parts.values()), retain_graph=True, allow_unused=True)
        assert [name for name, grad in zip(parts, reached) if grad is None] == [], "computed, left out of the loss"
        return loss, parts

    return checked


def run_one_step(student, task, step_loss, parts: set[str], labels=None, extras=None):
    step_loss = every_part_in_the_loss(step_loss, parts)
    with trainer.training_attention(student, "sdpa"):
        student.to(META).train()
        optimizer = torch.optim.AdamW(student.parameters(), lr=1e-3)
        scaler = precision.grad_scaler(torch.device("cpu"), precision.FP32)
        averages: dict[str, torch.Tensor] = {}
        for _ in range(2):  # the second step updates the running averages as well
            batch = meta_batch(task, labels)
            if extras is not None:
                batch.update(extras([0, 3, 5, 7], LENGTH))
            trainer.train_step(student, student, batch, step_loss, optimizer, scaler, averages, META, precision.FP32)
    assert set(averages) == {"loss", *parts} and all(v.device == META for v in averages.values())


def test_a_sync_in_a_loss_is_caught():
    """The check itself: the boolean indexing this suite guards against fails on meta tensors."""
    values = torch.empty(BATCH, LENGTH, device=META)
    with pytest.raises((NotImplementedError, RuntimeError)):
        values[torch.ones(BATCH, LENGTH, dtype=torch.bool, device=META)].mean()
    with pytest.raises(RuntimeError):
        bool((values > 0).any())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: the meta-tensor tests above stand in")
def test_a_step_on_the_gpu_makes_no_sync():
    device = torch.device("cuda")
    task = SentimentTask(["a", "b", "c"])
    student = tiny_bert(BertForSequenceClassification, 2, num_labels=CLASSES).to(device).train()
    teacher = tiny_bert(BertForSequenceClassification, 3, num_labels=CLASSES).to(device).eval()
    rng = np.random.default_rng(0)
    batch_np = {"input_ids": rng.integers(0, 64, (BATCH, LENGTH)), "attention_mask": np.ones((BATCH, LENGTH), np.int64),
                "labels": rng.integers(0, CLASSES, BATCH)}
    mode = precision.precision_for(device)
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-3, fused=True)
    scaler = precision.grad_scaler(device, mode)
    step_loss, _ = distillation_loss(task, teacher, None, DISTILBERT_WEIGHTS, 2.0, TARGETS, losses.cross_entropy,
                                     device)
    step_loss = every_part_in_the_loss(step_loss, DISTILBERT_PARTS)
    averages: dict[str, torch.Tensor] = {}
    with trainer.training_attention(student, "sdpa"):
        batch = trainer.to_device(batch_np, device)  # warm-up: first-use allocations may synchronize
        trainer.train_step(student, student, batch, step_loss, optimizer, scaler, averages, device, mode)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            batch = trainer.to_device(batch_np, device)
            trainer.train_step(student, student, batch, step_loss, optimizer, scaler, averages, device, mode)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    assert set(averages) == {"loss", *DISTILBERT_PARTS}
    assert all(torch.isfinite(v) and v > 0 for v in averages.values()), averages  # random nets disagree
