"""Training steps replayed as CUDA graphs: one graph per batch shape, captured after a few eager steps of it.

A small student's step is about a thousand kernels of microseconds each; launched one by one from Python, the
GPU waits on the host for most of the step. A captured graph launches them all in one call. What the step
reads changes in place between replays: the batch is copied into the graph's own input tensors, the learning
rate is a device tensor the schedule fills, and the optimizer's state and the running losses are updated in
place. Capture needs a step with no host sync (the losses, masks and cache reads are written that way) and a
fixed shape: widths are rounded up to a few multiples (trainer.pad_multiple_for), so an epoch has few shapes.

Used on a single CUDA device with bf16 or fp32 arithmetic. Not under DDP (its all-reduce hooks run outside a
graph), not with fp16 loss scaling (the scaler reads the gradients back to the host). With torch.compile (its
default mode, which launches its fused kernels from the host) the compiled step is captured like an eager one:
the rehearsals compile it. If a step cannot be captured, training goes on eagerly and the manifest says why.
"""

from __future__ import annotations

import contextlib
from typing import Callable

import torch

from pocketbert.core.config.recipe import TrainingSection

WARMUP_STEPS_PER_SHAPE = 2  # eager rehearsals of a shape before its capture: lazy set-up stays out of the graph


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
    return None


class GraphedSteps:
    """Runs `step(batch)` (forward, backward, update, running losses: queued on the device, nothing read back) as
    one CUDA graph per batch shape. Every training step is a replay: before a shape's capture, its first batch is
    rehearsed eagerly WARMUP_STEPS_PER_SHAPE times (lazy initialisation stays out of the graph) and every tensor the
    step changes, and the random-number state, is then put back as it was. So where a run captures a shape leaves
    no trace in its weights, and a run resumed from a checkpoint takes the very steps of the run it continues."""

    def __init__(self, step: Callable[[dict[str, torch.Tensor]], None], clear_gradients: Callable[[], None],
                 state: Callable[[], list[torch.Tensor]]):
        self.step = step
        self.clear_gradients = clear_gradients
        self.state = state  # every tensor a step writes: weights, buffers, optimizer state, running averages
        self.graphs: dict[tuple, tuple[torch.cuda.CUDAGraph, dict[str, torch.Tensor]]] = {}
        self.rehearsals = 0
        self.eager_steps = 0
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
        if self.failure is not None:
            self._eager(batch)
            self.eager_steps += 1
            return
        with rehearsal(self.state, batch[next(iter(batch))].device):
            for _ in range(WARMUP_STEPS_PER_SHAPE):
                self._eager(batch)
                self.rehearsals += 1
        self._capture(batch, key)

    def _eager(self, batch: dict[str, torch.Tensor]) -> None:
        # On a side stream, as capture will be: the allocator and libraries set up for it outside the graph.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.step(batch)
            self.clear_gradients()
        torch.cuda.current_stream().wait_stream(side)

    def _capture(self, batch: dict[str, torch.Tensor], key: tuple) -> None:
        inputs = {name: tensor.clone() for name, tensor in batch.items()}
        graph = torch.cuda.CUDAGraph()
        # Captured with no gradient tensors, the backward writes them rather than adding to them; each graph
        # owns its gradients.
        self.clear_gradients()
        try:
            with torch.cuda.graph(graph):
                self.step(inputs)
        except Exception as exc:  # an operation (or a compiled kernel) that cannot be captured: go on eagerly, say why
            self.failure = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            self.clear_gradients()
            torch.cuda.synchronize()
            self._eager(batch)
            self.eager_steps += 1
            return
        self.clear_gradients()
        self.graphs[key] = (graph, inputs)
        graph.replay()
        self.replays += 1

    def report(self) -> dict:
        return {"used": self.failure is None and bool(self.graphs), "shapes_captured": len(self.graphs),
                "steps_replayed": self.replays, "eager_steps": self.eager_steps,
                "rehearsal_steps": self.rehearsals,
                **({"not_used_because": self.failure} if self.failure else {})}


@contextlib.contextmanager
def rehearsal(state: Callable[[], list[torch.Tensor]], device: torch.device):
    """Steps taken inside leave no trace: each tensor of state() is put back as it was, one that the steps created
    (an optimizer's moments, a running average) is zeroed, as a fresh one is, and so is the random-number state."""
    kept = [(t, t.detach().clone()) for t in state()]
    known = {id(t) for t, _ in kept}
    random_state = torch.cuda.get_rng_state(device) if device.type == "cuda" else torch.get_rng_state()
    try:
        yield
    finally:
        with torch.no_grad():
            for tensor, saved in kept:
                tensor.copy_(saved)
            for tensor in state():
                if id(tensor) not in known:
                    tensor.zero_()
        if device.type == "cuda":
            torch.cuda.set_rng_state(random_state, device)
        else:
            torch.set_rng_state(random_state)
