"""Training checkpoints: everything needed to continue a killed run and end with the same weights.

A checkpoint is written to a temporary file and renamed over the previous one, so a kill at any moment
leaves either the previous checkpoint or the new one. It loads with torch.load(weights_only=True).

The state is copied to host memory at the step it belongs to, then serialised, written and fsynced by a
thread of its own while training goes on (on an H100 a synchronous save took about a second, as long as
200 steps of a small model). One write is in flight at a time; its error is raised at the next save or at
the end of training.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from pocketbert.core.errors import ConfigError
from pocketbert.core.process.faults import FAULT_ENV, fault_asked  # noqa: F401 (FAULT_ENV: the tests' name for it)
from pocketbert.core.run.run_files import CHECKPOINT_FILE, CHECKPOINT_PARTIAL

# stall_in_training: that process sleeps FAULT_STALL_S before its first step (core/process/faults.py names every fault)
FAULT_STALL_S = 20


@dataclass
class CheckpointSpec:
    folder: Path
    every: int
    fingerprint: str
    resume: bool


def fingerprint(identity: dict, features: list) -> str:
    """What a checkpoint is valid for: the stage's settings and the exact token ids and targets it trains on."""
    from pocketbert.core.tasks.registry import features_digest

    digest = features_digest(features, with_targets=True)
    digest.update(json.dumps(identity, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def stall_if_asked(rank: int) -> None:
    """Sleep as a process does that hangs (a stuck data read, a slow disk), where a test asked for it."""
    if fault_asked("stall_in_training", rank):
        import time

        time.sleep(FAULT_STALL_S)


def kill_if_asked(kind: str, step: int, writer: "CheckpointWriter | None" = None) -> None:
    """SIGKILL this process at the step a test asked for: nothing gets to clean up, as with a real kill.
    Under torchrun process 0 dies (after writing its checkpoint) and torchrun stops the others."""
    from pocketbert.train import distributed

    if fault_asked(kind, step) and distributed.is_main():
        if writer is not None:
            writer.wait()  # the kill comes after this step's checkpoint is on disk
        os.kill(os.getpid(), signal.SIGKILL)


class CheckpointWriter:
    """Writes checkpoints on a thread of its own, one at a time, and hands its error back to the trainer."""

    def __init__(self):
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, write) -> None:
        self.wait()
        self._thread = threading.Thread(target=self._run, args=(write,), name="pocketbert-checkpoint", daemon=True)
        self._thread.start()

    def _run(self, write) -> None:
        try:
            write()
        except BaseException as exc:  # raised in the training thread by wait()
            self._error = exc

    def wait(self) -> None:
        """Block until the write in flight is on disk; raise its error, if it had one."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error


def _host_copy(value):
    """`value` with every tensor copied to host memory: training goes on changing the originals in place."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: _host_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_host_copy(v) for v in value)
    return value


def _random_state(device: torch.device) -> dict:
    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None}


def save(spec: CheckpointSpec, step: int, model, optimizer, scheduler, scaler, running: dict,
         device: torch.device, precision: str, writer: CheckpointWriter | None = None) -> None:
    """Called by every process: each hands process 0 its own random state (its dropout stream), which writes,
    on `writer`'s thread when one is given."""
    from pocketbert.train import distributed

    random_states = distributed.gather(_random_state(device))
    if not distributed.is_main():
        return
    state = _host_copy({
        "fingerprint": spec.fingerprint,
        "world_size": distributed.world_size(),
        "precision": precision,
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "grad_scaler": scaler.state_dict(),
        "random_states": random_states,  # one per process, in rank order
        "running": running,
    })
    if writer is None:
        _write(spec, step, state)
    else:
        writer.submit(lambda: _write(spec, step, state))


