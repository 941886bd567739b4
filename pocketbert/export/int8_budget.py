"""Which FFN output projections stay fp32 in the int8 model.

They read GELU activations with large outliers, so int8 there moves answers most; keeping all of them in
fp32 costs about a third of their size again. The search starts from everything in int8 and keeps, one at a
time, the projection whose fp32 weights bring the logits closest to the student's (mean absolute difference:
answers on training examples often all agree already, so agreement alone cannot rank the choices), while
the file stays within the size budget. It measures on training examples: the dev set stays for the gate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

INT8_SIZE_BUDGET = 0.30          # of the fp32 ONNX file


def answers_agree(a: np.ndarray, b: np.ndarray) -> bool:
    """Same label, or (QA, [length, 2]) the same start and end tokens."""
    return bool(np.all(np.argmax(a, axis=0) == np.argmax(b, axis=0)))


def closeness(logits: list[np.ndarray], reference: list[np.ndarray]) -> dict:
    """Mean absolute logit difference (what the search minimises) and answer agreement (reported)."""
    return {"logit_error": float(np.mean([np.abs(a - b).mean() for a, b in zip(logits, reference)])),
            "agreement": float(np.mean([answers_agree(a, b) for a, b in zip(logits, reference)]))}


def choose_fp32_nodes(source: Path, candidates: list[str], workdir: Path,
                      measure: Callable[[Path], dict], quantize: Callable[[Path, Path, list[str]], Path],
                      budget_fraction: float = INT8_SIZE_BUDGET) -> dict:
    """The kept-fp32 node list, greedily chosen within the budget, and every trial made on the way.

    measure(path) gives the `closeness` of a quantized model to the student.
    """
    budget = budget_fraction * source.stat().st_size
    trials = []

    def trial(kept: list[str]) -> dict:
        path = quantize(source, workdir / f"trial-{len(trials)}.onnx", kept)
        result = {"fp32_nodes": kept, "size_fraction": path.stat().st_size / source.stat().st_size, **measure(path)}
        path.unlink()
        trials.append(result)
        return result

    best = trial([])
    remaining = list(candidates)
    while remaining and best["logit_error"] > 0.0:
        tried = [trial(best["fp32_nodes"] + [node]) for node in remaining]
        fitting = [t for t in tried if t["size_fraction"] * source.stat().st_size <= budget]
        if not fitting:
            break
        better = min(fitting, key=lambda t: t["logit_error"])
        if better["logit_error"] >= best["logit_error"]:
            break
        best = better
        remaining.remove(better["fp32_nodes"][-1])
    return {**best, "budget_fraction": budget_fraction, "candidates": list(candidates), "trials": trials}
