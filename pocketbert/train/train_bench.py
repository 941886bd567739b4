"""`pocketbert bench train`: examples per second of a distillation epoch against a reference loop.

Both loops train the same fresh student, from the same teacher, on the same examples with the same losses,
batch size, precision (bf16 autocast on a GPU) and optimizer (fused AdamW on a GPU). The reference pads every
batch to the maximum length and runs the teacher at every step; pocketbert's loop reads teacher outputs from
the cache and pads each length-grouped batch only to its longest row. The clock is read only after the GPU
has finished the work queued before it. pocketbert is timed twice: with the cache filled as part of the epoch (a first run), and with
it already on disk (every later epoch and run).
"""

from __future__ import annotations

import copy
import json
import random
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from pocketbert.manifest import command_line
from pocketbert.rundir import TEACHER_DIR, TRAIN_BENCH_RESULTS, require_stage, write_text_atomically
from pocketbert.core import losses, models
from pocketbert.train.student import build_student
from pocketbert.train import precision, teacher_cache, trainer
from pocketbert.train.distill import (
    aligned_teacher_layers,
    check_distill_config,
    distillation_loss,
    freeze,
    load_teacher_and_data,
)

DEFAULT_EXAMPLES = 2000


def pad_to(batch: dict[str, np.ndarray], length: int, pad_id: int) -> dict[str, np.ndarray]:
    """Every sequence input widened to `length` columns (ids with the pad id, masks and types with 0)."""
    out = dict(batch)
    for name in ("input_ids", "attention_mask", "token_type_ids"):
        if name in batch:
            value = pad_id if name == "input_ids" else 0
            width = batch[name].shape[1]
            out[name] = np.pad(batch[name], ((0, 0), (0, length - width)), constant_values=value)
    return out


def synchronized_clock(dev) -> float:
    """perf_counter once the device has run everything queued: a GPU returns from a step before doing it."""
    if torch.device(dev).type == "cuda":
        torch.cuda.synchronize(dev)
    return time.perf_counter()


def reference_epoch(student, task, features, pad_id: int, cfg: dict, dev, step_loss, seed: int) -> dict:
    """A plain loop: random batches, each padded to max_length, the teacher run inside step_loss every step."""
    from tqdm.auto import tqdm

    length = int(cfg["max_length"])
    batch_size = int(cfg["batch_size"])
    order = list(range(len(features)))
    random.Random(seed).shuffle(order)
    device = torch.device(dev)
    mode = precision.precision_for(device)
    precision.allow_tf32(device)
    optimizer = torch.optim.AdamW(student.parameters(), lr=float(cfg["learning_rate"]),
                                  fused=device.type == "cuda")  # as pocketbert's loop
    scaler = precision.grad_scaler(device, mode)
    student.to(dev).train()
    started = synchronized_clock(dev)
    steps = examples = padded_tokens = 0
    for start in tqdm(range(0, len(order), batch_size), desc="reference loop", unit="step"):
        idx = order[start:start + batch_size]
        batch = trainer.to_device(pad_to(task.collate([features[i] for i in idx], pad_id), length, pad_id), dev)
        steps, examples, padded_tokens = steps + 1, examples + len(idx), padded_tokens + batch["input_ids"].numel()
        with precision.autocast(device, mode):
            loss, _ = step_loss(student, batch, idx)
        trainer.optimizer_step(student, loss, optimizer, scaler)  # as pocketbert's loop does
    # What the loop really did, so a benchmark that skipped work or padding shows it.
    return {"seconds": synchronized_clock(dev) - started, "steps": steps, "examples": examples,
            "padded_tokens": padded_tokens, "precision": mode}


def bench_train(run_dir: Path, recipe: dict, n_examples: int = DEFAULT_EXAMPLES, teacher_dir: Path | None = None,
                data_dir: Path | None = None, device: str | None = None) -> dict:
    cfg, eval_cfg = dict(recipe["distill"]), recipe.get("eval", {})
    check_distill_config(cfg)
    cfg["max_train_examples"] = n_examples
    cfg["epochs"] = 1
    seed = int(recipe["seed"])
    teacher_dir = Path(teacher_dir) if teacher_dir else require_stage(run_dir, TEACHER_DIR, "pocketbert train teacher")
    teacher, tokenizer, task, teacher_dir, data = load_teacher_and_data(run_dir, recipe, teacher_dir, data_dir, None,
                                                                        seed)
    dev = trainer.pick_device(device)
    freeze(teacher, dev)
    trainer.set_seed(seed)
    initial, layer_map = build_student(teacher, (recipe.get("student") or {}).get("layer_map"))
    _, features, _ = trainer.prepare_features(task, tokenizer, data, cfg, eval_cfg, seed)
    weights = {k: float(cfg.get(f"{k}_weight", 0.0)) for k in ("kl", "ce", "cos")}
    targets = aligned_teacher_layers(len(layer_map), models.layer_count(teacher.config))
    hidden_targets = targets if weights["cos"] else None
    hard_loss = losses.hard_label_loss(cfg)
    temperature = float(cfg["temperature"])
    pad_id = tokenizer.pad_token_id

    def loss_for(cached):
        return distillation_loss(task, teacher, cached, weights, temperature, targets, hard_loss, dev)

    timings = {}
    trainer.set_seed(seed)
    timings["reference"] = reference_epoch(copy.deepcopy(initial), task, features, pad_id, cfg, dev, loss_for(None),
                                           seed)
    with tempfile.TemporaryDirectory(prefix="pocketbert-train-bench-") as cache_root:
        for name in ("pocketbert_cold_cache", "pocketbert_warm_cache"):
            trainer.set_seed(seed)
            started = synchronized_clock(dev)
            cached, report = teacher_cache.teacher_outputs(
                teacher, task, features, pad_id, hidden_targets, f"bench-{seed}", dev, teacher_cache.DEFAULT_LIMIT_MB,
                int(eval_cfg["batch_size"]), root=Path(cache_root))
            filled = synchronized_clock(dev)
            stats = trainer.train(copy.deepcopy(initial), task, features, pad_id, cfg, dev, loss_for(cached), seed,
                                  name)
            timings[name] = {"seconds": synchronized_clock(dev) - started, "teacher_cache_seconds": filled - started,
                             "cache_hit": report.get("hit", False), "steps": stats["steps"],
                             "examples": stats["train_examples"], "precision": stats["precision"]}
    lengths = [len(f.input_ids) for f in features]
    for t in timings.values():
        t["examples_per_second"] = len(features) / t["seconds"]
    reference_rate = timings["reference"]["examples_per_second"]
    result = {
        "command": command_line(), "examples": len(features), "batch_size": int(cfg["batch_size"]), "max_length": int(cfg["max_length"]),
        "mean_length": float(np.mean(lengths)), "device": str(dev), "threads": torch.get_num_threads(),
        "losses": {k: w for k, w in weights.items() if w}, "teacher": str(teacher_dir), "timings": timings,
        "speedup_cold_cache": timings["pocketbert_cold_cache"]["examples_per_second"] / reference_rate,
        "speedup_warm_cache": timings["pocketbert_warm_cache"]["examples_per_second"] / reference_rate,
    }
    write_text_atomically(Path(run_dir) / TRAIN_BENCH_RESULTS, json.dumps(result, indent=2) + "\n")
    return result