def _write(spec: CheckpointSpec, step: int, state: dict) -> None:
    spec.folder.mkdir(parents=True, exist_ok=True)
    target = spec.folder / CHECKPOINT_FILE
    partial = spec.folder / CHECKPOINT_PARTIAL
    try:
        # Through a Python file: on a full disk torch then fails with the system's OSError as its context,
        # which names the fault (saved to a path, it says only "unexpected pos").
        with open(partial, "wb") as handle:
            torch.save(state, handle)
            handle.flush()
            os.fsync(handle.fileno())  # on the disk before the rename makes it the checkpoint
    except BaseException:
        partial.unlink(missing_ok=True)  # a half-written checkpoint is never left behind; last.pt stays
        for folder in (spec.folder, spec.folder.parent):  # nor the folders made for it, if nothing else is there
            try:
                folder.rmdir()
            except OSError:
                break
        raise
    if fault_asked("kill_in_checkpoint", step):
        with open(partial, "r+b") as handle:  # die with a half-written file on disk
            handle.truncate(partial.stat().st_size // 2)
        kill_if_asked("kill_in_checkpoint", step)
    os.replace(partial, target)
    fsync_folder(spec.folder)  # and the rename itself, so a power cut cannot bring back the older checkpoint


def fsync_folder(folder: Path) -> None:
    """Make a rename inside `folder` durable (a folder's entries are flushed by fsync on the folder itself)."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _read(target: Path) -> dict:
    import pickle

    try:
        return torch.load(target, weights_only=True, map_location="cpu")
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError) as exc:
        raise ConfigError(f"the checkpoint {target} is unreadable ({type(exc).__name__}): remove it, "
                          "or run without --resume") from None


def load(spec: CheckpointSpec, model, optimizer, scheduler, scaler, device: torch.device,
         precision: str) -> tuple[int, dict]:
    """The step to continue after and the running loss averages; (0, {}) when there is nothing to resume.

    Every process reads the checkpoint and they must agree on the step, or none continues: a process that
    sees another checkpoint (or none) would train other batches and hang the others' gradient averaging.
    """
    from pocketbert.train import distributed

    target = spec.folder / CHECKPOINT_FILE
    state, problem = None, None
    try:
        state = _read(target) if spec.resume and target.is_file() else None
    except ConfigError as exc:
        problem = str(exc)
    seen = distributed.gather(problem or (None if state is None else int(state["step"])))
    problems = [s for s in seen if isinstance(s, str)]
    if problems:
        raise ConfigError(problems[0])
    if len(set(seen)) > 1:
        raise ConfigError(f"processes disagree about resuming from {target} (steps seen: {seen}): every process "
                          "must see the same run directory; share it between machines, or run without --resume")
    if state is None:
        return 0, {}
    written_by = state.get("world_size", 1)
    if written_by != distributed.world_size():
        raise ConfigError(f"the checkpoint in {spec.folder} was written by {written_by} process(es), and resuming "
                          f"with {distributed.world_size()} would train other batches: resume with torchrun "
                          f"--nproc_per_node {written_by} (in all), or run again without --resume")
    if state.get("precision") != precision:
        raise ConfigError(f"the checkpoint in {spec.folder} was trained in {state.get('precision')}, this device "
                          f"trains in {precision}: resume on the same kind of device, or run again without --resume")
    if state["fingerprint"] != spec.fingerprint:
        raise ConfigError(f"the checkpoint in {spec.folder} was written for another configuration (recipe, teacher "
                          "or data differ): run again without --resume, or remove that folder")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    scaler.load_state_dict(state["grad_scaler"])
    mine = state["random_states"][distributed.rank()]
    torch.set_rng_state(mine["torch"])
    if mine["cuda"] is not None and device.type == "cuda":
        torch.cuda.set_rng_state(mine["cuda"], device)
    return int(state["step"]), dict(state["running"])


def discard(spec: CheckpointSpec | None) -> None:
    """A finished stage needs no checkpoint."""
    if spec is None:
        return
    for name in (CHECKPOINT_FILE, CHECKPOINT_PARTIAL):
        (spec.folder / name).unlink(missing_ok=True)
    try:
        spec.folder.rmdir()
        spec.folder.parent.rmdir()
    except OSError:
        pass
