"""Which FFN output projections stay fp32 in the int8 model.

They read GELU activations with large outliers, so int8 there moves answers most; keeping all of them in
fp32 costs about a third of their size again, and time: an fp32 product runs several times slower than its
int8 form. The search starts from everything in int8 and keeps, one at a time, the projection whose fp32
weights bring the logits closest to the student's (mean absolute difference: answers on training examples
often all agree already, so agreement alone cannot rank the choices), while the file stays within the size
budget and the model within the latency budget (of the all-int8 model's time), which may leave none in fp32.
It measures on training examples: the dev set stays for the gate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from pocketbert.core.recipe import INT8_LATENCY_BUDGET, INT8_SIZE_BUDGET  # noqa: F401  (the recipe's defaults)

LATENCY_REPEATS = 40             # per model, interleaved; medians of ~5 ms runs
LATENCY_WARMUP = 5


def answers_agree(a: np.ndarray, b: np.ndarray) -> bool:
    """Same label, or (QA, [length, 2]) the same start and end tokens."""
    return bool(np.all(np.argmax(a, axis=0) == np.argmax(b, axis=0)))


def closeness(logits: list[np.ndarray], reference: list[np.ndarray]) -> dict:
    """Mean absolute logit difference (what the search minimises) and answer agreement (reported)."""
    return {"logit_error": float(np.mean([np.abs(a - b).mean() for a, b in zip(logits, reference)])),
            "agreement": float(np.mean([answers_agree(a, b) for a, b in zip(logits, reference)]))}


def choose_fp32_nodes(source: Path, candidates: list[str], workdir: Path,
                      measure: Callable[[Path], dict], quantize: Callable[[Path, Path, list[str]], Path],
                      budget_fraction: float = INT8_SIZE_BUDGET,
                      latency_ratio: Callable[[Path, Path], float] | None = None,
                      latency_budget: float | None = None) -> dict:
    """The kept-fp32 node list, greedily chosen within the budgets, and every trial made on the way.

    measure(path) gives the `closeness` of a quantized model to the student. With latency_ratio(trial, base),
    the trial's latency over the all-int8 model's, a node is kept only while that stays within latency_budget:
    an fp32 product costs several times its int8 form, so an app may rather have the speed.
    """
    budget = budget_fraction * source.stat().st_size
    trials = []
    base = quantize(source, workdir / "all-int8.onnx", [])

    def trial(kept: list[str]) -> dict:
        path = quantize(source, workdir / f"trial-{len(trials)}.onnx", kept) if kept else base
        result = {"fp32_nodes": kept, "size_fraction": path.stat().st_size / source.stat().st_size, **measure(path)}
        if kept and latency_ratio is not None:
            result["latency_ratio"] = latency_ratio(path, base)
        if kept:
            path.unlink()
        trials.append(result)
        return result

    def fits(result: dict) -> bool:
        return (result["size_fraction"] * source.stat().st_size <= budget
                and (latency_budget is None or result.get("latency_ratio", 1.0) <= latency_budget))

    best = trial([])
    remaining = list(candidates)
    while remaining and best["logit_error"] > 0.0:
        tried = [trial(best["fp32_nodes"] + [node]) for node in remaining]
        fitting = [t for t in tried if fits(t)]
        if not fitting:
            break
        better = min(fitting, key=lambda t: t["logit_error"])
        if better["logit_error"] >= best["logit_error"]:
            break
        best = better
        remaining.remove(better["fp32_nodes"][-1])
    base.unlink()
    return {**best, "budget_fraction": budget_fraction, "latency_budget": latency_budget,
            "candidates": list(candidates), "trials": trials}


def interleaved_ratio(run_a: Callable[[], object], run_b: Callable[[], object], repeats: int = LATENCY_REPEATS,
                      warmup: int = LATENCY_WARMUP) -> float:
    """Median time of run_a over run_b, timed in turn (A B A B ...) so that a drift of the machine moves both."""
    import time

    for _ in range(warmup):
        run_a()
        run_b()
    a, b = [], []
    for _ in range(repeats):
        for run, taken in ((run_a, a), (run_b, b)):
            started = time.perf_counter()
            run()
            taken.append(time.perf_counter() - started)
    return float(np.median(a) / np.median(b))
