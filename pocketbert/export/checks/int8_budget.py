"""Which FFN output projections stay fp32 in the int8 model: a choice the graph and the student decide alone.

They read GELU activations with large outliers, so int8 there moves answers most; keeping all of them in
fp32 costs about a third of their size again, and time: an fp32 product runs several times slower than its
int8 form. The search starts from everything in int8 and keeps, one at a time, the projection whose fp32
weights bring the logits closest to the student's (mean absolute difference: answers on training examples
often all agree already, so agreement alone cannot rank the choices; ties go to the smaller file, then to the
earlier node), while the file stays within the size budget and the model within the latency budget (of the
all-int8 model's cost), which may leave none in fp32. It measures on training examples: the dev set stays
for the gate.

Nothing here is timed: a latency cost is counted on the graph (`graph_latency_ratio`), so the same student
gives the same int8 model on any machine under any load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from pocketbert.core.config.int8_budgets import INT8_LATENCY_BUDGET, INT8_SIZE_BUDGET  # noqa: F401 (the search's defaults)

# What one multiply-add of an fp32 weight product costs against its dynamic-int8 form, counted in the graph's
# weight products alone (what dynamic int8 quantizes). Measured once on the default SST-2 student (3 layers,
# hidden 384, FFN 1536: one FFN output projection is 4/37 of its weight multiply-adds): keeping one projection in
# fp32 made the model 16-19 % slower at 1 thread, timed in turn against the all-int8 model on the longest
# calibration sentence (results/README.md, "Against Optimum"); 1 + 0.175 / (4/37) = 2.6.
FP32_MAC_COST = 2.6
WEIGHT_PRODUCTS = ("MatMul", "Gemm")


def answers_agree(a: np.ndarray, b: np.ndarray) -> bool:
    """Same label, or (QA, [length, 2]) the same start and end tokens."""
    return bool(np.all(np.argmax(a, axis=0) == np.argmax(b, axis=0)))


def closeness(logits: list[np.ndarray], reference: list[np.ndarray]) -> dict:
    """Mean absolute logit difference (what the search minimises) and answer agreement (reported)."""
    return {"logit_error": float(np.mean([np.abs(a - b).mean() for a, b in zip(logits, reference)])),
            "agreement": float(np.mean([answers_agree(a, b) for a, b in zip(logits, reference)]))}


def weight_macs(model_path: Path) -> dict[str, int]:
    """Multiply-adds per token of each weight product (a MatMul or Gemm reading an initializer), by node name."""
    import onnx

    graph = onnx.load(str(model_path), load_external_data=False).graph
    shapes = {i.name: tuple(i.dims) for i in graph.initializer}
    macs = {}
    for node in graph.node:
        weight = next((shapes[name] for name in node.input[1:2] if name in shapes), None)
        if node.op_type in WEIGHT_PRODUCTS and weight is not None:
            macs[node.name] = int(np.prod(weight))
    return macs


def graph_latency_ratio(macs: dict[str, int], kept_fp32: list[str], fp32_cost: float = FP32_MAC_COST) -> float:
    """The model's cost with `kept_fp32` in fp32 over the all-int8 model's, counted on its weight products."""
    total = sum(macs.values())
    return (total + (fp32_cost - 1.0) * sum(macs[name] for name in kept_fp32)) / total


def choose_fp32_nodes(source: Path, candidates: list[str], workdir: Path,
                      measure: Callable[[Path], dict], quantize: Callable[[Path, Path, list[str]], Path],
                      budget_fraction: float = INT8_SIZE_BUDGET, latency_budget: float | None = None) -> dict:
    """The kept-fp32 node list, greedily chosen within the budgets, and every trial made on the way.

    measure(path) gives the `closeness` of a quantized model to the student. With latency_budget, a node is kept
    only while the graph's latency ratio (`graph_latency_ratio`) stays within it: an fp32 product costs several
    times its int8 form, so an app may rather have the speed. The latency check needs no model, so a node that
    cannot fit it is never quantized or measured.
    """
    size = source.stat().st_size
    macs = weight_macs(source)
    unknown = [name for name in candidates if name not in macs]
    if unknown:
        raise ValueError(f"int8 candidates without a weight product in {source.name}: {unknown}")
    trials = []
    base = quantize(source, workdir / "all-int8.onnx", [])

    def latency_fits(kept: list[str]) -> bool:
        return latency_budget is None or graph_latency_ratio(macs, kept) <= latency_budget

    def trial(kept: list[str]) -> dict:
        path = quantize(source, workdir / f"trial-{len(trials)}.onnx", kept) if kept else base
        result = {"fp32_nodes": kept, "size_fraction": path.stat().st_size / size,
                  "latency_ratio": graph_latency_ratio(macs, kept), **measure(path)}
        if kept:
            path.unlink()
        trials.append(result)
        return result

    best = trial([])
    remaining = list(candidates)
    while remaining and best["logit_error"] > 0.0:
        tried = [trial(best["fp32_nodes"] + [node]) for node in remaining
                 if latency_fits(best["fp32_nodes"] + [node])]
        fitting = [t for t in tried if t["size_fraction"] <= budget_fraction]
        if not fitting:
            break
        better = min(fitting, key=lambda t: (t["logit_error"], t["size_fraction"]))  # min keeps the earliest of ties
        if better["logit_error"] >= best["logit_error"]:
            break
        best = better
        remaining.remove(better["fp32_nodes"][-1])
    base.unlink()
    return {**best, "budget_fraction": budget_fraction, "latency_budget": latency_budget,
            "fp32_mac_cost": FP32_MAC_COST, "candidates": list(candidates), "trials": trials}
