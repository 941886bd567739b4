"""An epoch's batches prepared ahead of the steps that read them, a window of steps at a time.

Collating, padding and copying one batch per step is host work between two steps: on a GPU that replays a whole
step as one CUDA graph, that host work, not the GPU, set the pace. Here the window's batches are collated at
once, batches of one shape are stacked and sent to the device in one pinned copy per tensor, and the cached
teacher outputs of the whole stack are gathered in one lookup on the device. A step then reads a slice of a stack
that is already there. The values are the ones the per-step path makes, bitwise: the same collation, the same
rows, each slice contiguous as a batch of its own was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import torch

STEPS_AHEAD = 256  # steps prepared at once on a GPU: few large copies, and a bounded share of its memory


def steps_ahead_for(device: torch.device) -> int:
    """A window of steps on a GPU; one step on the CPU, where the host does the arithmetic too and a window
    would only hold more memory (the default run's cached hidden states: ~0.9 GB for 256 steps)."""
    return STEPS_AHEAD if torch.device(device).type == "cuda" else 1


def shape_key(batch: dict[str, np.ndarray]) -> tuple:
    return tuple((name, array.shape, array.dtype.str) for name, array in sorted(batch.items()))


def prepared_batches(
    batches: list[list[int]],
    collate: Callable[[list[int]], dict[str, np.ndarray]],
    to_device: Callable[[dict[str, np.ndarray]], dict[str, torch.Tensor]],
    batch_extras: Callable[[list[int], int], dict[str, torch.Tensor]] | None,
    ahead: int = STEPS_AHEAD,
) -> Iterator[tuple[list[int], dict[str, torch.Tensor]]]:
    """(indices, device batch) for each of `batches` in order, prepared `ahead` steps at a time.

    collate(indices) is the host batch; to_device moves a dict of stacked host arrays; batch_extras(indices, width)
    gives extra device tensors, one row per index, for all the indices of a stack in one call."""
    for first in range(0, len(batches), max(1, ahead)):
        window = batches[first:first + ahead]
        host = [collate(idx) for idx in window]
        stacks: dict[tuple, list[int]] = {}
        for position, batch in enumerate(host):
            stacks.setdefault(shape_key(batch), []).append(position)
        ready: list[dict[str, torch.Tensor] | None] = [None] * len(window)
        for positions in stacks.values():
            stacked = to_device({name: np.stack([host[p][name] for p in positions]) for name in host[positions[0]]})
            if batch_extras is not None:
                size, width = len(window[positions[0]]), host[positions[0]]["input_ids"].shape[1]
                rows = batch_extras([i for p in positions for i in window[p]], width)
                # one stack row per batch, contiguous so that each step's slice is laid out as its own batch was
                stacked.update({name: t.unflatten(0, (len(positions), size)).contiguous() for name, t in rows.items()})
            for row, position in enumerate(positions):
                ready[position] = {name: t[row] for name, t in stacked.items()}
        yield from zip(window, ready)
