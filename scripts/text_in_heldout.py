"""The text-in models on text nothing in them was chosen on: do their tokenizer and answers hold?

    python scripts/text_in_heldout.py runs/sst2-default ../shared/data > results/text_in_heldout.json

For each cross-domain dataset (IMDb reviews, emotion sentences; 2,000 eval texts each): how many texts the
text-in tokenizer graph gives tokenizer.json's ids for, and, where the dataset has the run's labels, how often
model.text.onnx and model.text.ort agree with the PyTorch student fed tokenizer.json's ids. Then the QA form of
the graph (question and context, with offsets) on pairs of those texts (an emotion sentence as the question, an
IMDb review as the context): how many pairs get tokenizer.json's ids, token types and code-point offsets.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

TEXTS_PER_DATASET = 2000
SEED = 13
DATASETS = ("imdb", "emotion")


def main(run: Path, data_dir: Path) -> dict:
    from tokenizers import Tokenizer

    from pocketbert.core.tasks.data import subsample

    from pocketbert.core.tasks.task_data import load_task_data
    from pocketbert.core.students.inference import batched_logits, torch_forward
    from pocketbert.core.students.models import load_tokenizer
    from pocketbert.core.students.stage_folder import load_stage_model
    from pocketbert.core.run.manifest import read_manifest
    from pocketbert.core.run.stage_records import ExportRecord
    from pocketbert.core.tasks.registry import text_in_string
    from pocketbert.export.text_in import model as text_in_model
    from pocketbert.export.text_in import session
    from pocketbert.export.text_in.text_tokenizer import PREFIX, tokenizer_graph

    export = run / "export"
    max_length = read_manifest(export, ExportRecord).config.max_length
    model, _, task, _ = load_stage_model(run / "student")
    reference = Tokenizer.from_file(str(export / "tokenizer.json"))
    graph = session.text_session(tokenizer_graph(export / "tokenizer.json", task.text_in_inputs, max_length, 17, 8)
                                 .SerializeToString())
    results = {"run": str(run), "max_length": max_length, "datasets": {}}
    for name in DATASETS:
        same_labels = name != "emotion"  # emotion has six labels of its own: tokenization only
        data = load_task_data(name, task.name, data_dir, None, task.label_names if same_labels else None, SEED)
        examples = subsample(data.eval, TEXTS_PER_DATASET, SEED)
        same = sum(graph.run([PREFIX + "input_ids"], {"text": text_in_string(ex.text)})[0].tolist()
                   == reference.encode(ex.text).ids for ex in examples)
        row = {"texts": len(examples), "same_ids_as_tokenizer_json": same}
        if same_labels:
            features = task.features(load_tokenizer(str(export)), examples, max_length)
            student = batched_logits(task, features, 0, 64, torch_forward(model, task))
            row["student_accuracy"] = float(np.mean([int(s.argmax()) == ex.label for s, ex in zip(student, examples)]))
            for artifact in ("model.text.onnx", "model.text.ort"):
                _, logits = text_in_model.text_in_forward(export / artifact, task)(examples)
                row[artifact] = {
                    "agreement_with_student": float(np.mean([int(a.argmax()) == int(s.argmax())
                                                             for a, s in zip(logits, student)])),
                    "accuracy": float(np.mean([int(a.argmax()) == ex.label for a, ex in zip(logits, examples)]))}
        results["datasets"][name] = row
    results["pairs"] = _pairs(export, max_length, data_dir)
    return results


def _pairs(export: Path, max_length: int, data_dir: Path) -> dict:
    from pocketbert.core.tasks.data import subsample
    from pocketbert.core.tasks.task_data import load_task_data
    from pocketbert.core.students.models import load_tokenizer
    from pocketbert.core.tasks.registry import QATask, text_in_string
    from pocketbert.export.app import tokenizer_files
    from pocketbert.export.text_in import session
    from pocketbert.export.text_in.text_tokenizer import PREFIX, tokenizer_graph

    task = QATask()
    graph = session.text_session(tokenizer_graph(export / "tokenizer.json", task.text_in_inputs, max_length, 17, 8,
                                                 offsets=True).SerializeToString())
    reference = load_tokenizer(str(export))
    questions, contexts = (subsample(load_task_data(name, "sentiment", data_dir, None, None, SEED).eval,
                                     TEXTS_PER_DATASET, SEED) for name in ("emotion", "imdb"))
    same = 0
    for question, context in zip(questions, contexts):
        expected = tokenizer_files.golden_pair(reference, question.text, context.text, max_length)
        got = graph.run([PREFIX + n for n in ("input_ids", "token_type_ids", "offset_mapping")],
                        {"question": text_in_string(question.text), "context": text_in_string(context.text)})
        same += [g.tolist() for g in got] == [expected["ids"], expected["token_type_ids"], expected["offsets"]]
    return {"pairs": min(len(questions), len(contexts)), "same_ids_types_and_offsets": same}


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python scripts/text_in_heldout.py RUN_DIR DATA_DIR > results/text_in_heldout.json")
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2])), indent=2))
