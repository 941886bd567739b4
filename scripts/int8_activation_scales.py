"""The int8 ONNX model's activation scales side by side: one scale per call (ONNX Runtime's dynamic quantization)
against one per token (export.int8_activation_scale), each run one input per call as the apps run it, on examples
the run's student never trained on (QA: questions on passages outside its training subset; sentiment: training rows
outside it), so that the choice is not made on the eval split the export's gates use.

    python scripts/int8_activation_scales.py runs/squad-default --examples 600 --data-dir ../shared/data

Prints one line per scale: the share of the student's answers kept, the task metric's drop with its paired standard
error, the file's size, and the median time per input at 1 thread (all inputs, in turn, on this machine: compare
times only within one run).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

UNSEEN_SEED = 778  # draws the unseen examples; not the run's seed, which drew its training subset
THREADS = 1


def student_recipe(run_dir: Path):
    """The run's student's recorded recipe, typed."""
    from pocketbert.core.config.recipe import complete_recipe
    from pocketbert.core.run.manifest import read_manifest

    return complete_recipe(read_manifest(run_dir / "student").config.recipe)


def unseen_examples(run_dir: Path, data_dir: Path | None, n: int) -> tuple[object, list]:
    """(task data, n of the training split's examples whose separation key the student's training subset lacks)."""
    from pocketbert.core.tasks.data import separation_key, subsample
    from pocketbert.core.tasks.task_data import load_task_data
    from pocketbert.train.trainer import labelled_examples

    recipe = student_recipe(run_dir)
    data = load_task_data(recipe.dataset, recipe.task, data_dir, None, None, recipe.seed)
    seen = {separation_key(e) for e in labelled_examples(data, recipe.distill, recipe.seed)}
    return data, subsample([e for e in data.train if separation_key(e) not in seen], n, UNSEEN_SEED)


def compare(student_dir: Path, examples: list, max_length: int, workdir: Path) -> list[dict]:
    """Per scale: agreement with the student, the primary metric's drop and its standard error, size, ms/input."""
    from pocketbert.core.config.int8_budgets import INT8_ACTIVATION_SCALES
    from pocketbert.core.config.recipe import EvalSection
    from pocketbert.core.students.inference import batched_logits, ort_forward, ort_session, torch_forward
    from pocketbert.core.students.stage_folder import load_stage_model
    from pocketbert.export.checks import parity
    from pocketbert.export.programs import onnx_export

    model, tokenizer, task, _ = load_stage_model(student_dir)
    evaluation = EvalSection()
    features = task.features(tokenizer, examples, max_length)
    reference = batched_logits(task, features, tokenizer.pad_token_id, 32, torch_forward(model, task))
    theirs = task.answers(examples, features, reference, evaluation)
    fp32 = onnx_export.export_onnx(model, task, workdir / "model.onnx")
    rows = []
    for scale in INT8_ACTIVATION_SCALES:
        path = onnx_export.quantize_int8(fp32, workdir / f"model.{scale}.onnx", [], activation_scale=scale)
        forward = ort_forward(ort_session(path, THREADS), task)
        seconds = []

        def timed(batch, forward=forward, seconds=seconds):
            started = time.perf_counter()
            out = forward(batch)
            seconds.append(time.perf_counter() - started)
            return out

        logits = batched_logits(task, features, tokenizer.pad_token_id, 1, timed)
        ours = task.answers(examples, features, logits, evaluation)
        drops = task.primary_scores(examples, features, theirs) - task.primary_scores(examples, features, ours)
        rows.append({"activation_scale": scale, "examples": len(examples), "inputs": len(features),
                     "agreement": float(np.mean([a == b for a, b in zip(ours, theirs)])),
                     "metric": task.primary_metric, "drop": float(drops.mean()),
                     "drop_standard_error": parity.drop_standard_error(task, examples, features, ours, theirs),
                     "megabytes": path.stat().st_size / 1e6, "median_ms": 1000 * float(np.median(seconds))})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a run directory with a student/")
    parser.add_argument("--examples", type=int, default=600)
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args()
    recipe = student_recipe(args.run)
    _, examples = unseen_examples(args.run, args.data_dir, args.examples)
    with tempfile.TemporaryDirectory(prefix="pocketbert-int8-scales-") as tmp:
        for row in compare(args.run / "student", examples, recipe.distill.max_length, Path(tmp)):
            print(f"{row['activation_scale']:>9}: agreement {row['agreement']:.3f}, {row['metric']} drop "
                  f"{row['drop']:+.3f} (standard error {row['drop_standard_error']:.3f}) on {row['examples']} examples "
                  f"({row['inputs']} inputs), {row['megabytes']:.1f} MB, {row['median_ms']:.1f} ms/input at "
                  f"{THREADS} thread")


if __name__ == "__main__":
    main()
