"""Accuracy of export folders' int8 ONNX models on the eval split and 2,000 held-out reviews of each cross-domain
dataset, each model reading text with its own export's tokenizer (a fitted vocabulary's cuts), against the student
in PyTorch with the full vocabulary: what a fitted vocabulary and the int8 table cost on text it was not fitted to.

    python scripts/int8_accuracy.py runs/sst2-default/student runs/sst2-default/export runs/fitted/export \\
        --data-dir ../shared/data

Prints one line per export and dataset: accuracy, its change against the student in points, the share of answers
that agree with the student's, and the file's size.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

MAX_LENGTH = 128          # the exports' length
CROSS_DOMAIN_EXAMPLES = 2000
SEED = 13


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("student", type=Path, help="the student folder (full vocabulary)")
    parser.add_argument("exports", type=Path, nargs="+", help="export folders with model.int8.onnx")
    parser.add_argument("--dataset", default="sst2")
    parser.add_argument("--cross-domain", default="imdb")
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args()

    from pocketbert.core.tasks.data import subsample
    from pocketbert.core.students.inference import batched_logits, ort_forward, ort_session, torch_forward
    from pocketbert.core.students.models import load_tokenizer
    from pocketbert.core.students.stage_folder import load_stage_model
    from pocketbert.core.tasks.task_data import load_task_data

    model, tokenizer, task, _ = load_stage_model(args.student)
    sets = {f"{args.dataset} eval": load_task_data(args.dataset, task.name, args.data_dir, None, task.label_names,
                                                   SEED).eval,
            f"{args.cross_domain} ({CROSS_DOMAIN_EXAMPLES})": subsample(load_task_data(
                args.cross_domain, task.name, args.data_dir, None, task.label_names, SEED).eval,
                CROSS_DOMAIN_EXAMPLES, SEED)}

    def answers(forward, tok, examples) -> np.ndarray:
        features = task.features(tok, examples, MAX_LENGTH)
        return np.array([int(np.argmax(row)) for row in batched_logits(task, features, tok.pad_token_id, 64, forward)])

    for name, examples in sets.items():
        labels = np.array([e.label for e in examples])
        student = answers(torch_forward(model, task), tokenizer, examples)
        base = float((student == labels).mean())
        print(f"{name}: the student (PyTorch) {base:.4f}")
        for folder in args.exports:
            path = folder / "model.int8.onnx"
            got = answers(ort_forward(ort_session(path, 1), task), load_tokenizer(str(folder)), examples)
            accuracy = float((got == labels).mean())
            print(f"  {folder}: {accuracy:.4f} ({100 * (accuracy - base):+.2f} points), agreement "
                  f"{float((got == student).mean()):.4f}, {path.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
