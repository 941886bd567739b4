"""Training for as many epochs as help: after each epoch the model is scored on validation rows held out of the
training split (never the dev set the stage reports), and training stops once `patience` epochs in a row have not
beaten the best score; the best epoch's weights are the ones kept.

The scores and the best weights are written beside the stage's checkpoint at each epoch's end, so a resumed run
knows the epochs its first process scored and stops where it would have.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import torch

from pocketbert.core.errors import ConfigError
from pocketbert.core.run.run_files import BEST_WEIGHTS_FILE, EPOCH_SCORES_FILE


def held_out_split(examples: list, validation: int, seed: int) -> tuple[list, list]:
    """(training pool, validation rows): a seeded draw of `validation` examples kept out of training, with every
    training example that shares one's text or passage (a QA validation question's context stays unseen). The draw
    does not depend on how many training examples a recipe then takes from the pool."""
    import random

    from pocketbert.core.tasks.data import separation_key

    if validation >= len(examples):
        raise ConfigError(f"validation_examples {validation} leaves none of the {len(examples)} training examples to "
                          f"train on: lower it")
    order = list(range(len(examples)))
    random.Random(seed ^ 0x5EED).shuffle(order)
    held = set(order[:validation])
    held_keys = {separation_key(examples[i]) for i in held}
    pool = [e for i, e in enumerate(examples) if i not in held and separation_key(e) not in held_keys]
    if not pool:
        raise ConfigError(f"validation_examples {validation} holds out every passage of the {len(examples)} training "
                          "examples: lower it")
    return pool, [examples[i] for i in sorted(held)]


def _write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    partial = path.with_name(path.name + ".partial")
    write(partial)
    with open(partial, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(partial, path)


class EpochStop:
    """Called at each epoch's end with the model: scores it, keeps the best weights, says whether to stop."""

    def __init__(self, score: Callable[[torch.nn.Module], float], patience: int, metric: str,
                 folder: Path | None, fingerprint: str, writes: bool):
        self.score, self.patience, self.metric = score, patience, metric
        self.folder, self.fingerprint, self.writes = folder, fingerprint, writes
        self.scores: dict[int, float] = {}
        self.best_epoch: int | None = None
        self.best_state: dict[str, torch.Tensor] | None = None
        self.stopped_after: int | None = None
        self._load()

    def _load(self) -> None:
        """A resumed run's record of the epochs already scored (ignored when it belongs to other settings)."""
        if self.folder is None or not (self.folder / EPOCH_SCORES_FILE).is_file():
            return
        record = json.loads((self.folder / EPOCH_SCORES_FILE).read_text())
        if record.get("fingerprint") != self.fingerprint or not (self.folder / BEST_WEIGHTS_FILE).is_file():
            return
        self.scores = {int(k): float(v) for k, v in record["scores"].items()}
        self.best_epoch, self.stopped_after = record["best_epoch"], record["stopped_after"]
        self.best_state = torch.load(self.folder / BEST_WEIGHTS_FILE, weights_only=True)

    def _save(self, improved: bool) -> None:
        if not self.writes or self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        if improved:
            _write_atomically(self.folder / BEST_WEIGHTS_FILE, lambda p: torch.save(self.best_state, p))
        record = {"fingerprint": self.fingerprint, "metric": self.metric, "scores": self.scores,
                  "best_epoch": self.best_epoch, "stopped_after": self.stopped_after}
        _write_atomically(self.folder / EPOCH_SCORES_FILE, lambda p: p.write_text(json.dumps(record) + "\n"))

    def __call__(self, epoch: int, model: torch.nn.Module) -> bool:
        if epoch in self.scores:  # scored before the run was resumed
            return self.stopped_after == epoch
        value = self.score(model)
        model.train()
        self.scores[epoch] = value
        improved = self.best_epoch is None or value > self.scores[self.best_epoch]
        if improved:
            self.best_epoch = epoch
            self.best_state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        if epoch - self.best_epoch >= self.patience:
            self.stopped_after = epoch
        self._save(improved)
        return self.stopped_after == epoch

    def keep_best(self, model: torch.nn.Module) -> None:
        """The best epoch's weights back into the model (nothing to do when the last epoch was the best)."""
        if self.best_state is not None and self.best_epoch != max(self.scores, default=None):
            model.load_state_dict(self.best_state)

    def report(self) -> dict:
        return {"metric": self.metric, "validation": {str(e + 1): round(v, 4) for e, v in sorted(self.scores.items())},
                "epochs_trained": max(self.scores, default=-1) + 1, "best_epoch": (self.best_epoch or 0) + 1,
                "stopped_early": self.stopped_after is not None}


def discard(folder: Path | None) -> None:
    if folder is None:
        return
    for name in (EPOCH_SCORES_FILE, BEST_WEIGHTS_FILE):
        (folder / name).unlink(missing_ok=True)
        (folder / (name + ".partial")).unlink(missing_ok=True)
