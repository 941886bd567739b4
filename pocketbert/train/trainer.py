"""The training loop shared by teacher fine-tuning and distillation: device choice, batching, optimiser."""

from __future__ import annotations

import contextlib
import math
import random
import sys
import time
from typing import Callable

import numpy as np
import torch

from pocketbert.core.config.recipe import EvalSection, TrainingSection
from pocketbert.core.errors import ConfigError, PocketbertError
from pocketbert.train import batches_ahead, checkpoint, cuda_graphs, distributed, epoch_stop, precision
from pocketbert.core.students.inference import batched_logits, torch_forward
# the model trains with sdpa, leaves eager
from pocketbert.core.students.models import attention_kernel as training_attention

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


def labelled_examples(data, cfg: TrainingSection, seed: int) -> list:
    """The stage's seeded subset of the training split (less the validation rows, when epochs are scored)."""
    from pocketbert.core.tasks.data import subsample

    pool = data.train if cfg.stop_patience is None else epoch_stop.held_out_split(
        data.train, cfg.validation_examples, seed)[0]
    return subsample(pool, cfg.max_train_examples, seed)


def validation_examples(data, cfg: TrainingSection, seed: int) -> list:
    """The training split's rows held out to score each epoch (train/epoch_stop.py)."""
    return epoch_stop.held_out_split(data.train, cfg.validation_examples, seed)[1]


def prepare_features(task, tokenizer, data, cfg: TrainingSection, eval_cfg: EvalSection, seed: int):
    """Eval examples, and train and eval features of seeded subsets of `data`, at the stage's length and stride."""
    from pocketbert.core.tasks.data import EVAL_SAMPLE_SEED, subsample

    train_examples = labelled_examples(data, cfg, seed)
    eval_examples = subsample(data.eval, eval_cfg.max_examples, EVAL_SAMPLE_SEED)
    length, stride = cfg.max_length, cfg.doc_stride
    return (eval_examples, task.features(tokenizer, train_examples, length, stride),
            task.features(tokenizer, eval_examples, length, stride))


def checkpoint_spec_for(run_dir, stage: str, cfg: TrainingSection, identity: dict, features: list, resume: bool):
    from pocketbert.core.run.run_files import checkpoint_folder

    return checkpoint.CheckpointSpec(
        folder=checkpoint_folder(run_dir, stage),
        every=cfg.checkpoint_every,
        fingerprint=checkpoint.fingerprint({"stage": stage, "world_size": distributed.world_size(), **identity},
                                           features),
        resume=resume,
    )


