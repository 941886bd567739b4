"""Collect the training results of finished runs into one JSON, each with the command that made it.

    python scripts/training_results.py runs/sst2-xdomain runs/sst2-bilstm runs/emotion-default > results/training.json

Reads only what the stages wrote: student/manifest.json (and teacher/manifest.json), ablation/ablation.json
and train_bench.json where a run has them. Manifests record their command; for one written before they
did, `--command RUN/STAGE='pocketbert ...'` supplies it, and the result says so ("command_source": "given").
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pocketbert.core.run.manifest import read_manifest
from pocketbert.core.run.run_files import MANIFEST
from pocketbert.core.run.stage_records import StageRecord, StudentRecord, TeacherRecord
from pocketbert.inspect.run_comparison import recipe_name


def read(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def command(manifest: StageRecord, where: str, given: dict[str, str]) -> dict:
    if manifest.command:
        return {"command": manifest.command, "command_source": "manifest"}
    return {"command": given.get(where), "command_source": "given" if where in given else None}


def run_results(run: Path, given: dict[str, str]) -> dict:
    out: dict = {"run": str(run)}
    if (run / "student" / MANIFEST).is_file():
        student = read_manifest(run / "student", StudentRecord)
        m = student.metrics
        out["student"] = {
            **command(student, f"{run}/student", given), "recipe": recipe_name(student.config),
            "dataset": student.config.dataset, "eval": m.eval, "teacher_eval": m.teacher_eval,
            "fraction_of_teacher_kept": m.fraction_of_teacher_kept, "cross_domain": m.cross_domain or {},
            "parameters": m.parameters, "teacher_parameters": m.teacher_parameters,
            "transfer_data": m.transfer_data, "augmentation": m.augmentation, "wall_time_s": student.wall_time_s,
            "teacher": student.config.teacher, "device": student.config.device,
            "train": m.train, "versions": student.versions,
        }
    if (run / "teacher" / MANIFEST).is_file():
        teacher = read_manifest(run / "teacher", TeacherRecord)
        out["teacher"] = {**command(teacher, f"{run}/teacher", given), "eval": teacher.metrics.eval,
                          "wall_time_s": teacher.wall_time_s, "device": teacher.config.device,
                          "train": teacher.metrics.train}
    ablation = read(run / "ablation" / "ablation.json")
    if ablation:
        out["ablation"] = {**command(ablation, f"{run}/ablation", given), "primary_metric": ablation["primary_metric"],
                           "rows": [{k: r[k] for k in ("variant", "label", "eval", "delta")} for r in ablation["rows"]]}
    bench = read(run / "train_bench.json")
    if bench:
        out["train_bench"] = {**bench, **command(bench, f"{run}/train_bench", given)}
    return out


if __name__ == "__main__":
    runs, given = [], {}
    args = sys.argv[1:]
    while args:
        arg = args.pop(0)
        if arg == "--command":
            where, _, text = (args.pop(0) if args else "").partition("=")
            if not where or not text:
                sys.exit("error: --command takes RUN/STAGE='pocketbert ...'")
            given[where] = text
        elif arg.startswith("-"):
            sys.exit(f"error: no option {arg}; usage: python scripts/training_results.py RUN_DIR [RUN_DIR ...] "
                     "[--command RUN/STAGE='pocketbert ...']")
        elif not (Path(arg) / "student" / "manifest.json").is_file():
            sys.exit(f"error: {arg} is not a trained run (no student/manifest.json)")
        else:
            runs.append(arg)
    if not runs:
        sys.exit("usage: python scripts/training_results.py RUN_DIR [RUN_DIR ...] [--command RUN/STAGE='pocketbert ...']")
    json.dump([run_results(Path(p), given) for p in runs], sys.stdout, indent=2)
    sys.stdout.write("\n")
