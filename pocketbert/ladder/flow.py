"""The ladder's steps: each rung trained, exported and benched by the stages' own commands, each in a process of
its own, then `pocketbert compare` over the rungs; what a finished step wrote is kept, so a killed ladder
continues where it stopped.

The flow reads only what the commands wrote (stage manifests, bench/results.json, compare.json): it imports no
stage. The rungs live in the ladder's folder, one run folder each; the rung marked in_run is the run's own student,
so `make distill export bench` and the ladder share it.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pocketbert.core.process import exit_codes
from pocketbert.core.errors import PocketbertError, RunDirError
from pocketbert.ladder.run_transfer import RunTransfer
from pocketbert.ladder.spec import NO_TRANSFER, Ladder, as_set_value, rung_export, rung_overrides
from pocketbert.core.process.parent_watch import child_environment
from pocketbert.core.run.run_files import (
    BENCH_DIR,
    BENCH_RESULTS,
    COMPARE_RESULTS,
    EXPORT_DIR,
    LADDER_COMPARE_DIR,
    MANIFEST,
    STUDENT_DIR,
    TEACHER_DIR,
)
from pocketbert.core.run.user_paths import OUTPUT_MARKER, mark_output, output_folder

MADE_BY = "ladder"  # the ladder folder's marker: a later ladder continues only its own folder


class LadderStepError(PocketbertError):
    """A step's command failed; it said why on its own error line, and the ladder says which step it was."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class Step:
    rung: str
    stage: str                  # distill, export, bench, compare
    args: list[str]             # pocketbert's arguments
    done: Path | None = None    # the file whose presence means a finished step (None: always run)
    redo: bool = False          # run even when done (bench --overwrite, to time every rung in one sitting)

    def finished(self) -> bool:
        return self.done is not None and self.done.is_file() and not self.redo


@dataclass
class Plan:
    steps: list[Step]
    rung_dirs: dict[str, Path]
    compare_dir: Path
    skipped: list[Step] = field(default_factory=list)


def spec_digest(ladder: Ladder, transfer: RunTransfer = NO_TRANSFER) -> str:
    """What makes the students: the rungs, the training setting and the run's transfer keys they inherit. The
    export, vocabulary and bench settings (the ladder's and the rungs' own) are left out: a ladder continued with others
    applies them to the steps not yet done (each stage records its own). train.run_transfer is left out too: what
    it changes is the transfer keys, and a ladder without them digests as before they existed."""
    students = ladder.model_dump(mode="json", include={"rungs", "train"},
                                 exclude={"rungs": {"__all__": {"export", "vocabulary"}}, "train": {"run_transfer"}})
    if transfer.keys:
        students["run_transfer"] = transfer.keys
    return hashlib.sha256(json.dumps(students, sort_keys=True).encode()).hexdigest()[:16]


def rung_dirs(ladder: Ladder, run_dir: Path, ladder_dir: Path) -> dict[str, Path]:
    return {r.name: Path(run_dir) if r.in_run else Path(ladder_dir) / r.name for r in ladder.rungs}


def prepare_folder(ladder: Ladder, name: str, run_dir: Path, ladder_dir: Path,
                   transfer: RunTransfer = NO_TRANSFER) -> None:
    """The ladder's folder: made and marked, or an earlier ladder's of the same spec (continued). Never the run
    itself, nor a folder inside it or holding it, nor a folder of anything else."""
    output_folder(ladder_dir, MADE_BY, overwrite=False, inputs=[run_dir], continues=True)
    digest = spec_digest(ladder, transfer)
    inherited = json.dumps(transfer.keys, sort_keys=True)
    marker = Path(ladder_dir) / OUTPUT_MARKER
    if Path(ladder_dir).is_dir() and any(Path(ladder_dir).iterdir()):
        try:
            recorded = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            recorded = {}
        before = recorded.get("run_transfer", "{}")  # a folder marked before the rungs inherited: none
        if recorded.get("spec_digest") != digest and before != inherited:
            # the run's recorded recipe is not the one the folder's rungs inherited: other unlabelled text
            raise RunDirError(f"{ladder_dir} holds a ladder whose rungs inherited {_transfer_said(before)}, and the "
                              f"run's recipe now gives {_transfer_said(inherited)}: choose another --out to build "
                              "this one, or remove that folder")
        if recorded.get("spec_digest") != digest:
            raise RunDirError(f"{ladder_dir} holds a ladder built with another spec ({recorded.get('spec')}): choose "
                              "another --out to build this one, or remove that folder")
        if recorded.get("run") not in (None, str(Path(run_dir).resolve())):
            # its rungs learned from that run's teacher: continuing would put two teachers' students in one table
            raise RunDirError(f"{ladder_dir} holds the ladder of run {recorded['run']}, not of {Path(run_dir).resolve()}: "
                              "give that --run, or another --out")
        return
    Path(ladder_dir).mkdir(parents=True, exist_ok=True)
    mark_output(Path(ladder_dir), MADE_BY, spec=name, spec_digest=digest, run=Path(run_dir).resolve(),
                run_transfer=inherited)


