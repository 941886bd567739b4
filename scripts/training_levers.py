"""What each training-speed lever is worth, measured in one run: the distillation loop with every lever off, each
lever alone, and all of them on.

    python scripts/training_levers.py --run runs/sst2-default [--examples 2000] [--device cuda] [--out results]

The loop is pocketbert's, teacher outputs from a filled cache, on the default recipe's first `--examples`
training examples. Each setting runs WARMUP_STEPS untimed steps, then is timed REPEATS times; the median is
kept, with the spread. Writes <out>/training_levers_<device>.json and prints the table.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPEATS = 3
WARMUP_STEPS = 5
ALL_OFF = {"attention": "eager", "fused_adamw": False, "pad_to_multiple": 1, "compile": False, "cuda_graphs": False}
LEVERS = {  # name -> the recipe keys that turn it on
    "SDPA attention": {"attention": "sdpa"},
    "fused AdamW": {"fused_adamw": True},
    "widths rounded to multiples of 8": {"pad_to_multiple": 8},
    "torch.compile": {"compile": True},
    # replays need few shapes: on their own they capture one graph per width
    "CUDA graphs": {"cuda_graphs": True, "pad_to_multiple": 8},
}
GPU_ONLY = {"CUDA graphs"}


def measure(run_dir: Path, examples: int, device: str | None, data_dir: Path | None, levers: list[str]) -> dict:
    from pocketbert.core.recipe import read_recipe
    from pocketbert.train import trainer
    from pocketbert.train.train_bench import distillation_bench, synchronized_clock

    bench = distillation_bench(run_dir, read_recipe("sentiment", "default"), examples, None, data_dir, device)
    settings = {"all off": dict(ALL_OFF)}
    settings.update({f"+ {name}": {**ALL_OFF, **LEVERS[name]} for name in levers})
    settings["all on"] = {k: v for name in levers for k, v in LEVERS[name].items()} | {
        k: v for k, v in ALL_OFF.items() if not any(k in LEVERS[name] for name in levers)}
    rows = {}
    with tempfile.TemporaryDirectory(prefix="pocketbert-levers-") as root:
        cached, _ = bench.cached_outputs(Path(root), "levers")
        step_loss, extras = bench.step_loss_for(cached)
        for label, keys in settings.items():
            cfg = bench.cfg.model_copy(update=keys)

            def loop(sample):
                trainer.set_seed(bench.seed)
                started = synchronized_clock(bench.dev)
                stats = trainer.train(copy.deepcopy(bench.student), bench.task, sample, bench.pad_id, cfg, bench.dev,
                                      step_loss, bench.seed, label, batch_extras=extras)
                return synchronized_clock(bench.dev) - started, stats

            loop(bench.features[:WARMUP_STEPS * cfg.batch_size])
            runs = [loop(bench.features) for _ in range(REPEATS)]
            seconds = [s for s, _ in runs]
            median = float(np.median(seconds))
            rows[label] = {"settings": keys, "seconds_each": [round(s, 3) for s in seconds],
                           "examples_per_second": len(bench.features) / median,
                           "spread": (max(seconds) - min(seconds)) / median,
                           "final_loss": runs[0][1].get("final_loss"), "cuda_graphs": runs[0][1].get("cuda_graphs")}
    base = rows["all off"]["examples_per_second"]
    for row in rows.values():
        row["speedup"] = row["examples_per_second"] / base
    return {"command": " ".join(["python", *sys.argv]), "date": time.strftime("%Y-%m-%d"),
            "device": str(bench.dev), "threads": torch.get_num_threads(), "torch": torch.__version__,
            "examples": len(bench.features), "batch_size": bench.cfg.batch_size, "repeats": REPEATS,
            "warmup_steps": WARMUP_STEPS, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="a run with a teacher")
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--device", default=None)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--levers", default=",".join(LEVERS), help="comma-separated, of: " + ", ".join(LEVERS))
    parser.add_argument("--out", type=Path, default=Path("results"))
    args = parser.parse_args()
    levers = [name.strip() for name in args.levers.split(",") if name.strip()]
    if not (args.device or "").startswith("cuda"):
        levers = [name for name in levers if name not in GPU_ONLY]
    unknown = [name for name in levers if name not in LEVERS]
    if unknown:
        parser.error(f"unknown lever(s) {', '.join(unknown)}; choose from: {', '.join(LEVERS)}")
    result = measure(args.run, args.examples, args.device, args.data_dir, levers)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"training_levers_{result['device'].split(':')[0]}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{result['examples']} examples, batch {result['batch_size']}, {result['device']}, "
          f"{result['threads']} threads, median of {REPEATS}")
    for label, row in result["rows"].items():
        print(f"  {label:40s} {row['examples_per_second']:8.1f} examples/s  {row['speedup']:5.2f}x  "
              f"(spread {100 * row['spread']:.1f} %)")
    print(f"-> {path}")


if __name__ == "__main__":
    main()
