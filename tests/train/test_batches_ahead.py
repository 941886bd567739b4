"""Batches prepared a window of steps ahead hold, bitwise, what a batch prepared at its own step holds."""

from __future__ import annotations

import numpy as np
import torch

from pocketbert.core.tasks.registry import SentimentTask, TextFeature
from pocketbert.train import batches_ahead, trainer

CPU = torch.device("cpu")


def features(n: int = 40):
    return [TextFeature([101, *[5 + (i * 3 + k) % 90 for k in range(1 + (i * 7) % 23)], 102], i % 2) for i in range(n)]


def test_a_window_of_stacked_batches_equals_batches_made_one_by_one():
    task, feats = SentimentTask(["neg", "pos"]), features()
    batches = trainer.length_grouped_batches([len(f.input_ids) for f in feats], 6, seed=3)
    table = torch.arange(len(feats) * 5, dtype=torch.float32).reshape(len(feats), 5)

    def collate(idx):
        return trainer.collate_padded(task, [feats[i] for i in idx], 0, 8, 32)

    def extras(idx, width):  # stands for the teacher cache: rows by index, widened per token
        rows = table[torch.as_tensor(idx)]
        return {"teacher_logits": rows, "per_token": rows[:, None, :].expand(-1, width, -1).unbind(dim=2)[1]}

    def move(arrays):
        return trainer.to_device(arrays, CPU)

    one_by_one = list(batches_ahead.prepared_batches(batches, collate, move, extras, ahead=1))
    windowed = list(batches_ahead.prepared_batches(batches, collate, move, extras, ahead=4))
    assert len({batches_ahead.shape_key(collate(idx)) for idx in batches}) > 1  # several shapes share a window
    assert [idx for idx, _ in windowed] == batches
    for (_, a), (_, b) in zip(one_by_one, windowed):
        assert a.keys() == b.keys()
        for name in a:
            assert a[name].shape == b[name].shape and torch.equal(a[name], b[name]) and b[name].is_contiguous()
    expected = collate(batches[0])
    assert all(np.array_equal(expected[name], one_by_one[0][1][name].numpy()) for name in expected)
