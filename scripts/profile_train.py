"""Profile the distillation step: where a step's time goes, host against kernels, with torch.profiler.

    python scripts/profile_train.py --run runs/sst2-default [--examples 640] [--device cuda] [--out results/profile]

Runs the default recipe's distillation loop (teacher outputs from the cache, filled first and not profiled) on a
seeded subset, untimed for WARMUP_STEPS steps, then under the profiler. Writes <out>/<device>.json (per-step
wall time; time inside PyTorch operators on the host; on a GPU, time the GPU spent in kernels; the top operators)
and the Chrome trace beside it (open it in chrome://tracing or https://ui.perfetto.dev).

Host time outside operators is Python, autograd's engine and the optimizer's loop; time inside operators on the
CPU includes the dispatcher and, on the CPU device, the arithmetic itself.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch

WARMUP_STEPS = 5
TOP_OPERATORS = 15


def profile(run_dir: Path, examples: int, device: str | None, data_dir: Path | None, preset: str,
            eager: bool = False, batch_size: int | None = None) -> dict:
    from pocketbert.core.config.recipe import read_recipe
    from pocketbert.train import trainer
    from pocketbert.train.train_bench import distillation_bench, synchronized_clock

    bench = distillation_bench(run_dir, read_recipe("sentiment", preset), examples, None, data_dir, device)
    if eager:
        bench.cfg = bench.cfg.model_copy(update={"cuda_graphs": False})
    if batch_size:
        bench.cfg = bench.cfg.model_copy(update={"batch_size": batch_size})
    with tempfile.TemporaryDirectory(prefix="pocketbert-profile-") as root:
        cached, _ = bench.cached_outputs(Path(root), "profile")
        step_loss, extras = bench.step_loss_for(cached)
        warmup = bench.features[:WARMUP_STEPS * bench.cfg.batch_size]
        trainer.train(copy.deepcopy(bench.student), bench.task, warmup, bench.pad_id, bench.cfg, bench.dev, step_loss,
                      bench.seed, "warm-up", batch_extras=extras)
        activities = [torch.profiler.ProfilerActivity.CPU]
        if bench.dev.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        student = copy.deepcopy(bench.student)
        with torch.profiler.profile(activities=activities) as prof:
            started = synchronized_clock(bench.dev)
            stats = trainer.train(student, bench.task, bench.features, bench.pad_id, bench.cfg, bench.dev, step_loss,
                                  bench.seed, "profiled", batch_extras=extras)
            seconds = synchronized_clock(bench.dev) - started
    steps = stats["steps"]
    events = prof.key_averages()
    top_level_ops = [e for e in events if e.key.startswith("aten::")]
    in_ops_us = sum(e.self_cpu_time_total for e in top_level_ops)
    device_us = sum(getattr(e, "self_device_time_total", 0) for e in events) if bench.dev.type == "cuda" else None
    top = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:TOP_OPERATORS]
    per_step_ms = 1000 * seconds / steps
    return {
        "prof": prof,
        "summary": {
            "command": " ".join(["python", *sys.argv]),
            "date": time.strftime("%Y-%m-%d"),
            "device": str(bench.dev),
            "host": platform.processor() or platform.machine(),
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "examples": len(bench.features), "batch_size": bench.cfg.batch_size, "steps": steps,
            "precision": stats["precision"], "attention": stats["attention"], "pad_to_multiple": stats["pad_to_multiple"],
            "cuda_graphs": stats["cuda_graphs"],
            "examples_per_second": len(bench.features) / seconds,
            "step_ms": per_step_ms,
            "aten_self_ms_per_step": in_ops_us / 1000 / steps,
            "outside_aten_ms_per_step": per_step_ms - in_ops_us / 1000 / steps,
            "gpu_kernel_ms_per_step": None if device_us is None else device_us / 1000 / steps,
            "operator_calls_per_step": sum(e.count for e in top_level_ops) / steps,
            "top_operators": [{"name": e.key, "calls_per_step": e.count / steps,
                               "self_cpu_ms_per_step": e.self_cpu_time_total / 1000 / steps} for e in top],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="a run with a teacher")
    parser.add_argument("--examples", type=int, default=640)
    parser.add_argument("--device", default=None)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--preset", default="default")
    parser.add_argument("--eager", action="store_true", help="launch every kernel from Python (no CUDA graphs)")
    parser.add_argument("--batch-size", type=int, default=None, help="default: the recipe's")
    parser.add_argument("--out", type=Path, default=Path("results/profile"))
    args = parser.parse_args()
    if args.batch_size is not None and not 1 <= args.batch_size <= args.examples:
        parser.error(f"--batch-size {args.batch_size}: give 1 to --examples ({args.examples})")
    result = profile(args.run, args.examples, args.device, args.data_dir, args.preset, args.eager, args.batch_size)
    summary = result["summary"]
    args.out.mkdir(parents=True, exist_ok=True)
    name = summary["device"].split(":")[0] + ("_eager" if args.eager and summary["device"].startswith("cuda") else "")
    result["prof"].export_chrome_trace(str(args.out / f"{name}_trace.json"))
    (args.out / f"{name}.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"{summary['examples_per_second']:.1f} examples/s, {summary['step_ms']:.1f} ms a step: "
          f"{summary['aten_self_ms_per_step']:.1f} ms inside PyTorch operators "
          f"({summary['operator_calls_per_step']:.0f} calls), {summary['outside_aten_ms_per_step']:.1f} ms outside"
          + ("" if summary["gpu_kernel_ms_per_step"] is None
             else f"; GPU kernels {summary['gpu_kernel_ms_per_step']:.2f} ms") + f" -> {args.out / (name + '.json')}")


if __name__ == "__main__":
    main()
