"""What each training-speed lever is worth, measured in one run: the training loop with every lever off, each
lever alone, the stages' defaults (every lever but torch.compile), and all of them on.

    python scripts/training_levers.py --run runs/sst2-default [--examples 2000] [--device cuda] [--out results]
        [--models student,teacher] [--batch-sizes 32,256] [--preset default] [--json PATH]

The student's loop is pocketbert's distillation, teacher outputs from a filled cache; the teacher's is the
fine-tuning loop on a trainable copy of the run's teacher (hard labels, no cache). Both run on the recipe's
first `--examples` training examples, at each of `--batch-sizes` (default: the recipe's). Each setting runs
WARMUP_STEPS untimed steps, then is timed REPEATS times; the median is kept, with the spread. Every model's and
batch size's cheap rows are measured before any torch.compile row (which compiles for tens of seconds), and the
JSON is rewritten after each row, so a run stopped part-way keeps the rows it finished and lists the others
under `pending`.
Writes <out>/training_levers_<device>.json (or --json) and prints the table.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPEATS = 3
WARMUP_STEPS = 5
# "teacher_outputs_on_device" is this script's own key: whether the cached teacher outputs are moved to the GPU
# (the trainer's default where they fit) or gathered in host memory and copied over every step.
ALL_OFF = {"attention": "eager", "fused_adamw": False, "pad_to_multiple": 1, "compile": False, "cuda_graphs": False,
           "teacher_outputs_on_device": False}
LEVERS = {  # name -> the keys that turn it on
    "SDPA attention": {"attention": "sdpa"},
    "fused AdamW": {"fused_adamw": True},
    "widths rounded to multiples of 8": {"pad_to_multiple": 8},
    "teacher outputs on the GPU": {"teacher_outputs_on_device": True},
    # replays need few shapes: on their own they capture one graph per width
    "CUDA graphs": {"cuda_graphs": True, "pad_to_multiple": 8},
    "torch.compile": {"compile": True},
}
GPU_ONLY = {"CUDA graphs", "teacher outputs on the GPU"}
STUDENT_ONLY = {"teacher outputs on the GPU"}  # the teacher's fine-tuning reads no cached outputs
SLOW_TO_START = {"torch.compile"}  # measured after every other row
ALL_BUT_SLOW = "defaults (all but torch.compile)"
ALL_ON = "all on"


def levers_for(model: str, device: str | None, wanted: list[str]) -> tuple[list[str], dict[str, str]]:
    """The levers that apply to this model on this device, and why each other wanted one is left out."""
    left_out = {}
    for name in wanted:
        if name in GPU_ONLY and not (device or "").startswith("cuda"):
            left_out[name] = "GPU only"
        elif name in STUDENT_ONLY and model != "student":
            left_out[name] = "the teacher's fine-tuning reads no cached teacher outputs"
    return [name for name in wanted if name not in left_out], left_out


def settings_for(levers: list[str]) -> dict[str, dict]:
    """Row label -> keys, in the order they are measured: all off, each cheap lever alone, the defaults, then the
    slow levers alone and everything on."""
    def with_levers(names):
        keys = dict(ALL_OFF)
        for name in names:
            keys.update(LEVERS[name])
        return keys

    fast = [name for name in levers if name not in SLOW_TO_START]
    slow = [name for name in levers if name in SLOW_TO_START]
    rows = {"all off": dict(ALL_OFF)}
    rows.update({f"+ {name}": with_levers([name]) for name in fast})
    if slow:
        rows[ALL_BUT_SLOW] = with_levers(fast)
        rows.update({f"+ {name}": with_levers([name]) for name in slow})
    rows[ALL_ON] = with_levers(levers)
    return rows


class Loop:
    """One model's training loop, ready to time under any setting: its model, loss, features and cached outputs."""

    def __init__(self, bench, recipe, model: str, cached):
        from pocketbert.core.tasks import losses
        from pocketbert.train import trainer

        self.bench, self.model_kind = bench, model
        if model == "student":
            self.model, self.cfg = bench.student, bench.cfg
            self.on_device = cached
            self.on_host = None if cached is None else cached.to("cpu")
            self.step_loss_for = bench.step_loss_for
        else:
            self.model = copy.deepcopy(bench.teacher).requires_grad_(True)
            self.cfg = recipe.teacher.model_copy(update={"epochs": 1})
            task, hard_loss = bench.task, losses.hard_label_loss(self.cfg)

            def step_loss(forward_model, batch):
                return task.hard_loss(task.logits(forward_model(**trainer.model_inputs(task, batch))), batch,
                                      hard_loss), {}

            self.step_loss_for = lambda _cached: (step_loss, None)
            self.on_device = self.on_host = None

    def time(self, label: str, keys: dict, batch_size: int) -> dict:
        from pocketbert.train import trainer
        from pocketbert.train.train_bench import synchronized_clock

        bench = self.bench
        trainer_keys = {k: v for k, v in keys.items() if k != "teacher_outputs_on_device"}
        cfg = self.cfg.model_copy(update={**trainer_keys, "batch_size": batch_size})
        step_loss, extras = self.step_loss_for(self.on_device if keys["teacher_outputs_on_device"] else self.on_host)

        def loop(sample):
            trainer.set_seed(bench.seed)
            started = synchronized_clock(bench.dev)
            stats = trainer.train(copy.deepcopy(self.model), bench.task, sample, bench.pad_id, cfg, bench.dev,
                                  step_loss, bench.seed, f"{self.model_kind} {label}", batch_extras=extras)
            return synchronized_clock(bench.dev) - started, stats

        loop(bench.features[:WARMUP_STEPS * batch_size])
        runs = [loop(bench.features) for _ in range(REPEATS)]
        seconds = [s for s, _ in runs]
        median = float(np.median(seconds))
        return {"settings": keys, "seconds_each": [round(s, 3) for s in seconds],
                "examples_per_second": len(bench.features) / median, "spread": (max(seconds) - min(seconds)) / median,
                "final_loss": runs[0][1].get("final_loss"), "cuda_graphs": runs[0][1].get("cuda_graphs")}


