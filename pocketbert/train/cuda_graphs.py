"""Training steps replayed as CUDA graphs: one graph per batch shape, captured after a few eager steps of it.

A small student's step is about a thousand kernels of microseconds each; launched one by one from Python, the
GPU waits on the host for most of the step. A captured graph launches them all in one call. What the step
reads changes in place between replays: the batch is copied into the graph's own input tensors, the learning
rate is a device tensor the schedule fills, and the optimizer's state and the running losses are updated in
place. Capture needs a step with no host sync (the losses, masks and cache reads are written that way) and a
fixed shape: widths are rounded up to a few multiples (trainer.pad_multiple_for), so an epoch has few shapes.

Used on a single CUDA device with bf16 or fp32 arithmetic. Not under DDP (its all-reduce hooks run outside a
graph), not with fp16 loss scaling (the scaler reads the gradients back to the host), not with torch.compile
(which captures graphs of its own). If a step cannot be captured, training goes on eagerly and the manifest
says why.
"""

from __future__ import annotations

from typing import Callable

import torch

from pocketbert.core.recipe import TrainingSection

WARMUP_STEPS_PER_SHAPE = 2  # eager steps of a shape before its capture: lazy initialisation stays out of the graph


def unavailable_reason(cfg: TrainingSection, device: torch.device, world_size: int, precision: str) -> str | None:
    """Why this training run cannot replay its steps as CUDA graphs, or None when it can."""
    if not cfg.cuda_graphs:
        return "turned off in the recipe (cuda_graphs: false)"
    if device.type != "cuda":
        return f"training on {device.type}, not a CUDA GPU"
    if world_size > 1:
        return "several processes (DDP's gradient all-reduce runs outside a graph)"
    if precision == "fp16":
        return "fp16 loss scaling reads the gradients back to the host every step"
    if cfg.compile:
        return "torch.compile captures graphs of its own"
    return None


class GraphedSteps:
    """Runs `step(batch)` (forward, backward, update, running losses: queued on the device, nothing read back)
    eagerly for the first WARMUP_STEPS_PER_SHAPE batches of each shape, then captures it and replays it."""

    def __init__(self, step: Callable[[dict[str, torch.Tensor]], None], clear_gradients: Callable[[], None]):
        self.step = step
        self.clear_gradients = clear_gradients
        self.graphs: dict[tuple, tuple[torch.cuda.CUDAGraph, dict[str, torch.Tensor]]] = {}
        self.eager_steps: dict[tuple, int] = {}
        self.failure: str | None = None
        self.replays = 0

    @staticmethod
    def shape_of(batch: dict[str, torch.Tensor]) -> tuple:
        return tuple((name, tuple(t.shape), t.dtype) for name, t in sorted(batch.items()))

    def __call__(self, batch: dict[str, torch.Tensor]) -> None:
        key = self.shape_of(batch)
        if key in self.graphs:
            graph, inputs = self.graphs[key]
            for name, tensor in batch.items():
                inputs[name].copy_(tensor, non_blocking=True)
            graph.replay()
            self.replays += 1
            return
        if self.failure is not None or self.eager_steps.get(key, 0) < WARMUP_STEPS_PER_SHAPE:
            self._eager(batch, key)
            return
        self._capture(batch, key)

    def _eager(self, batch: dict[str, torch.Tensor], key: tuple) -> None:
        # On a side stream, as capture will be: the allocator and libraries set up for it outside the graph.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.step(batch)
            self.clear_gradients()
        torch.cuda.current_stream().wait_stream(side)
        self.eager_steps[key] = self.eager_steps.get(key, 0) + 1

    def _capture(self, batch: dict[str, torch.Tensor], key: tuple) -> None:
        inputs = {name: tensor.clone() for name, tensor in batch.items()}
        graph = torch.cuda.CUDAGraph()
        # Captured with no gradient tensors, the backward writes them rather than adding to them; each graph
        # owns its gradients, so eager steps of other shapes start from none.
        self.clear_gradients()
        try:
            with torch.cuda.graph(graph):
                self.step(inputs)
        except RuntimeError as exc:  # an operation that cannot be captured: train on eagerly, and say why
            self.failure = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            self.clear_gradients()
            torch.cuda.synchronize()
            self._eager(batch, key)
            return
        self.clear_gradients()
        self.graphs[key] = (graph, inputs)
        graph.replay()
        self.replays += 1

    def report(self) -> dict:
        return {"used": self.failure is None and bool(self.graphs), "shapes_captured": len(self.graphs),
                "steps_replayed": self.replays, "eager_steps": sum(self.eager_steps.values()),
                **({"not_used_because": self.failure} if self.failure else {})}
