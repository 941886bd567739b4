"""Benchmark inputs: token ids drawn from the vocabulary at a fixed shape."""

from __future__ import annotations

import numpy as np


def synthetic_inputs(input_names: list[str], batch: int, length: int, vocab_size: int, seed: int = 0) -> dict:
    """Token ids drawn from the vocabulary (never all zeros), full attention, segment 0 then 1."""
    rng = np.random.default_rng(seed)
    inputs = {}
    for name in input_names:
        if name == "input_ids":
            inputs[name] = rng.integers(min(1000, vocab_size // 2), vocab_size, size=(batch, length), dtype=np.int64)
        elif name == "attention_mask":
            inputs[name] = np.ones((batch, length), dtype=np.int64)
        elif name == "token_type_ids":
            inputs[name] = (np.arange(length)[None, :] >= length // 4).astype(np.int64).repeat(batch, axis=0)
    return inputs
