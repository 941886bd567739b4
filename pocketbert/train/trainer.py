"""The training loop shared by teacher fine-tuning and distillation: device choice, batching, optimiser."""

from __future__ import annotations

import random
import time
from typing import Callable

import numpy as np
import torch

from pocketbert.errors import ConfigError, PocketbertError
from pocketbert.train import checkpoint, distributed, precision
from pocketbert.core.inference import batched_logits, torch_forward

MEGABATCH_FACTOR = 50  # sort this many batches' worth of examples by length, then cut batches
SYNC_EVERY = 50  # steps between reading the running losses back from the device (each read waits for the GPU)
MAX_GRAD_NORM = 1.0
EMA_DECAY = 0.98  # of the running loss averages shown on the progress bar and kept in the manifest


class TrainingDiverged(PocketbertError):
    """The loss stopped being a finite number."""


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


def labelled_examples(data, cfg: dict, seed: int) -> list:
    """The stage's seeded subset of the training split."""
    from pocketbert.core.data import subsample

    return subsample(data.train, cfg.get("max_train_examples"), seed)


def prepare_features(task, tokenizer, data, cfg: dict, eval_cfg: dict, seed: int):
    """Eval examples, and train and eval features of seeded subsets of `data`, at the stage's length and stride."""
    from pocketbert.core.data import subsample

    train_examples = labelled_examples(data, cfg, seed)
    eval_examples = subsample(data.eval, eval_cfg.get("max_examples"), seed)
    length, stride = int(cfg["max_length"]), cfg.get("doc_stride")
    return (eval_examples, task.features(tokenizer, train_examples, length, stride),
            task.features(tokenizer, eval_examples, length, stride))


def checkpoint_spec_for(run_dir, stage: str, cfg: dict, identity: dict, features: list, resume: bool):
    from pocketbert.rundir import checkpoint_folder

    return checkpoint.CheckpointSpec(
        folder=checkpoint_folder(run_dir, stage),
        every=int(cfg["checkpoint_every"]),
        fingerprint=checkpoint.fingerprint({"stage": stage, "world_size": distributed.world_size(), **identity},
                                           features),
        resume=resume,
    )


def to_device(batch: dict[str, np.ndarray], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(v).to(device, non_blocking=True) for k, v in batch.items()}


def optimizer_step(model: torch.nn.Module, loss: torch.Tensor, optimizer, scaler) -> None:
    """Backward, clipping at MAX_GRAD_NORM and the update, through the loss scaler (a pass-through but in fp16)."""
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)


