"""What the compiled MIL evaluator saves the Core ML parity gate: milliseconds per sequence of coremltools' value
inference (the evaluator before) and of the compiled evaluator, in one process on one run's Core ML programs, and
the wall time of exports.

    python scripts/mil_evaluator_speed.py runs/sst2-default --data-dir ../shared/data \
        --exports ../main/runs/sst2-default runs/sst2-default > results/mil_evaluator/speed.json

The programs are every .mlpackage of RUN/export and the Core ML program inside model.coreml.pte. The inputs are
those the gate feeds them: the eval examples of the run's recipe, tokenized by the exported tokenizer. The
compiled evaluator runs all of them in the gate's batches (rows of one width together, compiling each new width
on the way, loading included); value inference, one row at a time, runs a seeded sample of --reference-rows of
them (its time per row does not depend on batching), and the two are compared on that sample. --exports: runs
whose export/manifest.json (wall time, commit) and parity.json (each Core ML program's seconds per sequence) are
read and printed.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np

from pocketbert.core.tasks.data import subsample
from pocketbert.core.students.inference import batched_logits, import_coremltools
from pocketbert.core.students.models import load_tokenizer
from pocketbert.core.config.recipe import complete_recipe
from pocketbert.core.students.stage_folder import read_task_info
from pocketbert.core.tasks.task_data import load_task_data
from pocketbert.core.tasks.registry import make_task
from pocketbert.export.programs import coreml
from pocketbert.export.programs.executorch_export import MIN_SEQUENCE, coreml_delegate_package
from pocketbert.export.evaluators.forward import one_row_at_a_time
from pocketbert.export.evaluators.mil_eval import MILEvaluator
from pocketbert.export.evaluators.mil_reference import ValueInferenceInterpreter
from pocketbert.core.run.manifest import read_manifest
from pocketbert.core.run.stage_records import ExportRecord
from pocketbert.core.run.run_files import EXECUTORCH_COREML, EXPORT_DIR, PARITY, STUDENT_DIR
from pocketbert.core.run.user_paths import recorded_dataset

REFERENCE_ROWS = 100


def gate_inputs(run: Path, data_dir: Path | None):
    """(task, features, pad id, eval batch size): the eval examples as the export's parity gate tokenizes them."""
    info = read_task_info(run / STUDENT_DIR)
    task = make_task(info["task"], info["label_names"])
    recipe = complete_recipe(read_manifest(run / STUDENT_DIR).config.recipe)
    config = read_manifest(run / EXPORT_DIR, ExportRecord).config
    seed = recipe.seed
    data = load_task_data(recorded_dataset(run, recipe.dataset), task.name, data_dir, None,
                          task.label_names or None, seed)
    examples = subsample(data.eval, config.parity_examples, seed)
    tokenizer = load_tokenizer(str(run / EXPORT_DIR))
    features = task.features(tokenizer, examples, config.max_length, info.get("doc_stride"))
    features = features[:task.features_for_examples(features, config.coreml_parity_examples)]
    return task, features, tokenizer.pad_token_id, recipe.eval.batch_size


def timed_logits(task, features, pad_id: int, batch_size: int, open_forward) -> tuple[list, float]:
    """Logits and milliseconds per sequence, opening the program included (as the gate times it)."""
    started = time.perf_counter()
    logits = batched_logits(task, features, pad_id, batch_size, open_forward())
    return logits, 1000 * (time.perf_counter() - started) / len(features)


def forwards(package: Path, task, delegated: bool):
    """(the compiled evaluator's forward, value inference's) as the gate opens them; a delegated program's outputs
    are taken in the order it returns them, each sequence at least MIN_SEQUENCE long."""
    if not delegated:
        return (lambda: coreml.coreml_forward(package, task),
                lambda: coreml.coreml_forward(package, task, reference=True))

    def reference():
        interpreter = ValueInferenceInterpreter(package)
        return coreml.program_forward(one_row_at_a_time(interpreter.predict), interpreter.metadata, task,
                                      interpreter.saved.output_names, min_length=MIN_SEQUENCE)

    def compiled():
        evaluator = MILEvaluator(package)
        return coreml.program_forward(evaluator.predict, evaluator.metadata, task, evaluator.output_names,
                                      min_length=MIN_SEQUENCE)
    return compiled, reference


def program_figures(package: Path, task, features, pad_id: int, batch_size: int, sample: list[int],
                    delegated: bool) -> dict:
    compiled_forward, reference_forward = forwards(package, task, delegated)
    compiled, compiled_ms = timed_logits(task, features, pad_id, batch_size, compiled_forward)
    reference, reference_ms = timed_logits(task, [features[k] for k in sample], pad_id, 1, reference_forward)
    ours = [compiled[k] for k in sample]
    return {
        "value_inference_ms_per_sequence": round(reference_ms, 2),
        "compiled_ms_per_sequence": round(compiled_ms, 2),
        "speedup": round(reference_ms / compiled_ms, 1),
        "compiled_sequences": len(features),
        "value_inference_sequences": len(sample),
        "max_abs_diff_on_sample": float(max(np.max(np.abs(a - b)) for a, b in zip(ours, reference))),
        "same_answers_on_sample": float(np.mean([np.array_equal(np.argmax(a, axis=-1), np.argmax(b, axis=-1))
                                                 for a, b in zip(ours, reference)])),
    }


def export_figures(run: Path) -> dict:
    manifest = read_manifest(run / EXPORT_DIR, ExportRecord)
    parity = json.loads((run / EXPORT_DIR / PARITY).read_text())
    return {"wall_time_s": manifest.wall_time_s, "git_commit": manifest.git_commit, "created": manifest.created,
            "gate_ms_per_sequence": {r["artifact"]: round(1000 * r["seconds_per_sequence"], 2) for r in parity
                                     if "MIL" in r["runtime"] or "Core AI" in r["runtime"]}}


def main(run: Path, data_dir: Path | None, reference_rows: int, exports: list[Path]) -> dict:
    import_coremltools()  # imported before any timing, as an export has it by its parity phase
    task, features, pad_id, batch_size = gate_inputs(run, data_dir)
    sample = sorted(random.Random(0).sample(range(len(features)), min(reference_rows, len(features))))
    programs = {p.name: p for p in sorted((run / EXPORT_DIR).glob("*.mlpackage"))}
    with tempfile.TemporaryDirectory(prefix="pocketbert-pte-coreml-") as folder:
        if (run / EXPORT_DIR / EXECUTORCH_COREML).is_file():
            programs[EXECUTORCH_COREML] = coreml_delegate_package(run / EXPORT_DIR / EXECUTORCH_COREML, Path(folder))
        figures = {name: program_figures(path, task, features, pad_id, batch_size, sample,
                                         delegated=name == EXECUTORCH_COREML)
                   for name, path in programs.items()}
    lengths = [len(f.input_ids) for f in features]
    return {
        "date": date.today().isoformat(),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip(),
        "run": str(run), "sequences": len(features), "eval_batch_size": batch_size,
        "mean_tokens": round(float(np.mean(lengths)), 1),
        "mean_tokens_of_sample": round(float(np.mean([lengths[k] for k in sample])), 1),
        "programs": figures,
        "exports": {str(r): export_figures(r) for r in exports},
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a run folder with student/ and export/")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--reference-rows", type=int, default=REFERENCE_ROWS)
    parser.add_argument("--exports", type=Path, nargs="*", default=[])
    args = parser.parse_args()
    print(json.dumps(main(args.run, args.data_dir, args.reference_rows, args.exports), indent=1))
