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


IGNORE_LABEL = -100  # rows with this label (augmented examples in the Tang recipe) add no hard-label loss
HARD_LOSSES = ("ce", "focal")


def focal_loss(logits: torch.Tensor, target: torch.Tensor, gamma: float = 2.0,
               alpha: float | list[float] | None = None) -> torch.Tensor:
    """Focal loss of Lin et al. 2017: -alpha_t (1 - p_t)^gamma log p_t, averaged over labelled rows.

    alpha is one weight for every class, or a weight per class; gamma = 0 and alpha = None give cross-entropy.
    """
    if gamma < 0:
        raise ValueError("focal gamma must be >= 0")
    logits = logits.float()
    keep = target != IGNORE_LABEL
    if not keep.any():
        return logits.sum() * 0.0
    log_p = F.log_softmax(logits[keep], dim=-1).gather(1, target[keep][:, None])[:, 0]
    loss = -((1.0 - log_p.exp()) ** gamma) * log_p
    if alpha is not None:
        weights = torch.as_tensor(alpha, dtype=loss.dtype, device=loss.device)
        loss = loss * (weights[target[keep]] if weights.ndim else weights)
    return loss.mean()


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    keep = target != IGNORE_LABEL
    if not keep.any():
        return logits.float().sum() * 0.0
    return F.cross_entropy(logits.float()[keep], target[keep])


def hard_label_loss(cfg: dict):
    """The recipe's hard-label loss: `hard_loss: ce` or `focal` with `focal_gamma` and `focal_alpha`."""
    from functools import partial

    from pocketbert.errors import ConfigError

    kind = cfg.get("hard_loss", "ce")
    if kind not in HARD_LOSSES:
        raise ConfigError(f"hard_loss must be one of {', '.join(HARD_LOSSES)} (got '{kind}')")
    if kind == "ce":
        return cross_entropy
    gamma = float(cfg.get("focal_gamma", 2.0))
    if gamma < 0:
        raise ConfigError(f"focal_gamma must be >= 0 (got {gamma}); 2 is the paper's choice")
    alpha = cfg.get("focal_alpha")
    return partial(focal_loss, gamma=gamma, alpha=alpha)