def train(
    model: torch.nn.Module,
    task,
    features: list,
    pad_id: int,
    cfg: dict,
    device: torch.device,
    step_loss: Callable[[torch.nn.Module, dict[str, torch.Tensor], list[int]], tuple[torch.Tensor, dict[str, torch.Tensor]]],
    seed: int,
    desc: str,
    checkpoint_spec: checkpoint.CheckpointSpec | None = None,
    unused_parameters: bool | None = None,
) -> dict[str, float]:
    """Optimise `model` on `features` with AdamW and linear warm-up/decay; returns loss statistics.

    step_loss(forward_model, batch, indices) computes the loss through forward_model (the model itself, or its
    DDP / torch.compile wrapper) and its named parts as tensors, which stay on the device between reads.
    unused_parameters: whether the loss leaves some parameters without a gradient (default: the task's head
    says). With a checkpoint spec, state is saved every `every` steps and, when resuming, training continues
    after the saved step: same batches, same dropout draws, same final weights.
    """
    from tqdm.auto import tqdm

    lengths = [len(f.input_ids) for f in features]
    epochs = int(cfg["epochs"])
    batch_size = int(cfg["batch_size"])
    world, rank = distributed.world_size(), distributed.rank()
    mode = precision.precision_for(device)
    precision.allow_tf32(device)

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
    scaler = precision.grad_scaler(device, mode)
    model.to(device).train()
    distributed.seed_replica(seed)
    start, running = (checkpoint.load(checkpoint_spec, model, optimizer, schedule, scaler, device, mode)
                      if checkpoint_spec else (0, {}))
    if unused_parameters is None:
        unused_parameters = task.head_skips_pooler
    forward_model = distributed.wrap(model, device, find_unused=unused_parameters)
    if cfg.get("compile"):
        forward_model = torch.compile(forward_model, dynamic=True)  # dynamic: every batch has its own length
    bar = tqdm(total=total, initial=start, desc=desc + (f" (resumed at step {start})" if start else ""), unit="step",
               disable=not distributed.is_main())
    averages = {name: torch.tensor(value, device=device) for name, value in running.items()}

    def read_back(step: int) -> dict[str, float]:
        values = {k: float(v) for k, v in zip(averages, torch.stack(list(averages.values())).tolist())}
        bad = {k: v for k, v in values.items() if not np.isfinite(v)}
        if bad:
            raise TrainingDiverged(
                f"training diverged: the running average of {', '.join(bad)} is {next(iter(bad.values()))} by step {step} "
                f"(learning rate {cfg['learning_rate']}, {mode}): lower the learning rate, or check the data")
        bar.set_postfix({k: f"{v:.3f}" for k, v in values.items()}, refresh=False)
        return values

    step = examples_done = 0
    started = time.perf_counter()
    for epoch in range(epochs):
        for idx in epoch_batches(epoch):
            step += 1
            if step <= start:
                continue
            examples_done += len(idx)
            batch = to_device(task.collate([features[i] for i in idx], pad_id), device)
            with precision.autocast(device, mode):
                loss, parts = step_loss(forward_model, batch, idx)
            optimizer_step(model, loss, optimizer, scaler)
            schedule.step()
            with torch.no_grad():
                for name, value in {"loss": loss, **parts}.items():
                    value = value.detach().float()
                    averages[name] = value if name not in averages else EMA_DECAY * averages[name] + (1 - EMA_DECAY) * value
            saving = checkpoint_spec is not None and step % checkpoint_spec.every == 0 and step < total
            if saving or step % SYNC_EVERY == 0:
                running = read_back(step)
            if saving:
                checkpoint.save(checkpoint_spec, step, model, optimizer, schedule, scaler, running, device, mode)
            bar.update()
            checkpoint.kill_if_asked("kill_after_step", step)
    running = read_back(step) if averages else running  # waits for the device: the clock below is honest
    seconds = time.perf_counter() - started
    bar.close()
    model.eval()
    return ({f"final_{k}": round(v, 4) for k, v in running.items()}
            | {"steps": total, "train_examples": len(features), "precision": mode, "loop_seconds": round(seconds, 2),
               # every process's examples: DDP trains world_size batches a step
               "examples_per_second": round(examples_done * world / seconds, 1) if seconds > 0 else None,
               "distributed": distributed.summary(model), "compiled": bool(cfg.get("compile"))})


def evaluate(model, task, examples: list, features: list, pad_id: int, eval_cfg: dict,
             device: torch.device, desc: str) -> dict[str, float]:
    """The task's metrics; under torchrun each process scores its share of the features and all gather."""
    model.to(device).eval()
    forward = torch_forward(model, task, device)

    def forward_in_precision(batch):
        with precision.autocast(device):
            return forward(batch)

    world, rank = distributed.world_size(), distributed.rank()
    mine = list(range(rank, len(features), world)) if distributed.active() else list(range(len(features)))
    logits = batched_logits(task, [features[i] for i in mine], pad_id, int(eval_cfg["batch_size"]),
                            forward_in_precision, progress=desc if distributed.is_main() else None)
    if distributed.active():
        ordered: list = [None] * len(features)
        for indices, rows in distributed.gather((mine, logits)):
            for i, row in zip(indices, rows):
                ordered[i] = row
        logits = ordered
    return task.score(examples, features, logits, eval_cfg)