def host_to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on `device` without making the host wait: pinned first, so the copy is truly asynchronous
    (a copy from pageable memory blocks until the GPU has run everything queued before it)."""
    if torch.device(device).type == "cuda" and tensor.device.type == "cpu":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def to_device(batch: dict[str, np.ndarray], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: host_to_device(torch.from_numpy(v), device) for k, v in batch.items()}


def model_inputs(task, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A BERT-family model's inputs for a training step, the 2-D mask given as the additive 4-D bias the model
    takes as it is. From a 2-D mask its own mask builder asks the device whether any token is padding: a host
    sync in every forward. The bias has the values that builder makes, in the dtype the step computes in."""
    inputs = {k: batch[k] for k in task.input_names}
    mask = inputs["attention_mask"]
    kind = mask.device.type
    autocasting = kind in precision.AUTOCAST_DEVICES and torch.is_autocast_enabled(kind)
    dtype = torch.get_autocast_dtype(kind) if autocasting else torch.float32
    inputs["attention_mask"] = (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min
    return inputs


SEQUENCE_PADDING = {"input_ids": None, "attention_mask": 0, "token_type_ids": 0}  # None: the tokenizer's pad id


def pad_to(batch: dict[str, np.ndarray], length: int, pad_id: int) -> dict[str, np.ndarray]:
    """Every per-token array widened to `length` columns: ids with the pad id, masks and types with 0, per-token
    labels (masked-LM) with IGNORE_LABEL, so the widened batch trains exactly as the narrow one."""
    from pocketbert.core.tasks.losses import IGNORE_LABEL

    width = batch["input_ids"].shape[1]
    if length == width:
        return batch
    out = dict(batch)
    for name, array in batch.items():
        if array.ndim != 2 or array.shape[1] != width:
            continue
        value = SEQUENCE_PADDING.get(name, IGNORE_LABEL)
        out[name] = np.pad(array, ((0, 0), (0, length - width)), constant_values=pad_id if value is None else value)
    return out


def pad_multiple_for(cfg: TrainingSection, device: torch.device) -> int:
    """The recipe's pad_to_multiple, or the device's default: a few fixed widths on a GPU (shapes that CUDA
    graphs and compiled kernels reuse), none on the CPU (where every padded token costs its full arithmetic)."""
    if cfg.pad_to_multiple:
        return cfg.pad_to_multiple
    return GPU_PAD_MULTIPLE if torch.device(device).type == "cuda" else 1


GPU_PAD_MULTIPLE = 8
FUSED_ADAMW_DEVICES = ("cpu", "cuda")  # where torch has a fused AdamW kernel


def collate_padded(task, features: list, pad_id: int, multiple: int, max_length: int | None) -> dict[str, np.ndarray]:
    """The task's batch, its width rounded up to `multiple` (never past max_length)."""
    batch = task.collate(features, pad_id)
    width = batch["input_ids"].shape[1]
    rounded = -(-width // multiple) * multiple
    return pad_to(batch, min(rounded, max(width, int(max_length))) if max_length else rounded, pad_id)


def capped_batch_size(asked: int, examples: int, world: int) -> int:
    """The batch each process trains with: at most its share of the training examples. A larger batch never
    exists (an epoch is one smaller batch), and scaling the learning rate for it would multiply the rate by
    sqrt(asked / base) for a batch that is not trained."""
    return max(1, min(asked, examples // max(1, world)))


def effective_learning_rate(cfg: TrainingSection, global_batch: int) -> float:
    """The recipe's learning rate, scaled to the global batch when the recipe names the batch it was set for."""
    base = cfg.base_batch_size
    if not base:
        return cfg.learning_rate
    ratio = global_batch / base
    return cfg.learning_rate * (math.sqrt(ratio) if cfg.lr_scaling == "sqrt" else ratio)


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
    cfg: TrainingSection,
    device: torch.device,
    step_loss: Callable[[torch.nn.Module, dict[str, torch.Tensor]], tuple[torch.Tensor, dict[str, torch.Tensor]]],
    seed: int,
    desc: str,
    checkpoint_spec: checkpoint.CheckpointSpec | None = None,
    unused_parameters: bool | None = None,
    batch_extras: Callable[[list[int], int], dict[str, torch.Tensor]] | None = None,
    after_epoch: Callable[[int, torch.nn.Module], bool] | None = None,
    max_steps: int | None = None,
    dropout: bool = True,
) -> dict[str, float]:
    """Optimise `model` on `features` with AdamW and linear warm-up/decay; returns loss statistics.

    step_loss(forward_model, batch) computes the loss through forward_model (the model itself, or its DDP /
    torch.compile wrapper) and its named parts as tensors, which stay on the device between reads. It reads
    only the batch, so a step can be replayed as a CUDA graph: what depends on which features are in the batch
    (cached teacher outputs) comes from batch_extras(indices, width), device tensors added to the batch.
    unused_parameters: whether the loss leaves some parameters without a gradient (default: the task's head
    says). With a checkpoint spec, state is saved every `every` steps and, when resuming, training continues
    after the saved step: same batches, same dropout draws, same final weights. after_epoch(epoch, model), called
    at the end of each epoch this run reaches, stops training when it returns True. max_steps: train that many
    steps, the schedule spanning them, over as many epochs as they take (None: cfg.epochs). dropout=False trains
    in eval mode, for a loss whose targets the model must match exactly.
    """
    from tqdm.auto import tqdm

    lengths = [len(f.input_ids) for f in features]
    epochs = cfg.epochs
    world, rank = distributed.world_size(), distributed.rank()
    asked_batch = cfg.batch_size
    batch_size = capped_batch_size(asked_batch, len(features), world)
    if batch_size < asked_batch and distributed.is_main():
        tqdm.write(f"note: a batch of {asked_batch} is more than the {len(features)} training examples "
                   f"{'hold' if world == 1 else f'share among {world} processes'}: training with batches of "
                   f"{batch_size}, the learning rate scaled for {batch_size * world}", file=sys.stderr)
    mode = precision.precision_for(device)
    precision.allow_tf32(device)

    def epoch_batches(epoch: int) -> list[list[int]]:
        batches = length_grouped_batches(lengths, batch_size, seed + epoch)
        if world > 1:  # every process takes as many steps, or DDP's all-reduce would wait forever
            batches = batches[rank:len(batches) // world * world:world]
        return batches

    from pocketbert.core.tasks.registry import features_digest

    distributed.check_same_features(features_digest(features, with_targets=True).hexdigest(), "training features")
    steps_per_epoch = len(epoch_batches(0))
    if max_steps is not None:
        epochs = -(-max_steps // max(1, steps_per_epoch))
    total = max(1, epochs * steps_per_epoch) if max_steps is None else max_steps
    warmup = int(total * cfg.warmup_ratio)
    global_batch = batch_size * world
    learning_rate = effective_learning_rate(cfg, global_batch)
    no_graphs = cuda_graphs.unavailable_reason(cfg, device, world, mode)
    fused = cfg.fused_adamw and device.type in FUSED_ADAMW_DEVICES
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        # captured steps read the learning rate from the device, where the schedule writes it
        lr=learning_rate if no_graphs else torch.tensor(learning_rate, device=device),
        weight_decay=cfg.weight_decay, fused=fused, capturable=no_graphs is None,
    )
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: (step + 1) / max(1, warmup) if step < warmup else max(0.0, (total - step) / max(1, total - warmup))
    )
    scaler = precision.grad_scaler(device, mode)
    model.to(device).train(dropout)
    distributed.seed_replica(seed)
    start, running = (checkpoint.load(checkpoint_spec, model, optimizer, schedule, scaler, device, mode)
                      if checkpoint_spec else (0, {}))
    if no_graphs is None:
        learning_rate_on_device(optimizer, device)  # a loaded state brings the rate back as a number
    if unused_parameters is None:
        unused_parameters = task.head_skips_pooler
    forward_model = distributed.wrap(model, device, find_unused=unused_parameters)
    if cfg.compile:
        forward_model = torch.compile(forward_model, dynamic=True)  # dynamic: every batch has its own length
    bar = tqdm(total=total, initial=start, desc=desc + (f" (resumed at step {start})" if start else ""), unit="step",
               disable=not distributed.is_main())
    averages = {name: torch.tensor(value, device=device) for name, value in running.items()}
    multiple, max_length = pad_multiple_for(cfg, device), cfg.max_length

    def read_back(step: int) -> dict[str, float]:
        values = {k: float(v) for k, v in zip(averages, torch.stack(list(averages.values())).tolist())}
        bad = {k: v for k, v in values.items() if not np.isfinite(v)}
        if bad:
            raise TrainingDiverged(
                f"training diverged: the running average of {', '.join(bad)} is {next(iter(bad.values()))} by step {step} "
                f"(learning rate {learning_rate:g}, {mode}): lower the learning rate, or check the data")
        bar.set_postfix({k: f"{v:.3f}" for k, v in values.items()}, refresh=False)
        return values

    def queue_step(batch: dict[str, torch.Tensor]) -> None:
        train_step(forward_model, model, batch, step_loss, optimizer, scaler, averages, device, mode)

    def written_by_a_step() -> list[torch.Tensor]:
        moments = [v for state in optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor)]
        return [*model.parameters(), *model.buffers(), *moments, *averages.values()]

    graphed = None if no_graphs else cuda_graphs.GraphedSteps(
        queue_step, lambda: optimizer.zero_grad(set_to_none=True), written_by_a_step)

    def collate(idx: list[int]) -> dict[str, np.ndarray]:
        return collate_padded(task, [features[i] for i in idx], pad_id, multiple, max_length)

    def one_step(batch: dict[str, torch.Tensor]) -> None:
        (graphed or queue_step)(batch)
        schedule.step()

    step = examples_done = 0
    started = time.perf_counter()
    checkpoint.stall_if_asked(rank)
    writer = checkpoint.CheckpointWriter()
    # The bar closes whatever happens, so an error's one line starts a line of its own.
    with contextlib.closing(bar), training_attention(model, cfg.attention), \
            distributed.collectives_bounded(), checkpoints_written(writer):
        for epoch in range(epochs):
            batches = epoch_batches(epoch)[:total - step]  # the last epoch of max_steps stops at its step
            skipped = min(len(batches), max(0, start - step))  # steps a resumed run has already taken
            step += skipped
            for idx, batch in batches_ahead.prepared_batches(batches[skipped:], collate,
                                                             lambda arrays: to_device(arrays, device), batch_extras,
                                                             batches_ahead.steps_ahead_for(device)):
                step += 1
                examples_done += len(idx)
                one_step(batch)
                saving = checkpoint_spec is not None and step % checkpoint_spec.every == 0 and step < total
                if saving or step % SYNC_EVERY == 0:
                    running = read_back(step)
                if saving:
                    checkpoint.save(checkpoint_spec, step, model, optimizer, schedule, scaler, running, device, mode,
                                    writer)
                bar.update()
                checkpoint.kill_if_asked("kill_after_step", step, writer)
            if after_epoch is not None and step >= start and after_epoch(epoch, model):
                break
        running = read_back(step) if averages else running  # waits for the device: the clock below is honest
    seconds = time.perf_counter() - started
    model.eval()
    return ({f"final_{k}": round(v, 4) for k, v in running.items()}
            | {"steps": total, "train_examples": len(features), "precision": mode, "loop_seconds": round(seconds, 2),
               # every process's examples: DDP trains world_size batches a step
               "examples_per_second": round(examples_done * world / seconds, 1) if seconds > 0 else None,
               "global_batch_size": global_batch, "learning_rate": learning_rate,
               **({"batch_size_asked": asked_batch} if batch_size < asked_batch else {}), "pad_to_multiple": multiple,
               "attention": cfg.attention, "fused_adamw": optimizer.defaults.get("fused") or False,
               "distributed": distributed.summary(model), "compiled": cfg.compile,
               "cuda_graphs": graphed.report() if graphed else {"used": False, "not_used_because": no_graphs}})


@contextlib.contextmanager
def checkpoints_written(writer: checkpoint.CheckpointWriter):
    """Training ends with its last checkpoint on disk; a write that failed is raised unless training did."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            writer.wait()
        raise
    writer.wait()


def train_step(forward_model, model, batch: dict[str, torch.Tensor], step_loss, optimizer, scaler,
               averages: dict[str, torch.Tensor], device: torch.device, mode: str) -> None:
    """One optimisation step, queued on the device: nothing in it reads a value back to the host, so the host
    runs ahead of a GPU and the step can be captured as a CUDA graph (tests run it on meta tensors, which have
    no values to read). The running averages are updated in place, where a replayed graph writes them."""
    with precision.autocast(device, mode):
        loss, parts = step_loss(forward_model, batch)
    optimizer_step(model, loss, optimizer, scaler)
    with torch.no_grad():
        for name, value in {"loss": loss, **parts}.items():
            value = value.detach().float()
            if name in averages:
                averages[name].copy_(EMA_DECAY * averages[name] + (1 - EMA_DECAY) * value)
            else:
                averages[name] = value.clone()


def learning_rate_on_device(optimizer, device: torch.device) -> None:
    """Every parameter group's learning rate as a tensor on `device`, which the schedule fills in place. A
    checkpoint loads it as a host tensor, which the fused AdamW reads as a number: a CUDA graph captured after a
    resume would then replay the rate of its capture step for the rest of the run."""
    wanted = torch.device(device)
    for group in optimizer.param_groups:
        rate = group["lr"]
        placed = isinstance(rate, torch.Tensor) and rate.device.type == wanted.type and (
            wanted.index is None or rate.device.index == wanted.index)
        if not placed:
            group["lr"] = torch.tensor(float(rate), device=device)


def evaluate(model, task, examples: list, features: list, pad_id: int, eval_cfg: EvalSection,
             device: torch.device, desc: str) -> dict[str, float]:
    """The task's metrics; under torchrun each process scores its share of the features and all gather."""
    model.to(device).eval()
    forward = torch_forward(model, task, device)

    def forward_in_precision(batch):
        with precision.autocast(device):
            return forward(batch)

    world, rank = distributed.world_size(), distributed.rank()
    mine = list(range(rank, len(features), world)) if distributed.active() else list(range(len(features)))
    logits = batched_logits(task, [features[i] for i in mine], pad_id, eval_cfg.batch_size,
                            forward_in_precision, progress=desc if distributed.is_main() else None)
    shares = None
    if distributed.active():
        ordered: list = [None] * len(features)
        gathered = distributed.gather((mine, logits))
        for indices, rows in gathered:
            for i, row in zip(indices, rows):
                ordered[i] = row
        logits, shares = ordered, [len(indices) for indices, _ in gathered]
    metrics = task.score(examples, features, logits, eval_cfg)
    return metrics if shares is None else {**metrics, "features_scored_by_process": shares}
