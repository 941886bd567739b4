"""The training loop shared by teacher fine-tuning and distillation: device choice, batching, optimiser."""

from __future__ import annotations

import contextlib
import random
from typing import Callable

import numpy as np
import torch

from pocketbert.errors import ConfigError
from pocketbert.train import checkpoint, distributed
from pocketbert.core.inference import batched_logits, torch_forward

MEGABATCH_FACTOR = 50  # sort this many batches' worth of examples by length, then cut batches


def pick_device(requested: str | None = None) -> torch.device:
    """CUDA when there is one, else the CPU; `requested` ('cpu', 'cuda', 'cuda:1') overrides."""
    if requested in (None, "auto"):
        return distributed.init(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"--device {requested} asked for, but this machine has no CUDA GPU: use --device cpu")
    try:
        device = torch.device(requested)
    except RuntimeError as exc:
        raise ConfigError(f"unknown --device '{requested}': use auto, cpu or cuda") from exc
    return distributed.init(device)


def autocast_for(device: torch.device):
    """bf16 autocast on CUDA; full precision on the CPU, where bf16 is slower on most chips."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def length_grouped_batches(lengths: list[int], batch_size: int, seed: int) -> list[list[int]]:
    """Batches of similar length (little padding), in a random order that changes with the seed."""
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    rng.shuffle(order)
    mega = batch_size * MEGABATCH_FACTOR
    batches = []
    for start in range(0, len(order), mega):
        chunk = sorted(order[start:start + mega], key=lambda i: lengths[i], reverse=True)
        batches.extend(chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size))
    rng.shuffle(batches)
    return batches


def prepare_features(task, tokenizer, data, cfg: dict, eval_cfg: dict, seed: int):
    """Eval examples, and train and eval features of seeded subsets of `data`, at the stage's length and stride."""
    from pocketbert.core.data import subsample

    train_examples = subsample(data.train, cfg.get("max_train_examples"), seed)
    eval_examples = subsample(data.eval, eval_cfg.get("max_examples"), seed)
    length, stride = int(cfg["max_length"]), cfg.get("doc_stride")
    return (eval_examples, task.features(tokenizer, train_examples, length, stride),
            task.features(tokenizer, eval_examples, length, stride))


def checkpoint_spec_for(run_dir, stage: str, cfg: dict, identity: dict, features: list, resume: bool):
    from pocketbert.rundir import checkpoint_folder

    return checkpoint.CheckpointSpec(
        folder=checkpoint_folder(run_dir, stage),
        every=int(cfg["checkpoint_every"]),
        fingerprint=checkpoint.fingerprint({"stage": stage, **identity}, features),
        resume=resume,
    )


def to_device(batch: dict[str, np.ndarray], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(v).to(device, non_blocking=True) for k, v in batch.items()}


def train(
    model: torch.nn.Module,
    task,
    features: list,
    pad_id: int,
    cfg: dict,
    device: torch.device,
    step_loss: Callable[[torch.nn.Module, dict[str, torch.Tensor], list[int]], tuple[torch.Tensor, dict[str, float]]],
    seed: int,
    desc: str,
    checkpoint_spec: checkpoint.CheckpointSpec | None = None,
) -> dict[str, float]:
    """Optimise `model` on `features` with AdamW and linear warm-up/decay; returns loss statistics.

    step_loss(forward_model, batch, indices) computes the loss through forward_model: the model itself, or
    its DDP / torch.compile wrapper. With a checkpoint spec, state is saved every `every` steps and, when
    resuming, training continues after the saved step: same batches, same dropout draws, same final weights.
    """
    from tqdm.auto import tqdm

    lengths = [len(f.input_ids) for f in features]
    epochs = int(cfg["epochs"])
    batch_size = int(cfg["batch_size"])
    world, rank = distributed.world_size(), distributed.rank()

    def epoch_batches(epoch: int) -> list[list[int]]:
        batches = length_grouped_batches(lengths, batch_size, seed + epoch)
        if world > 1:  # every process takes as many steps, or DDP's all-reduce would wait forever
            batches = batches[rank:len(batches) // world * world:world]
        return batches

    steps_per_epoch = len(epoch_batches(0))
    total = max(1, epochs * steps_per_epoch)
    warmup = int(total * float(cfg["warmup_ratio"]))
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=float(cfg["learning_rate"]), weight_decay=float(cfg["weight_decay"]),
        fused=device.type == "cuda",
    )
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: (step + 1) / max(1, warmup) if step < warmup else max(0.0, (total - step) / max(1, total - warmup))
    )
    model.to(device).train()
    start, running = (checkpoint.load(checkpoint_spec, model, optimizer, schedule)
                      if checkpoint_spec else (0, {}))
    forward_model = distributed.wrap(model, device, find_unused=task.head_skips_pooler)
    if cfg.get("compile"):
        forward_model = torch.compile(forward_model, dynamic=True)  # dynamic: every batch has its own length
    bar = tqdm(total=total, initial=start, desc=desc + (f" (resumed at step {start})" if start else ""), unit="step",
               disable=not distributed.is_main())
    step = 0
    for epoch in range(epochs):
        for idx in epoch_batches(epoch):
            step += 1
            if step <= start:
                continue
            batch = to_device(task.collate([features[i] for i in idx], pad_id), device)
            with autocast_for(device):
                loss, parts = step_loss(forward_model, batch, idx)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
            for name, value in {"loss": loss.item(), **parts}.items():
                running[name] = 0.98 * running.get(name, value) + 0.02 * value
            bar.set_postfix({k: f"{v:.3f}" for k, v in running.items()}, refresh=False)
            bar.update()
            if checkpoint_spec and step % checkpoint_spec.every == 0 and step < total and distributed.is_main():
                checkpoint.save(checkpoint_spec, step, model, optimizer, schedule, running)
            checkpoint.kill_if_asked("kill_after_step", step)
    bar.close()
    model.eval()
    return ({f"final_{k}": round(v, 4) for k, v in running.items()}
            | {"steps": total, "train_examples": len(features), "distributed": distributed.summary(model),
               "compiled": bool(cfg.get("compile"))})


def evaluate(model, task, examples: list, features: list, pad_id: int, eval_cfg: dict,
             device: torch.device, desc: str) -> dict[str, float]:
    model.to(device).eval()
    logits = batched_logits(task, features, pad_id, int(eval_cfg["batch_size"]),
                            torch_forward(model, task, device), progress=desc)
    return task.score(examples, features, logits, eval_cfg)
