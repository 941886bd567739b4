"""The distillation losses on small tensors with known answers."""

from __future__ import annotations

import math

import pytest
import torch

from pocketbert.core.losses import hidden_cosine_loss, soft_target_kl


def test_kl_is_zero_for_identical_logits():
    logits = torch.randn(4, 3)
    assert soft_target_kl(logits, logits.clone(), 2.0).item() == pytest.approx(0.0, abs=1e-6)


def test_kl_matches_hand_computation_with_t_squared_scaling():
    student = torch.tensor([[0.0, 0.0]])
    teacher = torch.tensor([[2.0, 0.0]])
    t = 2.0
    p = torch.softmax(teacher / t, -1)[0]
    q = torch.softmax(student / t, -1)[0]
    expected = float((p * (p / q).log()).sum()) * t * t
    assert soft_target_kl(student, teacher, t).item() == pytest.approx(expected, rel=1e-5)


def test_kl_ignores_masked_positions():
    student = torch.tensor([[1.0, 2.0, 50.0]])
    teacher = torch.tensor([[1.0, 2.0, -50.0]])
    mask = torch.tensor([[1, 1, 0]])
    assert soft_target_kl(student, teacher, 1.0, mask).item() == pytest.approx(0.0, abs=1e-5)
    assert soft_target_kl(student, teacher, 1.0).item() > 1.0


def test_kl_rejects_non_positive_temperature():
    with pytest.raises(ValueError):
        soft_target_kl(torch.zeros(1, 2), torch.zeros(1, 2), 0.0)


def test_cosine_loss_zero_for_aligned_and_two_for_opposite():
    h = torch.randn(2, 5, 8)
    mask = torch.ones(2, 5)
    assert hidden_cosine_loss([h], [h * 3.0], mask).item() == pytest.approx(0.0, abs=1e-5)
    assert hidden_cosine_loss([h], [-h], mask).item() == pytest.approx(2.0, abs=1e-5)


def test_cosine_loss_skips_padding():
    h = torch.randn(1, 4, 8)
    other = h.clone()
    other[0, 3] = -other[0, 3]  # differs only at a padded position
    mask = torch.tensor([[1, 1, 1, 0]])
    assert hidden_cosine_loss([h], [other], mask).item() == pytest.approx(0.0, abs=1e-5)
    assert not math.isclose(hidden_cosine_loss([h], [other], torch.ones(1, 4)).item(), 0.0, abs_tol=1e-3)
