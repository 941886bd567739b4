"""`pocketbert bench train`: examples per second of a distillation epoch against a reference loop.

Both loops train the same fresh student, from the same teacher, on the same examples with the same losses,
batch size, precision (bf16 autocast on a GPU) and optimizer (fused AdamW on a GPU). The reference pads every
batch to the maximum length and runs the teacher at every step; pocketbert's loop reads teacher outputs from
the cache and pads each length-grouped batch only to its longest row. The clock is read only after the GPU
has finished the work queued before it. pocketbert is timed twice: with the cache filled as part of the epoch (a first run), and with
it already on disk (every later epoch and run). Each loop first runs a few untimed steps, then is timed
REPEATS times; the median run is reported with the spread of the three.
"""

from __future__ import annotations

import copy
import json
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from pocketbert.core.run.manifest import command_line
from pocketbert.core.run.atomic_folder import write_text_atomically
from pocketbert.core.run.run_files import TRAIN_BENCH_RESULTS
from pocketbert.core.config.recipe import DistillSection, EvalSection, Recipe, with_overrides
from pocketbert.train import precision, registry, teacher_cache, trainer
from pocketbert.train.stage import StageRun

DEFAULT_EXAMPLES = 2000
REPEATS = 3  # timed runs of each loop; the median is reported, with the spread (max - min) / median
WARMUP_STEPS = 5  # untimed steps of each loop before its clock starts


def synchronized_clock(dev) -> float:
    """perf_counter once the device has run everything queued: a GPU returns from a step before doing it."""
    if torch.device(dev).type == "cuda":
        torch.cuda.synchronize(dev)
    return time.perf_counter()


def reference_epoch(student, task, features, pad_id: int, cfg: DistillSection, dev, step_loss, seed: int) -> dict:
    """A plain loop: random batches, each padded to max_length, the teacher run inside step_loss every step."""
    from tqdm.auto import tqdm

    length = cfg.max_length
    batch_size = cfg.batch_size
    order = list(range(len(features)))
    random.Random(seed).shuffle(order)
    device = torch.device(dev)
    mode = precision.precision_for(device)
    precision.allow_tf32(device)
    optimizer = torch.optim.AdamW(student.parameters(), lr=cfg.learning_rate,
                                  fused=device.type == "cuda")  # as pocketbert's loop
    scaler = precision.grad_scaler(device, mode)
    student.to(dev).train()
    started = synchronized_clock(dev)
    steps = examples = padded_tokens = 0
    for start in tqdm(range(0, len(order), batch_size), desc="reference loop", unit="step"):
        idx = order[start:start + batch_size]
        batch = trainer.to_device(trainer.pad_to(task.collate([features[i] for i in idx], pad_id), length, pad_id), dev)
        steps, examples, padded_tokens = steps + 1, examples + len(idx), padded_tokens + batch["input_ids"].numel()
        with precision.autocast(device, mode):
            loss, _ = step_loss(student, batch)
        trainer.optimizer_step(student, loss, optimizer, scaler)  # as pocketbert's loop does
    # What the loop really did, so a benchmark that skipped work or padding shows it.
    return {"seconds": synchronized_clock(dev) - started, "steps": steps, "examples": examples,
            "padded_tokens": padded_tokens, "precision": mode}


@dataclass
class DistillationBench:
    """What a timed distillation needs: the run's teacher, a fresh student, the features and the losses."""

    cfg: DistillSection
    eval_cfg: EvalSection
    seed: int
    teacher: torch.nn.Module
    teacher_dir: Path
    task: object
    student: torch.nn.Module
    features: list
    pad_id: int
    weights: dict
    hidden_targets: list | None
    dev: torch.device
    step_loss_for: object  # cached teacher outputs (or None) -> (step_loss, batch_extras)

    def cached_outputs(self, root: Path, teacher_sha: str) -> tuple:
        """(teacher outputs, cache report) for the features, from the cache under `root` (filled on a miss)."""
        return teacher_cache.teacher_outputs(self.teacher, self.task, self.features, self.pad_id, self.hidden_targets,
                                             teacher_sha, self.dev, teacher_cache.DEFAULT_LIMIT_MB,
                                             self.eval_cfg.batch_size, root=Path(root))


