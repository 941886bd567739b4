"""The distillation losses and the hard-label losses (focal) on small tensors with known answers."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from pocketbert.core.tasks.losses import IGNORE_LABEL, focal_loss, hidden_cosine_loss, soft_target_kl
from pocketbert.core.errors import ConfigError


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


def test_focal_with_gamma_zero_is_cross_entropy():
    logits, target = torch.randn(8, 3), torch.randint(0, 3, (8,))
    assert torch.allclose(focal_loss(logits, target, gamma=0.0), F.cross_entropy(logits, target), atol=1e-6)


def test_focal_down_weights_easy_examples():
    easy = torch.tensor([[6.0, -6.0]])
    hard = torch.tensor([[0.2, 0.0]])
    target = torch.tensor([0])
    easy_ratio = focal_loss(easy, target, gamma=2.0) / F.cross_entropy(easy, target)
    hard_ratio = focal_loss(hard, target, gamma=2.0) / F.cross_entropy(hard, target)
    assert easy_ratio < 1e-3 < hard_ratio < 1.0


def test_focal_alpha_per_class_and_ignored_rows():
    logits = torch.tensor([[1.0, 0.0], [0.0, 1.0], [3.0, 3.0]])
    target = torch.tensor([0, 1, IGNORE_LABEL])
    plain = focal_loss(logits[:2], target[:2], gamma=1.0, alpha=[1.0, 1.0])
    weighted = focal_loss(logits, target, gamma=1.0, alpha=[0.0, 2.0])  # class 0 rows count for nothing
    assert torch.allclose(weighted, plain)  # symmetric rows: 2 x half of the mean
    assert focal_loss(logits[2:], target[2:]).item() == 0.0


@pytest.mark.parametrize("cfg, fragment", [({"hard_loss": "hinge"}, "distill.hard_loss: 'hinge'"),
                                           ({"hard_loss": "focal", "focal_gamma": -1}, "distill.focal_gamma: -1")])
def test_hard_loss_config_errors(cfg, fragment):
    """The recipe's validation refuses a hard loss the loss module could not build, before any work."""
    from pocketbert.core.config.recipe import validate_recipe

    with pytest.raises(ConfigError, match=fragment):
        validate_recipe({"task": "sentiment", "dataset": "sst2", "distill": cfg})
