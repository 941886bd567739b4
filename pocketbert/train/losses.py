"""Distillation losses of the DistilBERT recipe: soft-target KL at temperature T, cross-entropy, cosine."""

from __future__ import annotations

import torch
import torch.nn.functional as F

MASKED_LOGIT = -1e4  # stands in for -inf at padded positions without creating NaNs in softmax


def soft_target_kl(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float,
                   mask: torch.Tensor | None = None) -> torch.Tensor:
    """KL(teacher || student) over the last axis at temperature T, scaled by T² (Hinton et al. 2015).

    Rows are distributions; `mask` (same shape, 1 = real) removes padded positions from them.
    """
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    s = student_logits.float() / temperature
    t = teacher_logits.float() / temperature
    if mask is not None:
        s = s.masked_fill(mask == 0, MASKED_LOGIT)
        t = t.masked_fill(mask == 0, MASKED_LOGIT)
    kl = F.kl_div(F.log_softmax(s, dim=-1), F.log_softmax(t, dim=-1), log_target=True, reduction="batchmean")
    return kl * temperature**2


def hidden_cosine_loss(student_hidden: list[torch.Tensor], teacher_hidden: list[torch.Tensor],
                       attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean of (1 - cosine) between paired hidden states, over real tokens of every aligned layer."""
    if len(student_hidden) != len(teacher_hidden):
        raise ValueError("student and teacher hidden-state lists must pair up")
    real = attention_mask.bool()
    losses = []
    for s, t in zip(student_hidden, teacher_hidden):
        cos = F.cosine_similarity(s[real].float(), t[real].float(), dim=-1)
        losses.append((1.0 - cos).mean())
    return torch.stack(losses).mean()
