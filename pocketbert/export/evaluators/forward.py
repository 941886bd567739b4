"""A saved Apple program as a numpy-in, numpy-out forward over a padded batch, for Core ML and Core AI alike: rows
grouped by the input width the program takes them at and each group evaluated at once; and the cache that keeps a
read-back program (with its compiled plans) while the same files are asked for again.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Callable

import numpy as np


def grouped_forward(predict: Callable, width: Callable[[int], int], logits: Callable, task, min_length: int = 1):
    """A forward over a program: predict(inputs, width) takes rows of one width (inputs by name, each
    [rows, 1, width]) and gives its outputs rows first; width(n) is the width a sequence of n tokens runs at (at
    least min_length); logits(outputs) makes them the task's logits, rows first."""

    def forward(batch):
        counts = np.maximum(batch["attention_mask"].sum(axis=1).astype(int), min_length)
        groups: dict[int, list[int]] = {}
        for i, n in enumerate(counts):
            groups.setdefault(width(int(n)), []).append(i)
        rows: list = [None] * len(counts)
        for padded, members in groups.items():
            inputs = {}
            for name in task.input_names:
                values = np.zeros((len(members), 1, padded), dtype=np.int32)
                for j, i in enumerate(members):
                    values[j, 0, :counts[i]] = batch[name][i, :counts[i]]
                inputs[name] = values
            found = logits(predict(inputs, padded))
            for j, i in enumerate(members):
                rows[i] = task.fit_row(found[j], int(counts[i]), batch["input_ids"].shape[1])
        return np.stack(rows)
    return forward


def one_row_at_a_time(predict: Callable) -> Callable:
    """A predict that takes one row ([1, width] inputs: Core ML's, value inference's) over rows of one width, its
    results stacked rows first."""
    def run(inputs: dict) -> dict:
        found = [predict({name: values[j] for name, values in inputs.items()})
                 for j in range(next(iter(inputs.values())).shape[0])]
        return {name: [f[name] for f in found] if isinstance(found[0][name], (str, dict)) else
                np.stack([np.asarray(f[name]) for f in found]) for name in found[0]}
    return run


def kept_while_unchanged(read: Callable[[Path], object]) -> Callable[[Path], object]:
    """read(path), kept while the same files (paths, times, sizes) are asked for again: the gate opens a program,
    then once for each of its lengths, and reading one back and compiling its plans is the slow part."""
    @functools.lru_cache(maxsize=1)
    def cached(path: str, fingerprint: tuple):
        return read(Path(path))

    @functools.wraps(read)
    def kept(path: Path):
        files = sorted(p for p in Path(path).rglob("*") if p.is_file())
        fingerprint = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files)
        return cached(str(Path(path).resolve()), fingerprint)
    kept.cache_clear = cached.cache_clear
    return kept
