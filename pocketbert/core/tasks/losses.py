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


def soft_target_kl_per_row(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float,
                           row_weights: torch.Tensor) -> torch.Tensor:
    """soft_target_kl over rows of any leading shape, averaged with `row_weights` (0 drops a row: a token that
    was not masked in masked-LM), without selecting rows, so no shape depends on the data."""
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    log_s = F.log_softmax(student_logits.float() / temperature, dim=-1)
    log_t = F.log_softmax(teacher_logits.float() / temperature, dim=-1)
    per_row = (log_t.exp() * (log_t - log_s)).sum(dim=-1)
    weights = row_weights.float()
    return (per_row * weights).sum() / weights.sum().clamp_min(1.0) * temperature**2


def hidden_cosine_loss(student_hidden: list[torch.Tensor], teacher_hidden: list[torch.Tensor],
                       attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean of (1 - cosine) between paired hidden states, over real tokens of every aligned layer.

    A masked sum, not boolean indexing: the shapes stay fixed, so the host never waits for the device.
    """
    if len(student_hidden) != len(teacher_hidden):
        raise ValueError("student and teacher hidden-state lists must pair up")
    real = attention_mask.float()
    count = real.sum().clamp_min(1.0)
    losses = []
    for s, t in zip(student_hidden, teacher_hidden):
        cos = F.cosine_similarity(s.float(), t.float(), dim=-1)
        losses.append(((1.0 - cos) * real).sum() / count)
    return torch.stack(losses).mean()


IGNORE_LABEL = -100  # rows with this label (augmented examples in the Tang recipe) add no hard-label loss


def _labelled(target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(labelled-row mask as floats, their count (at least 1), targets with ignored rows pointed at class 0).

    Every row stays in the batch and the unlabelled ones are weighted 0, so no shape depends on the data
    and nothing is read back to the host; a batch without labels gives a loss of exactly 0.
    """
    keep = target != IGNORE_LABEL
    return keep.float(), keep.sum().clamp_min(1), target.masked_fill(~keep, 0)


def focal_loss(logits: torch.Tensor, target: torch.Tensor, gamma: float = 2.0,
               alpha: float | list[float] | None = None) -> torch.Tensor:
    """Focal loss of Lin et al. 2017: -alpha_t (1 - p_t)^gamma log p_t, averaged over labelled rows.

    alpha is one weight for every class, or a weight per class; gamma = 0 and alpha = None give cross-entropy.
    """
    if gamma < 0:
        raise ValueError("focal gamma must be >= 0")
    keep, count, safe_target = _labelled(target)
    log_p = F.log_softmax(logits.float(), dim=-1).gather(1, safe_target[:, None])[:, 0]
    loss = -((1.0 - log_p.exp()) ** gamma) * log_p
    if alpha is not None:
        weights = torch.as_tensor(alpha, dtype=loss.dtype, device=loss.device)
        loss = loss * (weights[safe_target] if weights.ndim else weights)
    return (loss * keep).sum() / count


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy averaged over labelled rows (rows labelled IGNORE_LABEL add nothing)."""
    _, count, _ = _labelled(target)
    return F.cross_entropy(logits.float(), target, ignore_index=IGNORE_LABEL, reduction="sum") / count


def hard_label_loss(section):
    """The recipe's hard-label loss: `hard_loss: ce` or `focal` with `focal_gamma` and `focal_alpha`, from a
    validated training section (core/config/recipe.py's TrainingSection checks the kind and the gamma)."""
    from functools import partial

    if section.hard_loss == "ce":
        return cross_entropy
    return partial(focal_loss, gamma=section.focal_gamma, alpha=section.focal_alpha)


# Layer-wise losses (TinyBERT, Jiao et al. 2020; MiniLM v1 and v2, Wang et al. 2020 and 2021). Every tensor keeps
# its padded shape: padded tokens are weighted 0 as queries and masked out as keys, so nothing depends on values.


def hidden_mse(student: torch.Tensor, teacher: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean squared difference of [batch, tokens, width] states (already of one width), over real tokens."""
    real = attention_mask.float()
    squared = (student.float() - teacher.float()).pow(2).sum(dim=-1)
    return (squared * real).sum() / (real.sum() * student.shape[-1]).clamp_min(1.0)


def _key_masked(scores: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """[batch, heads, queries, keys] scores with padded keys pushed to MASKED_LOGIT, as log-probabilities over keys."""
    padded = (attention_mask == 0)[:, None, None, :]
    return F.log_softmax(scores.float().masked_fill(padded, MASKED_LOGIT), dim=-1)


def _row_kl(student_log_p: torch.Tensor, teacher_log_p: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """KL(teacher || student) of every row over keys, averaged over real query tokens and heads."""
    per_row = (teacher_log_p.exp() * (teacher_log_p - student_log_p)).sum(dim=-1)  # [batch, heads, queries]
    real = attention_mask.float()[:, None, :]
    return (per_row * real).sum() / (real.sum() * per_row.shape[1]).clamp_min(1.0)


def attention_scores(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Scaled dot products of [batch, heads, tokens, width] queries and keys: [batch, heads, queries, keys]."""
    return query.float() @ key.float().transpose(-1, -2) * query.shape[-1] ** -0.5


def attention_kl(student_query: torch.Tensor, student_key: torch.Tensor, teacher_query: torch.Tensor,
                 teacher_key: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """KL of each student head's attention distribution from the teacher head it corresponds to (TinyBERT's
    attention loss, as MiniLM's KL). Inputs are [batch, heads, tokens, head width], head h of one side
    corresponding to head h of the other; each side is scaled by its own head width."""
    return _row_kl(_key_masked(attention_scores(student_query, student_key), attention_mask),
                   _key_masked(attention_scores(teacher_query, teacher_key), attention_mask), attention_mask)


def relation_heads_of(states: torch.Tensor, relation_heads: int) -> torch.Tensor:
    """[batch, tokens, width] split into [batch, relation heads, tokens, width / relation heads]."""
    batch, tokens, width = states.shape
    return states.view(batch, tokens, relation_heads, width // relation_heads).transpose(1, 2)


def relation_kl(student_states: torch.Tensor, teacher_states: torch.Tensor, attention_mask: torch.Tensor,
                relation_heads: int) -> torch.Tensor:
    """MiniLM v2's self-attention relation loss for one kind of vector (queries, keys or values): each side's
    [batch, tokens, width] vectors are split into `relation_heads` heads, whatever its own number of attention
    heads, and the KL compares softmax(X Xᵀ / √d) token against token. The widths may differ; both must split
    into `relation_heads` equal parts."""
    student = relation_heads_of(student_states, relation_heads)
    teacher = relation_heads_of(teacher_states, relation_heads)
    return _row_kl(_key_masked(attention_scores(student, student), attention_mask),
                   _key_masked(attention_scores(teacher, teacher), attention_mask), attention_mask)
