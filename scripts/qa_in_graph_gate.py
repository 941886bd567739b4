"""The one-call QA gate on a run's student, without the rest of the export: what `pocketbert export` checks for
model.qa.onnx and model.qa.int8.onnx, on every eval question (for a run whose export another variant's gate
stops).

    python scripts/qa_in_graph_gate.py runs/qa-reduced ../shared/data > results/qa_in_graph/<date>.json

The student exported to ONNX (fp32) and dynamic int8 (every FFN output projection kept fp32, quantize_int8's
default), the tokenizer files as export writes them, the one-call graphs built from them, and
parity.compare_answers against the Python pipeline (core/tasks/qa.py on the PyTorch student's logits).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path


def main(run: Path, data_dir: Path) -> dict:
    from pocketbert.core.tasks.data import subsample
    from pocketbert.core.students.inference import batched_logits, torch_forward
    from pocketbert.core.students.models import load_tokenizer
    from pocketbert.core.config.recipe import complete_recipe
    from pocketbert.core.students.stage_folder import load_stage_model
    from pocketbert.core.tasks.task_data import load_task_data
    from pocketbert.export.checks import parity
    from pocketbert.export.programs import onnx_export
    from pocketbert.export.text_in import qa_graph
    from pocketbert.export.app.app_files import write_app_files
    from pocketbert.core.run.manifest import git_commit, read_manifest
    from pocketbert.core.run.run_files import ONNX_FP32, ONNX_INT8, ONNX_QA, ONNX_QA_INT8, STUDENT_DIR, TOKENIZER_JSON
    from pocketbert.core.run.user_paths import recorded_dataset

    student_dir = run / STUDENT_DIR
    model, tokenizer, task, info = load_stage_model(student_dir)
    recipe = complete_recipe(read_manifest(student_dir).config.recipe)
    export, evaluation = recipe.export, recipe.eval
    max_length = export.max_length or info["max_length"]
    data = load_task_data(recorded_dataset(run, recipe.dataset), task.name, data_dir, None, None, recipe.seed)
    examples = subsample(data.eval, len(data.eval), recipe.seed)
    with tempfile.TemporaryDirectory(prefix="qa-gate-") as folder:
        out = Path(folder)
        write_app_files(model, tokenizer, task, out, max_length)
        app_tokenizer = load_tokenizer(str(out))
        features = task.features(app_tokenizer, examples, max_length, info.get("doc_stride"))
        student_logits = batched_logits(task, features, app_tokenizer.pad_token_id, evaluation.batch_size,
                                        torch_forward(model, task))
        onnx_export.export_onnx(model, task, out / ONNX_FP32)
        onnx_export.quantize_int8(out / ONNX_FP32, out / ONNX_INT8)
        settings = qa_graph.QASettings(max_length, qa_graph.effective_stride(max_length, info.get("doc_stride")),
                                       evaluation.max_answer_length, evaluation.n_best,
                                       export.qa_max_context_tokens)
        results = {}
        for source, target, precision, gate in ((ONNX_FP32, ONNX_QA, "fp32", parity.QA_IN_GRAPH_GATE),
                                                (ONNX_INT8, ONNX_QA_INT8, "int8", parity.COMPRESSED_GATE)):
            qa_graph.build_qa_model(out / TOKENIZER_JSON, out / source, out / target, settings)
            started = time.perf_counter()
            answers = qa_graph.answer_forward(out / target)(examples)
            result = parity.compare_answers(task, examples, features, student_logits, answers,
                                            qa_graph.span_mismatches(examples, answers), evaluation, target,
                                            "onnxruntime + extensions", precision, gate)
            result.seconds_per_sequence = (time.perf_counter() - started) / len(examples)
            results[target] = result.to_dict()
    return {"run": str(run), "commit": git_commit(), "settings": settings.to_dict(), "results": results}


if __name__ == "__main__":
    usage = "usage: python scripts/qa_in_graph_gate.py RUN_DIR DATA_DIR > results/qa_in_graph/<date>.json"
    if len(sys.argv) != 3 or not (Path(sys.argv[1]) / "export").is_dir() or not Path(sys.argv[2]).is_dir():
        sys.exit(f"error: give an exported run and the data folder; {usage}")
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2])), indent=2))