def _transfer_said(keys_json: str) -> str:
    """A marker's inherited transfer keys in words (those set), or that there were none."""
    try:
        keys = json.loads(keys_json)
    except ValueError:
        keys = None
    if not isinstance(keys, dict) or not keys:
        return "no transfer data"
    return ", ".join(f"{key}={as_set_value(value)}" for key, value in sorted(keys.items()) if value is not None)


def plan(ladder: Ladder, run_dir: Path, ladder_dir: Path, task: str, data_dir: Path | None, device: str,
         rebench: bool, transfer: RunTransfer = NO_TRANSFER) -> Plan:
    dirs = rung_dirs(ladder, run_dir, ladder_dir)
    teacher = Path(run_dir) / TEACHER_DIR
    data = ["--data-dir", str(data_dir)] if data_dir else []
    benched = [item for key, value in ladder.bench.set.items() for item in ("--set", f"bench.{key}={as_set_value(value)}")]
    steps = []
    for rung in ladder.rungs:
        run = dirs[rung.name]
        distill = ["train", "distill", "--run", str(run), "--task", task, "--preset", rung.preset, "--device", device,
                   *data, "--resume"]
        if not rung.in_run:
            distill += ["--teacher", str(teacher)]
        if rung.student_init:
            distill += ["--student-init", rung.student_init]
        for key, value in rung_overrides(ladder, rung, transfer).items():
            distill += ["--set", f"{key}={as_set_value(value)}"]
        steps.append(Step(rung.name, "distill", distill, run / STUDENT_DIR / MANIFEST))
        if rung.ship:
            exported = [item for key, value in rung_export(ladder, rung).items()
                        for item in ("--set", f"{key}={as_set_value(value)}")]
            steps.append(Step(rung.name, "export", ["export", "--run", str(run), *data, *exported],
                              run / EXPORT_DIR / MANIFEST))
            steps.append(Step(rung.name, "bench", ["bench", "--run", str(run), *benched] + (["--overwrite"] * rebench),
                              run / BENCH_DIR / BENCH_RESULTS, redo=rebench))
    # the in_run rung first: compare takes the teacher's latency from the first run's bench (it times the teacher)
    ordered = [dirs[r.name] for r in sorted(ladder.rungs, key=lambda r: not r.in_run)]
    compare_dir = Path(ladder_dir) / LADDER_COMPARE_DIR
    steps.append(Step("all", "compare", ["compare", *map(str, ordered), "--out", str(compare_dir), "--overwrite"]))
    return Plan(steps, dirs, compare_dir)


# How long a step interrupted with the ladder may take to clean up after its own Ctrl-C (a terminal's reaches both)
# before the ladder passes the interrupt on to it (it was sent to the ladder alone).
STEP_CLEANUP_GRACE_S = 5.0


def _step_exit_code(argv: list[str]) -> int:
    """The step's exit code. Interrupted, the ladder waits for the step to end, so that it has removed its staging
    folder and lock before the ladder says nothing half-written was kept (subprocess.run would kill it at once)."""
    step = subprocess.Popen(argv, env=child_environment())
    try:
        return step.wait()
    except KeyboardInterrupt:
        try:
            step.wait(timeout=STEP_CLEANUP_GRACE_S)
        except subprocess.TimeoutExpired:
            step.send_signal(signal.SIGINT)
            step.wait()
        raise


def run_plan(steps: list[Step], say: Callable[[str], None], command: list[str] | None = None) -> list[dict]:
    """Each unfinished step's command in a process of its own, its output passed through; a line before each step
    says where the ladder is. What each step took is returned (and said)."""
    command = command or [sys.executable, "-m", "pocketbert.cli"]
    started, record = time.time(), []
    for i, step in enumerate(steps, 1):
        where = f"ladder [{i}/{len(steps)}] {step.rung}: {step.stage}"
        if step.finished():
            say(f"{where}: already done ({step.done}), kept")
            record.append({"rung": step.rung, "stage": step.stage, "ran": False})
            continue
        say(f"{where} ({(time.time() - started) / 60:.1f} min so far): pocketbert {' '.join(step.args)}")
        t0 = time.time()
        code = _step_exit_code([*command, *step.args])
        if code in (exit_codes.INTERRUPTED, -signal.SIGINT):
            raise KeyboardInterrupt
        if code != 0:
            # A negative code is a signal that killed the step (the kernel's out-of-memory killer sends SIGKILL).
            ended = f"was killed by signal {-code}" if code < 0 else f"exited {code}"
            raise LadderStepError(f"the ladder stopped at rung {step.rung}'s {step.stage} (`pocketbert "
                                  f"{' '.join(step.args[:2])}` {ended}, its error is above): fix that and run "
                                  "the same ladder command again; finished steps are kept",
                                  code if code in (exit_codes.USAGE, exit_codes.INTERNAL) else exit_codes.INTERNAL)
        record.append({"rung": step.rung, "stage": step.stage, "ran": True, "seconds": round(time.time() - t0, 1)})
    return record


def compare_results(compare_dir: Path) -> Path:
    return Path(compare_dir) / COMPARE_RESULTS
