"""The layer-wise losses: zero when student and teacher agree, positive when they do not, blind to padding, and
equal to the formulas written out by hand (so a softmax over the wrong axis or a missing scale fails)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pocketbert.core.tasks import losses

BATCH, TOKENS, HEADS, WIDTH = 2, 7, 3, 4
IDENTICAL = 1e-6       # a loss of identical inputs is zero up to float rounding
CLEARLY_POSITIVE = 1e-3
REFERENCE = 1e-5       # against the loops below, in float64


def mask() -> torch.Tensor:
    m = torch.ones(BATCH, TOKENS, dtype=torch.long)
    m[1, 4:] = 0  # the second sequence has 4 real tokens
    return m


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def heads(seed):
    return randn(BATCH, HEADS, TOKENS, WIDTH, seed=seed)


def tokens(width, seed):
    return randn(BATCH, TOKENS, width, seed=seed)


def reference_row_kl(student_scores, teacher_scores, m) -> float:
    """KL(teacher || student) of softmax over keys, real keys only, averaged over real queries and heads."""
    total, rows = 0.0, 0
    for b in range(student_scores.shape[0]):
        real = int(m[b].sum())
        for h in range(student_scores.shape[1]):
            for q in range(real):
                s = np.exp(student_scores[b, h, q, :real] - student_scores[b, h, q, :real].max())
                t = np.exp(teacher_scores[b, h, q, :real] - teacher_scores[b, h, q, :real].max())
                s, t = s / s.sum(), t / t.sum()
                total += float((t * np.log(t / s)).sum())
        rows += real * student_scores.shape[1]
    return total / rows


def scores(q, k):
    """q kᵀ / √d per head, in float64."""
    q, k = q.double().numpy(), k.double().numpy()
    return np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(q.shape[-1])


def test_hidden_mse_is_zero_on_identical_states_and_the_mean_over_real_tokens_otherwise():
    s, t, m = tokens(8, 1), tokens(8, 2), mask()
    assert losses.hidden_mse(s, s, m) <= IDENTICAL
    real = m.bool()
    expected = ((s - t)[real] ** 2).mean()
    assert torch.allclose(losses.hidden_mse(s, t, m), expected)
    t_padded = t.clone()
    t_padded[1, 4:] += 100.0  # padded positions carry no weight
    assert torch.allclose(losses.hidden_mse(s, t_padded, m), expected)


def test_attention_kl_is_zero_on_identical_heads_and_matches_the_formula():
    sq, sk, tq, tk, m = heads(1), heads(2), heads(3), heads(4), mask()
    assert losses.attention_kl(sq, sk, sq, sk, m) <= IDENTICAL
    got = float(losses.attention_kl(sq, sk, tq, tk, m))
    assert got > CLEARLY_POSITIVE
    assert got == pytest.approx(reference_row_kl(scores(sq, sk), scores(tq, tk), m.numpy()), abs=REFERENCE)


def test_attention_kl_ignores_padded_keys_and_queries():
    sq, sk, tq, tk, m = heads(1), heads(2), heads(3), heads(4), mask()
    before = losses.attention_kl(sq, sk, tq, tk, m)
    sk2, tq2 = sk.clone(), tq.clone()
    sk2[1, :, 4:] = 50.0   # padded keys of the student
    tq2[1, :, 4:] = -50.0  # padded queries of the teacher
    assert torch.allclose(losses.attention_kl(sq, sk2, tq2, tk, m), before, atol=1e-6)


def test_attention_kl_is_not_symmetric_in_queries_and_keys():
    """Rows are queries, the distribution is over keys: swapping the roles changes the loss."""
    sq, sk, tq, tk, m = heads(1), heads(2), heads(3), heads(4), mask()
    assert not torch.allclose(losses.attention_kl(sq, sk, tq, tk, m), losses.attention_kl(sk, sq, tk, tq, m))


@pytest.mark.parametrize("student_width, teacher_width, relation_heads", [(8, 8, 2), (8, 12, 4), (6, 12, 3)])
def test_relation_kl_is_zero_on_identical_vectors_and_matches_the_formula(student_width, teacher_width,
                                                                         relation_heads):
    s, t, m = tokens(student_width, 1), tokens(teacher_width, 2), mask()
    assert losses.relation_kl(t, t, m, relation_heads) <= IDENTICAL
    got = float(losses.relation_kl(s, t, m, relation_heads))
    assert got > CLEARLY_POSITIVE

    def split(x):  # relation head r holds columns r*d .. (r+1)*d of every token's vector
        d = x.shape[-1] // relation_heads
        return torch.stack([x[..., r * d:(r + 1) * d] for r in range(relation_heads)], dim=1)

    expected = reference_row_kl(scores(split(s), split(s)), scores(split(t), split(t)), m.numpy())
    assert got == pytest.approx(expected, abs=REFERENCE)


def test_relation_kl_does_not_depend_on_the_order_of_relation_heads_columns_within_a_head():
    """A relation compares tokens with tokens: permuting the columns inside every relation head changes nothing,
    while moving columns between heads does."""
    s, t, m = tokens(8, 1), tokens(8, 2), mask()
    within = torch.tensor([1, 0, 3, 2, 5, 4, 7, 6])
    across = torch.tensor([4, 1, 2, 3, 0, 5, 6, 7])
    before = losses.relation_kl(s, t, m, 2)
    assert torch.allclose(losses.relation_kl(s[..., within], t, m, 2), before, atol=1e-6)
    assert not torch.allclose(losses.relation_kl(s[..., across], t, m, 2), before, atol=1e-4)
