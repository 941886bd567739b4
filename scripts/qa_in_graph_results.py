"""The QA-in-one-call figures of an export, gathered from what the export wrote (parity.json, manifest.json).

    python scripts/qa_in_graph_results.py runs/qa-reduced > results/qa_in_graph/<date>.json

For each one-call QA model: the questions checked, agreement with the Python pipeline (core/tasks/qa.py on the
student's logits), exact match and F1 of both, and the same for questions of one window and of several; the
settings (max_length, stride, the windows' bound, the long-context policy); the time per question.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pocketbert.core.run.manifest import read_manifest
from pocketbert.core.run.run_files import EXPORT_DIR, PARITY
from pocketbert.core.run.stage_records import ExportRecord, ParityRow


def gather(run: Path) -> dict:
    export = run / EXPORT_DIR
    parity = json.loads((export / PARITY).read_text())
    manifest = read_manifest(export, ExportRecord)
    models = {}
    for row in parity:
        r = ParityRow.model_validate(row)
        if r.by_windows is None:
            continue
        models[r.artifact] = {
            "precision": r.precision, "passed": r.passed, "questions": r.n_examples,
            "agreement": r.agreement, "metrics": r.metrics, "pipeline_metrics": r.student_metrics,
            "seconds_per_question": r.seconds_per_sequence, **r.by_windows}
    qa_in_graph = manifest.metrics.qa_in_graph
    return {"run": str(run), "commit": manifest.git_commit,
            "settings": qa_in_graph.settings if qa_in_graph is not None else None, "models": models}


if __name__ == "__main__":
    if len(sys.argv) != 2 or not (Path(sys.argv[1]) / "export" / "parity.json").is_file():
        sys.exit("error: give an exported run (with export/parity.json); usage: python "
                 "scripts/qa_in_graph_results.py RUN_DIR > results/qa_in_graph/<date>.json")
    print(json.dumps(gather(Path(sys.argv[1])), indent=2))
