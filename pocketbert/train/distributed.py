"""Several processes through torchrun (PyTorch DDP): NCCL on GPUs, gloo on CPUs, on one machine or several.

torchrun sets WORLD_SIZE, RANK, LOCAL_RANK and LOCAL_WORLD_SIZE (read and checked as a set in launch_env.py).
Every process builds the same batches in the same order and takes every world_size-th one; DDP averages the gradients, so the replicas stay equal while each
draws its own dropout masks. Process 0 alone writes checkpoints and the stage folder, which every process must
see: on several machines the run directory is shared (checked at the start of every stage). The teacher-output
cache is filled once where it is shared, else once per machine.

Process 0's failure while the others wait ends every process with its message. The wait for a cache fill is
bounded by POCKETBERT_DDP_TIMEOUT seconds (2 hours: a large fill takes long), in a gloo group of its own; every
other collective, DDP's gradient all-reduce included, by POCKETBERT_DDP_STEP_TIMEOUT (10 minutes), so a
process that stalls or desyncs frees the others' GPUs in minutes; joining the group, by POCKETBERT_DDP_JOIN_TIMEOUT
(10 minutes), which a short step timeout does not shorten. Before the first step the processes compare
a fingerprint of the training features they built: different data copies or tokenizer versions would give
other step counts and a hang.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import socket
import uuid
from pathlib import Path

import torch

from pocketbert.core.errors import ConfigError, PocketbertError
from pocketbert.core.process.launch_env import (  # noqa: F401  (the time limits' names, as callers know them here)
    DEFAULT_TIMEOUT_S,
    JOIN_TIMEOUT_ENV,
    STEP_TIMEOUT_ENV,
    TIMEOUT_ENV,
    join_timeout_seconds,
    launch,
    step_timeout_seconds,
    timeout_seconds,
)

_wait_group = None  # the gloo group with the long timeout, for waiting on a cache fill
REPLICA_SEED_STRIDE = 1_000_003  # process r > 0 seeds with seed + r * stride: its own dropout stream


class ProcessFailed(PocketbertError):
    """Another process of the run failed; this one stops with its message."""


def world_size() -> int:
    return launch().world_size


def rank() -> int:
    return launch().rank


def local_rank() -> int:
    return launch().local_rank


def local_world_size() -> int:
    return launch().local_world_size


def is_main() -> bool:
    return rank() == 0


def active() -> bool:
    return world_size() > 1 and torch.distributed.is_available() and torch.distributed.is_initialized()


def check_local_rank(local: int, gpus: int) -> None:
    if local >= gpus:
        raise ConfigError(f"process with LOCAL_RANK {local} needs GPU {local}, but this machine shows {gpus} "
                          f"GPU(s): start torchrun with --nproc_per_node {max(gpus, 1)} at most, or pass --device cpu")


def init(device: torch.device) -> torch.device:
    """Join the process group torchrun set up (once); on GPUs each process takes the GPU of its local rank."""
    if world_size() <= 1:
        return device
    if device.type == "cuda":
        check_local_rank(local_rank(), torch.cuda.device_count())
        device = torch.device("cuda", local_rank())
        torch.cuda.set_device(device)
    if not torch.distributed.is_initialized():
        global _wait_group
        backend = "nccl" if device.type == "cuda" else "gloo"
        wait = timeout_seconds()  # read them all before joining: a bad value stops every process the same way
        _join(backend, join_timeout_seconds(), step_timeout_seconds())
        _wait_group = torch.distributed.new_group(backend="gloo", timeout=datetime.timedelta(seconds=wait))
        atexit.register(torch.distributed.destroy_process_group)
    return device


@contextlib.contextmanager
def _native_log_held():
    """Native code's writes to stderr (file descriptor 2) held for the block; shown afterwards only if the block
    sets `.keep`."""
    import os
    import sys
    import tempfile
    import types

    held = types.SimpleNamespace(keep=False)
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield held
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if held.keep:
                sink.seek(0)
                os.write(2, sink.read())


def _join(backend: str, join_s: float, step_s: float) -> None:
    """init_process_group, whose setup faults (a peer that never comes, an address that does not resolve or
    answer, a port in use) end in one line: they are the launch's, not a bug. The rendezvous waits join_s for
    the others; the group's collectives then wait step_s (init_process_group alone would give both one limit)."""
    import os

    try:
        with _native_log_held() as held:  # c10d logs each failed try with a C++ trace: the one line says it
            # torch's own env:// rendezvous (torchrun's agent store included), as init_process_group runs it
            store, joined_rank, size = next(torch.distributed.rendezvous(
                "env://", timeout=datetime.timedelta(seconds=join_s)))
            store.set_timeout(datetime.timedelta(seconds=step_s))
            torch.distributed.init_process_group(backend=backend, store=store, rank=joined_rank, world_size=size,
                                                 timeout=datetime.timedelta(seconds=step_s))
            held.keep = True  # joined: what it said is shown after all
    except (RuntimeError, OSError, ValueError) as exc:  # DistNetworkError, DistStoreError, socket.gaierror
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        where = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
        raise ConfigError(f"process {rank()} of {world_size()} could not join the others at {where} within "
                          f"{join_s:g} s ({first_line}): start every process with torchrun, check that "
                          f"MASTER_ADDR resolves and the port is free, or set {JOIN_TIMEOUT_ENV}") from None


def barrier() -> None:
    if active():
        torch.distributed.barrier()