def measure(run_dir: Path, examples: int, device: str | None, data_dir: Path | None, levers: dict[str, list[str]],
            batch_sizes: list[int] | None = None, preset: str = "default", left_out: dict | None = None,
            written=None, only_rows: tuple[str, ...] = ()) -> dict:
    """Every row of every model (levers: model -> its levers) at every batch size; `written(result)` is called
    after each row with what is measured so far."""
    from pocketbert.core.config.recipe import read_recipe
    from pocketbert.train.train_bench import distillation_bench

    recipe = read_recipe("sentiment", preset)
    bench = distillation_bench(run_dir, recipe, examples, None, data_dir, device)
    batch_sizes = batch_sizes or [bench.cfg.batch_size]
    settings = {model: settings_for(names) for model, names in levers.items()}
    slow_labels = {f"+ {name}" for name in SLOW_TO_START} | {ALL_ON}

    def is_slow(model, label):
        return label in slow_labels and any(name in SLOW_TO_START for name in levers[model])

    # every cheap row of every model and batch before any slow one: a run cut short still has all the cheap rows
    order = [(m, b, label) for m in settings for b in batch_sizes for label in settings[m] if not is_slow(m, label)]
    order += [(m, b, label) for m in settings for b in batch_sizes for label in settings[m] if is_slow(m, label)]
    if only_rows:  # a second sitting measures the rows the first did not reach
        order = [entry for entry in order if entry[2] in only_rows]
    result = {"command": " ".join(["python", *sys.argv]), "date": time.strftime("%Y-%m-%d"),
              "device": str(bench.dev), "threads": torch.get_num_threads(), "torch": torch.__version__,
              "examples": len(bench.features), "batch_sizes": batch_sizes, "repeats": REPEATS,
              "warmup_steps": WARMUP_STEPS, "levers_left_out": left_out or {},
              "rows": {m: {str(b): {} for b in batch_sizes} for m in settings},
              "pending": [f"{m}, batch {b}: {label}" for m, b, label in order]}
    with tempfile.TemporaryDirectory(prefix="pocketbert-levers-") as root:
        cached = bench.cached_outputs(Path(root), "levers")[0] if "student" in settings else None
        loops = {model: Loop(bench, recipe, model, cached) for model in settings}
        for model, batch_size, label in order:
            rows = result["rows"][model][str(batch_size)]
            rows[label] = loops[model].time(label, settings[model][label], batch_size)
            result["pending"].remove(f"{model}, batch {batch_size}: {label}")
            base = rows.get("all off", {}).get("examples_per_second")
            for row in rows.values():
                row["speedup"] = row["examples_per_second"] / base if base else None
            if written:
                written(result)
    return result


def write_json(path: Path, result: dict) -> None:
    """Whole or absent: a run killed while writing keeps the rows of the previous write."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(result, indent=2) + "\n")
    os.replace(partial, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="a run with a teacher")
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--device", default=None)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--levers", default=",".join(LEVERS), help="comma-separated, of: " + ", ".join(LEVERS))
    parser.add_argument("--models", default="student", help="comma-separated, of: student, teacher")
    parser.add_argument("--batch-sizes", default=None, help="comma-separated (default: the recipe's batch size)")
    parser.add_argument("--preset", default="default", help="sentiment recipe preset")
    parser.add_argument("--out", type=Path, default=Path("results"))
    parser.add_argument("--json", type=Path, default=None, help="the JSON file to write (default: in --out)")
    parser.add_argument("--rows", default="", help="only these rows (comma-separated labels, e.g. 'all off,all on')")
    args = parser.parse_args()
    wanted = [name.strip() for name in args.levers.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in LEVERS]
    if unknown:
        parser.error(f"unknown lever(s) {', '.join(unknown)}; choose from: {', '.join(LEVERS)}")
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not models or set(models) - {"student", "teacher"}:
        parser.error(f"--models {args.models}: choose from student, teacher")
    levers, left_out = {}, {}
    for model in models:
        levers[model], left = levers_for(model, args.device, wanted)
        left_out.update({f"{model}: {name}": why for name, why in left.items()})
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")] if args.batch_sizes else None
    rows = tuple(label.strip() for label in args.rows.split(",") if label.strip())
    known = {label for names in levers.values() for label in settings_for(names)}
    if set(rows) - known:
        parser.error(f"--rows: unknown row(s) {', '.join(sorted(set(rows) - known))}; the rows: {', '.join(sorted(known))}")
    device_name = (args.device or ("cuda" if torch.cuda.is_available() else "cpu")).split(":")[0]
    path = args.json or args.out / f"training_levers_{device_name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    result = measure(args.run, args.examples, args.device, args.data_dir, levers, batch_sizes, args.preset, left_out,
                     written=lambda r: write_json(path, r), only_rows=rows)
    print(f"{result['examples']} examples, {result['device']}, {result['threads']} threads, median of {REPEATS}")
    for model, by_batch in result["rows"].items():
        for batch_size, rows in by_batch.items():
            for label, row in rows.items():
                speedup = f"{row['speedup']:5.2f}x" if row.get("speedup") else "     -"
                print(f"  {model} batch {batch_size:>4} {label:40s} {row['examples_per_second']:8.1f} examples/s  "
                      f"{speedup}  (spread {100 * row['spread']:.1f} %)")
    for name, why in left_out.items():
        print(f"  left out: {name} ({why})")
    print(f"-> {path}")


if __name__ == "__main__":
    main()