def distillation_bench(run_dir: Path, recipe: Recipe, n_examples: int, teacher_dir: Path | None = None,
                       data_dir: Path | None = None, device: str | None = None) -> DistillationBench:
    """One epoch of the DistilBERT recipe's distillation on n_examples, ready to time or profile: the recipe
    object's own steps load the teacher and data, build the student and make the loss."""
    timed = with_overrides(recipe, {"distill.max_train_examples": n_examples, "distill.epochs": 1}, "bench train")
    distilbert = registry.create(registry.DISTILBERT)
    run = StageRun(Path(run_dir), distilbert.complete(timed), data_dir, teacher_dir=teacher_dir, device=device)
    distilbert.load_inputs(run)
    dev = trainer.pick_device(device)
    distilbert.place(run, dev)
    trainer.set_seed(run.seed)
    initial = distilbert.build_model(run)
    _, features, _ = trainer.prepare_features(distilbert.task, distilbert.tokenizer, distilbert.data, run.section,
                                              run.recipe.eval, run.seed)

    def step_loss_for(cached):
        distilbert.cached = cached
        return distilbert.step_loss(run, dev)

    return DistillationBench(run.section, run.recipe.eval, run.seed, distilbert.teacher, distilbert.teacher_dir,
                             distilbert.task, initial, features, distilbert.tokenizer.pad_token_id, distilbert.weights,
                             distilbert.hidden_targets(), dev, step_loss_for)


def bench_train(run_dir: Path, recipe: Recipe, n_examples: int = DEFAULT_EXAMPLES, teacher_dir: Path | None = None,
                data_dir: Path | None = None, device: str | None = None) -> dict:
    bench = distillation_bench(run_dir, recipe, n_examples, teacher_dir, data_dir, device)
    cfg, eval_cfg, seed, teacher, task, initial = (bench.cfg, bench.eval_cfg, bench.seed, bench.teacher, bench.task,
                                                   bench.student)
    features, pad_id, weights, hidden_targets, dev = (bench.features, bench.pad_id, bench.weights,
                                                      bench.hidden_targets, bench.dev)
    teacher_dir, loss_for = bench.teacher_dir, bench.step_loss_for

    warmup_features = features[:WARMUP_STEPS * cfg.batch_size]

    def reference(sample: list, _root: Path) -> dict:
        trainer.set_seed(seed)
        step_loss, _ = loss_for(None)
        return reference_epoch(copy.deepcopy(initial), task, sample, pad_id, cfg, dev, step_loss, seed)

    def pocketbert_loop(sample: list, root: Path) -> dict:
        trainer.set_seed(seed)
        started = synchronized_clock(dev)
        cached, report = teacher_cache.teacher_outputs(
            teacher, task, sample, pad_id, hidden_targets, f"bench-{seed}", dev, teacher_cache.DEFAULT_LIMIT_MB,
            eval_cfg.batch_size, root=root)
        filled = synchronized_clock(dev)
        step_loss, extras = loss_for(cached)
        stats = trainer.train(copy.deepcopy(initial), task, sample, pad_id, cfg, dev, step_loss, seed, "pocketbert",
                              batch_extras=extras)
        return {"seconds": synchronized_clock(dev) - started, "teacher_cache_seconds": filled - started,
                "cache_hit": report.get("hit", False), "steps": stats["steps"], "examples": stats["train_examples"],
                "precision": stats["precision"]}

    timings = {}
    with tempfile.TemporaryDirectory(prefix="pocketbert-train-bench-") as scratch:
        filled_root = Path(scratch) / "filled"
        pocketbert_loop(features, filled_root)  # fills the cache the warm-cache runs read
        loops = {"reference": lambda run: Path(scratch) / "unused",
                 "pocketbert_cold_cache": lambda run: Path(scratch) / f"empty-{run}",
                 "pocketbert_warm_cache": lambda run: filled_root}
        for name, root_of in loops.items():
            loop = reference if name == "reference" else pocketbert_loop
            # Every loop warms up (allocations, kernels, caches) on a few steps of its own before its clock starts.
            loop(warmup_features, Path(scratch) / f"warmup-{name}")
            runs = [loop(features, root_of(run)) for run in range(REPEATS)]
            seconds = [r["seconds"] for r in runs]
            timings[name] = {**runs[int(np.argsort(seconds)[len(seconds) // 2])],
                             "seconds_each": [round(x, 3) for x in seconds],
                             "spread": (max(seconds) - min(seconds)) / float(np.median(seconds))}
    lengths = [len(f.input_ids) for f in features]
    for t in timings.values():
        t["examples_per_second"] = len(features) / t["seconds"]
    reference_rate = timings["reference"]["examples_per_second"]
    result = {
        "command": command_line(), "examples": len(features), "batch_size": cfg.batch_size, "max_length": cfg.max_length,
        "mean_length": float(np.mean(lengths)), "device": str(dev), "threads": torch.get_num_threads(),
        "losses": {k: w for k, w in weights.items() if w}, "teacher": str(teacher_dir), "timings": timings,
        "repeats": REPEATS, "warmup_steps": WARMUP_STEPS,
        "speedup_cold_cache": timings["pocketbert_cold_cache"]["examples_per_second"] / reference_rate,
        "speedup_warm_cache": timings["pocketbert_warm_cache"]["examples_per_second"] / reference_rate,
    }
    write_text_atomically(Path(run_dir) / TRAIN_BENCH_RESULTS, json.dumps(result, indent=2) + "\n")
    return result
