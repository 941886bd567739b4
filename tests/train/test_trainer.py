"""Batching and device choice of the training loop; a few real steps reduce the loss."""

from __future__ import annotations

import pytest
import torch

from pocketbert.errors import ConfigError
from pocketbert.train.trainer import length_grouped_batches, pick_device


def test_length_grouped_batches_cover_every_example_once():
    lengths = [(i * 37) % 50 + 1 for i in range(1000)]
    batches = length_grouped_batches(lengths, 16, seed=3)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(1000))
    assert all(len(b) <= 16 for b in batches)


def test_length_grouping_cuts_padding():
    import random

    rng = random.Random(0)
    lengths = [rng.randint(3, 64) for _ in range(2000)]
    grouped = length_grouped_batches(lengths, 32, seed=0)
    order = list(range(2000))
    rng.shuffle(order)
    plain = [order[i:i + 32] for i in range(0, 2000, 32)]

    def padded(batches):
        return sum(max(lengths[i] for i in b) * len(b) for b in batches)

    assert padded(grouped) < 0.7 * padded(plain)


def test_batches_change_with_seed():
    lengths = list(range(1, 200))
    assert length_grouped_batches(lengths, 8, 0) != length_grouped_batches(lengths, 8, 1)
    assert length_grouped_batches(lengths, 8, 5) == length_grouped_batches(lengths, 8, 5)


def test_pick_device():
    assert pick_device("cpu").type == "cpu"
    assert pick_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA GPU"):
            pick_device("cuda")
