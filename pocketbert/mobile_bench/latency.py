"""Timing one ONNX Runtime model at a fixed shape: warm-up, then repeats; median and p90 in milliseconds."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np


@dataclass
class LatencyStats:
    median_ms: float
    p90_ms: float
    mean_ms: float
    min_ms: float
    repeats: int

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(samples_ms: list[float]) -> LatencyStats:
    if not samples_ms:
        raise ValueError("no latency samples")
    arr = np.asarray(samples_ms, dtype=np.float64)
    return LatencyStats(float(np.median(arr)), float(np.percentile(arr, 90)), float(arr.mean()), float(arr.min()),
                        len(arr))


def synthetic_inputs(input_names: list[str], batch: int, length: int, vocab_size: int, seed: int = 0) -> dict:
    """Token ids drawn from the vocabulary (never all zeros), full attention, segment 0 then 1."""
    rng = np.random.default_rng(seed)
    inputs = {}
    for name in input_names:
        if name == "input_ids":
            inputs[name] = rng.integers(1000, vocab_size, size=(batch, length), dtype=np.int64)
        elif name == "attention_mask":
            inputs[name] = np.ones((batch, length), dtype=np.int64)
        elif name == "token_type_ids":
            inputs[name] = (np.arange(length)[None, :] >= length // 4).astype(np.int64).repeat(batch, axis=0)
    return inputs


def time_session(session, inputs: dict, warmup: int, repeats: int) -> LatencyStats:
    for _ in range(warmup):
        session.run(None, inputs)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        session.run(None, inputs)
        samples.append((time.perf_counter() - start) * 1000.0)
    return summarize(samples)
