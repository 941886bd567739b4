"""The serial export against the parallel one (`--jobs N`) of the same run, in one sitting: both wall times, their
ratio, and whether the two exports hold the same artifacts.

    python scripts/export_jobs_timing.py runs/sst2-default --jobs 16 --data-dir ../shared/data
    python scripts/export_jobs_timing.py RUN --jobs 2 -- --coreml-variants fp16 --coreai-variants none

RUN must hold a finished student; its own export/ is left alone: each side exports a scratch copy of the run's
student stage (and the run's records beside it) in a temporary folder, `pocketbert export --jobs 1` first, then
`--jobs N`, each in a process of its own with this checkout's code. Arguments after `--` go to both exports.

The same artifacts: every file of the two export folders byte for byte, except the programs of converters that do
not write the same bytes twice (NON_DETERMINISTIC: Core ML packages, Core AI assets, the Core ML-delegated
ExecuTorch program), which are held to the same gate figures instead: each parity.json row with its timing left out.
The records that hold timings (manifest.json, parity.json) are compared by those figures too. Exit status 1 when
anything differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pocketbert.core.run.cache_dir import CACHE_ENV
from pocketbert.core.run.manifest import read_manifest
from pocketbert.core.run.stage_records import ExportRecord

ROOT = Path(__file__).resolve().parents[1]
# Programs whose converter writes other bytes for the same program on every run, serial exports alike: coremltools
# (a package's items named by random UUIDs, its date; onnx_export.APPLE_BYTES_VARY), Core AI (an .aimodel's
# metadata.json holds its creation date, its main.mlirb and main.hash differ too) and ExecuTorch's Core ML delegate
# (model.coreml.pte carries a Core ML program). Their files are held to the same gate figures.
NON_DETERMINISTIC = (".mlpackage", ".aimodel", ".coreml.pte")
TIMED_RECORDS = ("manifest.json", "parity.json")  # hold seconds: compared by their figures, not their bytes
TIMING_FIELDS = ("seconds_per_sequence",)


def scratch_run(run: Path, into: Path) -> Path:
    """A run holding RUN's student stage and the records export reads beside it (not its export/, bench/,
    teacher/ or app folders)."""
    into.mkdir(parents=True)
    for item in run.iterdir():
        if item.name in ("export", "bench", "teacher", "ios", "android") or item.name.startswith("."):
            continue
        (shutil.copytree if item.is_dir() else shutil.copy2)(item, into / item.name)
    return into


def export(run: Path, jobs: int, data_dir: Path | None, extra: list[str], cache: Path | None = None) -> float:
    """`pocketbert export --jobs N` of `run` with this checkout's code; its wall time in seconds. cache: an empty
    POCKETBERT_CACHE of its own, so the side pays what a first export pays (the app programs, the exhaustive
    tokenizer check) instead of finding them built by the other side."""
    command = [sys.executable, "-m", "pocketbert.cli", "export", "--run", str(run), "--jobs", str(jobs), *extra]
    if data_dir is not None:
        command += ["--data-dir", str(data_dir)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    if cache is not None:
        env[CACHE_ENV] = str(cache)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"export --jobs {jobs} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return wall


def digests(folder: Path) -> dict[str, str]:
    """sha256 of every file in `folder` but the timed records and the non-deterministic converters' programs."""
    out = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if not path.is_file() or relative.as_posix() in TIMED_RECORDS:
            continue
        if any(part.endswith(NON_DETERMINISTIC) for part in relative.parts):
            continue
        out[relative.as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def gate_figures(folder: Path) -> dict[str, dict]:
    """Each parity.json row without its timing: what the gate found on each program."""
    rows = json.loads((folder / "parity.json").read_text())
    return {row["artifact"]: {k: v for k, v in row.items() if k not in TIMING_FIELDS} for row in rows}


def manifest_figures(folder: Path) -> dict:
    """The manifest's records of what was built and chosen, without timings or the artifacts' hashes (the files
    themselves are compared above)."""
    metrics = read_manifest(folder, ExportRecord).metrics
    kept = {"int8_mixed_precision", "int8_word_table", "placement", "coreml_enumerated_lengths", "coreai_entry_points",
            "ort_mobile_usability", "qa_in_graph", "text_in", "tokenizer_golden"}
    figures = metrics.model_dump(include=kept)
    exhaustive = metrics.text_in_tokenizer_exhaustive or {}
    figures["text_in_tokenizer_exhaustive"] = {k: v for k, v in exhaustive.items()
                                               if k not in ("seconds", "workers", "cached")}
    return figures


def compare(run: Path, jobs: int, data_dir: Path | None = None, extra: list[str] = (), keep: Path | None = None,
            cold_cache: bool = False, serial_export: Path | None = None) -> dict:
    """Both exports of `run` and what they hold alike: the figures main() prints. keep: a new folder where the two
    scratch runs stay (serial/, parallel/) to look at what differs. cold_cache: each side starts from an empty cache
    of its own. serial_export: an export folder of this run's student already made with --jobs 1 and `extra`, taken
    as the serial side instead of exporting it again (its wall time is then not measured)."""
    def side(folder: Path, wall: float | None) -> dict:
        return {"wall_s": None if wall is None else round(wall, 1), "digests": digests(folder),
                "gate": gate_figures(folder), "manifest": manifest_figures(folder),
                "timings": read_manifest(folder, ExportRecord).metrics.timings}

    with tempfile.TemporaryDirectory(prefix="pocketbert-export-jobs-") as tmp:
        if keep is not None:
            keep.mkdir(parents=True)
            tmp = keep
        sides = {} if serial_export is None else {"serial": side(Path(serial_export), None)}
        for name, n in (("serial", 1), ("parallel", jobs)):
            if name in sides:
                continue
            scratch = scratch_run(Path(run).resolve(), Path(tmp) / name)
            wall = export(scratch, n, data_dir, list(extra), Path(tmp) / f"{name}-cache" if cold_cache else None)
            sides[name] = side(scratch / "export", wall)
    serial, parallel = sides["serial"], sides["parallel"]
    differing = sorted(k for k in serial["digests"].keys() | parallel["digests"].keys()
                       if serial["digests"].get(k) != parallel["digests"].get(k))
    gates_differ = sorted(k for k in serial["gate"].keys() | parallel["gate"].keys()
                          if serial["gate"].get(k) != parallel["gate"].get(k))
    records_differ = sorted(k for k in serial["manifest"] if serial["manifest"][k] != parallel["manifest"][k])
    by_figures = sorted(k for k in serial["gate"] if k.endswith(NON_DETERMINISTIC))
    return {"jobs": jobs, "serial_wall_s": serial["wall_s"], "parallel_wall_s": parallel["wall_s"],
            "ratio": round(serial["wall_s"] / parallel["wall_s"], 2) if serial["wall_s"] else None,
            "files_compared": len(serial["digests"]),
            "files_differing": differing, "compared_by_gate_figures": by_figures, "gates_differing": gates_differ,
            "manifest_records_differing": records_differ,
            "agree": not (differing or gates_differ or records_differ),
            "parallel": parallel["timings"].get("parallel")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--jobs", type=int, default=None, help="the parallel side's --jobs (default: this "
                        "machine's cores)")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--keep", type=Path, default=None, help="a new folder to keep both exports in")
    parser.add_argument("--cold-cache", action="store_true", help="each side from an empty cache of its own (what a "
                        "first export pays), instead of this machine's")
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []  # after --: arguments for both exports
    args = parser.parse_args(argv[:len(argv) - len(extra) - (1 if "--" in argv else 0)])
    if not (args.run / "student" / "manifest.json").is_file():
        parser.error(f"{args.run} holds no finished student (student/manifest.json)")
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs must be 1 or more (got {args.jobs})")
    jobs = args.jobs or len(os.sched_getaffinity(0))
    result = compare(args.run, jobs, args.data_dir.resolve() if args.data_dir else None, extra, args.keep,
                     args.cold_cache)
    print(f"serial (--jobs 1):    {result['serial_wall_s']:.1f} s")
    print(f"parallel (--jobs {jobs}): {result['parallel_wall_s']:.1f} s  ({result['parallel']})")
    print(f"ratio: {result['ratio']:.2f}x")
    print(f"artifacts: {result['files_compared']} files byte for byte, {len(result['files_differing'])} differ "
          f"{result['files_differing'] or ''}; by gate figures: {', '.join(result['compared_by_gate_figures']) or 'none'}"
          f"; gates differing: {result['gates_differing'] or 'none'}; manifest records differing: "
          f"{result['manifest_records_differing'] or 'none'}")
    print("agree" if result["agree"] else "DIFFER")
    sys.exit(0 if result["agree"] else 1)


if __name__ == "__main__":
    main()
