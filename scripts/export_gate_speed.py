"""The default export's wall time and its Apple evaluators' milliseconds per sequence, before and after a change,
measured in one run of this script.

    flock /tmp/heavy.lock python scripts/export_gate_speed.py runs/sst2-default --data-dir ../shared/data \
        --before 81c87d6 --out results/export_speed/speed.json

RUN must hold a finished student (its export/ and bench/ are left alone). For each side the script copies RUN's
student stage (and the run's dataset record) into a scratch run, and runs `pocketbert export` there on one
command line (`--overwrite` never needed): "before" from the code of commit --before (`git archive` of it,
imported through PYTHONPATH), "after" from the code of --after (default HEAD), unpacked alike, so that the
working tree may change while the script waits for the lock. Both exports run the recipe's whole gate: every
variant on every eval example. Printed and written (--out): each export's wall time (the manifest's own, and the
process's), each Apple program's seconds per sequence from its parity.json (the MIL evaluator for Core ML
programs, the Core AI evaluator for .aimodel), the phase times the "after" manifest records, and whether the
text-in tokenizer check came from its cache (it is keyed by the checker's code: a cold side pays for it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from pocketbert.core.run.manifest import read_manifest
from pocketbert.core.run.stage_records import ExportRecord

ROOT = Path(__file__).resolve().parents[1]
APPLE_RUNTIMES = ("MIL interpreter", "Core AI evaluator", "Core ML delegate")
ISSUE_EVALUATOR_MS = 15.0   # the issue's bound on each Apple evaluator, ms a sequence
ISSUE_EXPORT_S = 180.0      # and on the default export's wall time


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def code_of(commit: str, into: Path) -> Path:
    """The tree of `commit` unpacked into `into` (git archive: no worktree bookkeeping left behind)."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def scratch_run(run: Path, into: Path) -> Path:
    """A run holding RUN's student stage and whatever else export reads beside it (not export/ or bench/)."""
    into.mkdir(parents=True)
    for item in run.iterdir():
        if item.name in ("export", "bench", "teacher") or item.name.startswith("."):
            continue
        (shutil.copytree if item.is_dir() else shutil.copy2)(item, into / item.name)
    return into


def export(code: Path, run: Path, data_dir: Path | None) -> dict:
    """`pocketbert export` of `run` with the package at `code`; its manifest's and the process's wall times, each
    variant's seconds per sequence."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    command = [sys.executable, "-m", "pocketbert.cli", "export", "--run", str(run)]
    if data_dir:
        command += ["--data-dir", str(data_dir)]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=code, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"export with {code} failed:\n{done.stderr[-3000:]}")
    manifest = read_manifest(run / "export", ExportRecord)
    parity = json.loads((run / "export" / "parity.json").read_text())
    return {"process_wall_s": round(wall, 1), "manifest_wall_s": manifest.wall_time_s,
            "git_commit": manifest.git_commit,
            "tokenizer_check_cached": (manifest.metrics.text_in_tokenizer_exhaustive or {}).get("cached"),
            "timings": manifest.metrics.timings,
            "variants": {r["artifact"]: {"runtime": r["runtime"], "n_examples": r["n_examples"],
                                         "ms_per_sequence": round(1000 * r["seconds_per_sequence"], 2),
                                         "agreement": r["agreement"], "passed": r["passed"]} for r in parity}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--before", required=True, help="commit whose code is timed first")
    parser.add_argument("--after", default="HEAD", help="commit whose code is timed second (default HEAD)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    before = git("rev-parse", "--short", args.before)
    after = git("rev-parse", "--short", args.after)
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="pocketbert-export-speed-") as tmp:
        tmp = Path(tmp)
        sides = {}
        codes = {"before": code_of(before, tmp / "code-before"), "after": code_of(after, tmp / "code-after")}
        for name, code in codes.items():
            run = scratch_run(args.run.resolve(), tmp / f"run-{name}")
            sides[name] = {"code": before if name == "before" else after,
                           **export(code, run, args.data_dir.resolve() if args.data_dir else None)}
            print(f"{name} ({sides[name]['code']}): export {sides[name]['manifest_wall_s']} s "
                  f"(process {sides[name]['process_wall_s']} s), tokenizer check cached: "
                  f"{sides[name]['tokenizer_check_cached']}", flush=True)
    apple = {}
    for name, side in sides.items():
        for artifact, v in side["variants"].items():
            if v["runtime"].startswith(APPLE_RUNTIMES):
                apple.setdefault(artifact, {})[name] = {k: v[k] for k in ("runtime", "ms_per_sequence", "n_examples")}
    for artifact, pair in apple.items():
        print(f"  {artifact:<44} " + "  ".join(f"{n} {p['ms_per_sequence']:.1f} ms/seq ({p['runtime']}, "
                                                f"{p['n_examples']} ex.)" for n, p in pair.items()))
    result = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "run": str(args.run), "cpu_count": os.cpu_count(), "load_average_at_start": [round(x, 2) for x in load],
        "bounds": {"evaluator_ms_per_sequence": ISSUE_EVALUATOR_MS, "export_wall_s": ISSUE_EXPORT_S},
        "before": sides["before"], "after": sides["after"], "apple_evaluators": apple,
        "export_speedup": round(sides["before"]["manifest_wall_s"] / sides["after"]["manifest_wall_s"], 2),
    }
    print(f"export: {result['export_speedup']}x ({sides['before']['manifest_wall_s']} s -> "
          f"{sides['after']['manifest_wall_s']} s)")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