def gather(value, group=None) -> list:
    """`value` from every process, in rank order (a picklable object); [value] when running alone."""
    if not active():
        return [value]
    out = [None] * world_size()
    torch.distributed.all_gather_object(out, value, group=group)
    return out


@contextlib.contextmanager
def collectives_bounded():
    """A collective that failed or timed out under torchrun (another process died, stalled or desynced) ends this
    process with one line; alone, errors pass through as they are."""
    try:
        yield
    except RuntimeError as exc:  # torch.distributed.DistBackendError and gloo's timeouts are RuntimeErrors
        if not active() or isinstance(exc, torch.OutOfMemoryError):  # running out of memory is this process's own
            raise
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise ProcessFailed(f"process {rank()} lost the other processes ({first_line}): one of them stopped, or "
                            f"stalled for over {step_timeout_seconds():g} s ({STEP_TIMEOUT_ENV}); see its output") \
            from exc


def check_same_features(fingerprint: str, what: str) -> None:
    """Refuse in one line, on every process, to train when the processes built different training features."""
    if not active():
        return
    seen = gather((fingerprint, socket.gethostname()))
    if len({f for f, _ in seen}) > 1:
        odd = [f"{r} ({host})" for r, (f, host) in enumerate(seen) if f != seen[0][0]]
        raise ConfigError(f"process(es) {', '.join(odd)} built other {what} than process 0: every process must read "
                          "the same data files with the same tokenizer and recipe (copy them to every machine "
                          "unchanged, or put them on a shared disk)")


def seed_replica(seed: int) -> None:
    """Each process its own random stream (dropout); process 0's is the single-process run's."""
    if rank() > 0:
        torch.manual_seed(seed + REPLICA_SEED_STRIDE * rank())


def _outcomes(mine: str | None) -> list[tuple[int, str]]:
    """Every process's failure message (None: it did not fail), through the group that waits long."""
    return [(r, message) for r, message in enumerate(gather(mine, _wait_group)) if message is not None]


@contextlib.contextmanager
def first(fills: bool, what: str):
    """The processes with `fills` run the block first (filling a cache); the others after, finding it full.

    A filler's failure reaches every process: the others raise ProcessFailed with its message instead of
    waiting forever.
    """
    if not active():
        yield
        return
    if not fills:
        _raise_first(_outcomes(None), what)  # waits here until the fillers are done
        yield
        return
    try:
        yield
    except BaseException as exc:
        _outcomes(f"{type(exc).__name__}: {exc}")
        raise
    _raise_first(_outcomes(None), what)  # another machine's filler may have failed


def _raise_first(failed: list[tuple[int, str]], what: str) -> None:
    if failed:
        r, message = failed[0]
        raise ProcessFailed(f"process {r} failed while {what}: {message}")


def _visible_to_all(folder: Path, what: str) -> list[int]:
    """Ranks that cannot see a file process 0 writes into `folder` (empty when all can)."""
    folder = Path(folder)
    token, problem = None, None
    if is_main():
        token = f".pocketbert-shared-{uuid.uuid4().hex}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / token).write_text(token)
        except OSError as exc:
            problem = f"cannot write {what} {folder}: {exc.strerror or exc}"
    # on the group of the long wait: processes reach a stage's start at their own pace (a process torchrun started
    # as rank > 0 joins before its locks, rank 0 after them), which the short step timeout is not for
    token, problem = gather((token, problem), _wait_group)[0]
    if problem:  # every process stops with process 0's reason, none waits for it
        raise ConfigError(f"{problem}; point it at a writable folder")
    path = folder / token
    sees = path.is_file() and path.read_text() == token
    seen = gather(sees, _wait_group)  # also a barrier: process 0 removes the token only once all have looked
    if is_main():
        path.unlink(missing_ok=True)
    return [r for r, ok in enumerate(seen) if not ok]


def check_shared(folder: Path, what: str) -> None:
    """Fail in one line, on every process, when some process cannot see `folder` as process 0 writes it."""
    if not active():
        return
    blind = _visible_to_all(folder, what)
    if blind:
        hosts = sorted(set(h for r, h in enumerate(gather(socket.gethostname())) if r in blind))
        raise ConfigError(f"process(es) {', '.join(map(str, blind))} on {', '.join(hosts)} cannot see {what} "
                          f"{folder} that process 0 writes: on several machines put it on a disk every machine mounts "
                          "at the same path")


def folder_shared(folder: Path) -> bool:
    """Whether every process sees `folder` as process 0 writes it (True when running alone)."""
    return not active() or not _visible_to_all(folder, "the teacher-output cache")


@contextlib.contextmanager
def main_writes(run_dir: Path, staged):
    """The stage's staged folder on process 0; None on the others, which write nothing (a caller saves only
    where it gets a folder).

    Every process returns only once the stage folder is in place, so a caller may read it at once.
    """
    check_shared(run_dir, "the run directory")
    if is_main():
        with staged as out:
            yield out
    else:
        yield None
    barrier()


def wrap(model: torch.nn.Module, device: torch.device, find_unused: bool = False) -> torch.nn.Module:
    """DDP around the model. find_unused where the losses leave parameters without gradients (QA's pooler;
    the whole head in a cosine-only distillation). No buffer broadcast: BERT's buffers (position ids) are
    constants, and sending them every forward costs a collective per step."""
    if not active():
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None,
                                   find_unused_parameters=find_unused, broadcast_buffers=False)


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
            "machines": world_size() // max(1, local_world_size()), "replicas_identical": replicas_identical(model)}
