"""Training checkpoints: everything needed to continue a killed run and end with the same weights.

A checkpoint is written to a temporary file and renamed over the previous one, so a kill at any moment
leaves either the previous checkpoint or the new one. It loads with torch.load(weights_only=True).
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import torch

from pocketbert.errors import ConfigError

CHECKPOINT_FILE = "last.pt"
PARTIAL_FILE = "last.pt.partial"  # written first, renamed over CHECKPOINT_FILE when complete
FAULT_ENV = "POCKETBERT_FAULT"  # fault injection for tests: "kill_after_step:N" or "kill_in_checkpoint:N"


@dataclass
class CheckpointSpec:
    folder: Path
    every: int
    fingerprint: str
    resume: bool


def fingerprint(identity: dict, features: list) -> str:
    """What a checkpoint is valid for: the stage's settings and the exact token ids and targets it trains on."""
    from pocketbert.core.tasks import features_digest

    digest = features_digest(features, with_targets=True)
    digest.update(json.dumps(identity, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def _fault(kind: str, step: int) -> bool:
    return os.environ.get(FAULT_ENV) == f"{kind}:{step}"


def kill_if_asked(kind: str, step: int) -> None:
    """SIGKILL this process at the step a test asked for: nothing gets to clean up, as with a real kill."""
    if _fault(kind, step):
        os.kill(os.getpid(), signal.SIGKILL)


def save(spec: CheckpointSpec, step: int, model, optimizer, scheduler, running: dict) -> None:
    spec.folder.mkdir(parents=True, exist_ok=True)
    state = {
        "fingerprint": spec.fingerprint,
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "running": running,
    }
    target = spec.folder / CHECKPOINT_FILE
    partial = spec.folder / PARTIAL_FILE
    torch.save(state, partial)
    if _fault("kill_in_checkpoint", step):
        with open(partial, "r+b") as handle:  # die with a half-written file on disk
            handle.truncate(partial.stat().st_size // 2)
        kill_if_asked("kill_in_checkpoint", step)
    os.replace(partial, target)


def load(spec: CheckpointSpec, model, optimizer, scheduler) -> tuple[int, dict]:
    """The step to continue after and the running loss averages; (0, {}) when there is nothing to resume."""
    target = spec.folder / CHECKPOINT_FILE
    if not spec.resume or not target.is_file():
        return 0, {}
    import pickle

    try:
        state = torch.load(target, weights_only=True, map_location="cpu")
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError) as exc:
        raise ConfigError(f"the checkpoint {target} is unreadable ({type(exc).__name__}): remove it, "
                          "or run without --resume") from None
    if state["fingerprint"] != spec.fingerprint:
        raise ConfigError(f"the checkpoint in {spec.folder} was written for another configuration (recipe, teacher "
                          "or data differ): run again without --resume, or remove that folder")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["torch_rng"])
    if state["cuda_rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    return int(state["step"]), dict(state["running"])


def discard(spec: CheckpointSpec | None) -> None:
    """A finished stage needs no checkpoint."""
    if spec is None:
        return
    for name in (CHECKPOINT_FILE, PARTIAL_FILE):
        (spec.folder / name).unlink(missing_ok=True)
    try:
        spec.folder.rmdir()
        spec.folder.parent.rmdir()
    except OSError:
        pass
