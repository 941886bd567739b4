"""Several processes through torchrun (PyTorch DDP): NCCL on GPUs, gloo on CPUs.

torchrun sets WORLD_SIZE, RANK and LOCAL_RANK. Every process builds the same batches in the same order and
takes every world_size-th one; DDP averages the gradients, so the replicas stay equal. Process 0 alone
writes: the teacher cache (the others wait, then read it), checkpoints and the stage folder.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import tempfile
from pathlib import Path

import torch


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def is_main() -> bool:
    return rank() == 0


def active() -> bool:
    return world_size() > 1 and torch.distributed.is_available() and torch.distributed.is_initialized()


def init(device: torch.device) -> torch.device:
    """Join the process group torchrun set up (once); on GPUs each process takes the GPU of its local rank."""
    if world_size() <= 1:
        return device
    if not torch.distributed.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        torch.distributed.init_process_group(backend=backend)
        atexit.register(torch.distributed.destroy_process_group)
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    return device


def barrier() -> None:
    if active():
        torch.distributed.barrier()


@contextlib.contextmanager
def main_first():
    """Process 0 runs the block first (filling a cache); the others run it after, finding the cache full."""
    if not is_main():
        barrier()
    yield
    if is_main():
        barrier()


@contextlib.contextmanager
def main_writes(staged):
    """The stage's staged folder on process 0; a scratch folder, thrown away, on the others."""
    if is_main():
        with staged as out:
            yield out
    else:
        with tempfile.TemporaryDirectory(prefix="pocketbert-rank-") as scratch:
            yield Path(scratch)


def wrap(model: torch.nn.Module, device: torch.device, find_unused: bool = False) -> torch.nn.Module:
    """DDP around the model; find_unused where its head skips parameters (QA leaves the pooler unused)."""
    if not active():
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None,
                                   find_unused_parameters=find_unused)


def replicas_identical(model: torch.nn.Module) -> bool:
    """Whether every process holds the same weights (they drift apart if gradients were not averaged)."""
    if not active():
        return True
    with torch.no_grad():
        local = torch.stack([p.detach().double().sum() for p in model.parameters()])
    gathered = [torch.zeros_like(local) for _ in range(world_size())]
    torch.distributed.all_gather(gathered, local)
    return all(torch.allclose(g, gathered[0], rtol=0, atol=1e-9) for g in gathered)


def summary(model: torch.nn.Module) -> dict:
    if not active():
        return {"world_size": 1}
    return {"world_size": world_size(), "backend": torch.distributed.get_backend(),
            "replicas_identical": replicas_identical(model)}
