"""`make gpu-check`: the GPU figures in one command that fits in 8 minutes, set-up included.

    python scripts/gpu_check.py [--kit .gpu-kit] [--data-dir DATA] [--parts a,b] [--cap part=SECONDS]
    python scripts/gpu_check.py --dry [--data-dir DATA]     every part at toy sizes on the CPU, in about a minute

Runs the parts of scripts/gpu_check_parts.py in the order of BUDGET_S, each under its own cap (and all of them
under TOTAL_BUDGET_S, counted from --started, when make began): a part that reaches its cap is stopped, keeps
the figures it had and is recorded as partial or skipped, with the reason. The JSON is rewritten after every
part, so a check stopped from outside keeps what it finished. Writes <out>/gpu_check.json and, rendered from it,
<out>/gpu_check.md (scripts/gpu_check_render.py), and every step's output in <out>/gpu_check.log.

With --kit (a folder from scripts/gpu_kit.py) the set-up unpacks the packages, weights and data the check needs
on a machine that reaches no registry; without it the environment running this script must hold them. This
process needs only what the GPU machine's own python3 holds (torch, numpy, safetensors); the kit's packages are
for the parts' processes.
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import importlib
import json
import math
import os
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
REPO_ROOT = SCRIPTS.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import gpu_check_parts  # noqa: E402  (beside this file)
import gpu_check_render  # noqa: E402

TOTAL_BUDGET_S = 480  # at most 8 minutes on one GPU, set-up included
# Each part's cap in seconds, in the order the parts run: the figures the issue asks first come first, the lever
# table (whose torch.compile rows alone could take minutes) last. The parts before it took 247 s of their 420 s of
# caps on an H200 (2026-11-26); the lever table takes what is left, up to its cap, and the total stops it there.
BUDGET_S = {
    "setup": 45,
    "stages": 90,
    "profile": 60,  # the step's profile at the two batch sizes
    "large_batch": 150,  # five distillations: both batch sizes, three seeds each (one is the stages')
    "resume": 90,  # with the control, the uninterrupted run again
    "resume_eager": 110,  # the same with CUDA graphs off, its uninterrupted run eager too
    "qa": 115,
    "bench_train": 45,
    "levers": 250,
    # the lever table's torch.compile rows alone (and its all-off row, their base), in a call of their own
    "compile": 200,
    # the GPU recipe's `make distill export` from nothing: both stages until their validation score stops improving
    "ship": 240,
}
MIN_BUDGET_S, MAX_BUDGET_S = 60, 600  # a device call runs at most 10 minutes
WRAP_UP_S = 5  # kept from the total for writing the JSON and the table
# The dry run exercises every part's code on a CPU at toy sizes, where no GPU cap says how long a part takes (a
# busy 2-core machine stretched the toy lever table past its 80 s): its caps are the GPU's times this. A cap of
# its own (--cap) is kept as given, which is how the caps themselves are tested.
DRY_CAP_SCALE = 10
LOG_TAIL_LINES = 15
DONE, PARTIAL, SKIPPED, FAILED = "done", "partial", "skipped", "failed"
JSON_NAME, TABLE_NAME, LOG_NAME = "gpu_check.json", "gpu_check.md", "gpu_check.log"


class CapReached(Exception):
    def __init__(self, step: str):
        super().__init__(step)
        self.step = step


class SetUpFailed(Exception):
    """The environment the parts need could not be made: every part is skipped."""


class StepFailed(Exception):
    def __init__(self, step: str, returncode: int, tail: str):
        super().__init__(f"step '{step}' exited {returncode}")
        self.step, self.returncode, self.tail = step, returncode, tail


@dataclass
class StepResult:
    seconds: float
    log: str


def tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines a user would read: progress bars' carriage-return redraws dropped."""
    kept = [line for line in text.replace("\r", "\n").splitlines()
            if line.strip() and "it/s]" not in line and "s/it]" not in line and "batch/s]" not in line]
    return "\n".join(kept[-lines:])


# What the dry run's steps import before their first line of work. The dry run imports them once and forks each of
# its steps from itself (Forked): a started interpreter spends about 5 s of CPU on them, most of a toy step. The GPU
# check starts its steps, which run on the kit's packages, not on what this process holds.
STEP_MODULES = ("torch", "transformers", "transformers.models.bert.modeling_bert", "pocketbert.cli",
                "pocketbert.train.teacher", "pocketbert.train.distill")


def import_step_modules() -> bool:
    """Whether this interpreter holds the steps' modules: where it lacks one, the dry run starts its steps, and the
    set-up's probe names what is missing as it does on the GPU."""
    try:
        for name in STEP_MODULES:
            importlib.import_module(name)
    except ImportError:
        return False
    return True


class Forked:
    """A step in a child forked from this process: a process of its own as a started one is (its own session, exit
    code, signals, a SIGKILL it sends itself), running `python -m pocketbert.cli ...` or a script as `__main__`
    with the step's environment, on the modules this process imported."""

    def __init__(self, argv: list[str], out, env: dict):
        self.argv = argv
        sys.stdout.flush()
        sys.stderr.flush()
        self.pid = os.fork()
        if self.pid == 0:
            _run_forked_step(argv, out, env)

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            pid, status = os.waitpid(self.pid, 0 if deadline is None else os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.argv, timeout)
            time.sleep(0.05)


def _run_forked_step(argv: list[str], out, env: dict):
    """The child's whole life: the step as its interpreter would run it, then the exit an interpreter makes (its
    threads joined, its exit functions run, its output flushed), never a return into the parent's code."""
    code = 1
    try:
        os.setsid()
        os.chdir(REPO_ROOT)
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        sys.stdout.reconfigure(line_buffering=True)  # as the started steps' PYTHONUNBUFFERED keeps the log in order
        os.environ.clear()
        os.environ.update(env)
        try:
            if argv[1] == "-m":
                sys.argv = [argv[2], *argv[3:]]
                runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
            else:
                sys.argv = argv[1:]
                runpy.run_path(argv[1], run_name="__main__")
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
        for thread in threading.enumerate():
            if thread is not threading.current_thread() and not thread.daemon:
                thread.join()
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


class Check:
    """What the parts share: the plan, the folders, the environment of their processes, and the running part's
    deadline and steps."""

    SIGKILLED = -signal.SIGKILL  # how subprocess reports a process killed by SIGKILL

    def __init__(self, plan, work: Path, python: str, env: dict, log, forked: bool = False):
        """forked: each step forked from this process (Forked), which holds the steps' modules; else started."""
        self.plan, self.work, self.python, self.env, self.log, self.forked = plan, work, python, env, log, forked
        self.repo = REPO_ROOT
        self.data_dir = self.base_model = None
        self.made: dict = {}
        self.part, self.deadline, self.steps = "", float("inf"), []

    def begin(self, part: str, cap: float) -> None:
        self.part, self.deadline, self.steps = part, time.monotonic() + cap, []

    def needs(self, what: str):
        if what not in self.made:
            raise gpu_check_parts.NeedsEarlierPart(
                f"needs the {what.replace('_', ' ')} that part 'stages' makes, which it did not make in this check")
        return self.made[what]

    def cli(self, label: str, *args, env: dict | None = None, expect_rc: int = 0) -> StepResult:
        """The real CLI, `pocketbert ARGS`, in a process of its own."""
        return self.run(label, [self.python, "-m", "pocketbert.cli", *map(str, args)], env, expect_rc)

    def script(self, label: str, name: str, *args) -> StepResult:
        return self.run(label, [self.python, str(SCRIPTS / name), *map(str, args)], None, 0)

    def run(self, label: str, argv: list[str], env: dict | None, expect_rc: int) -> StepResult:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise CapReached(label)
        shown = " ".join([f"{k}={v}" for k, v in (env or {}).items()] + [self.shown(argv)])
        self.log.write(f"\n===== {self.part}/{label}: {shown}\n")
        self.log.flush()
        with tempfile.TemporaryFile("w+") as out:
            started = time.monotonic()
            step_env = {**self.env, **(env or {})}
            proc = Forked(argv, out, step_env) if self.forked else subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT, env=step_env, start_new_session=True)
            capped = False
            try:
                returncode = proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: the process and whatever it started
                returncode, capped = proc.wait(), True
            except BaseException:  # interrupted: the step's processes, in a session of their own, go too
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise
            seconds = time.monotonic() - started
            out.seek(0)
            text = out.read()
        self.log.write(tail(text, lines=200) + f"\n----- exit {returncode} after {seconds:.1f} s\n")
        self.log.flush()
        self.steps.append({"step": label, "command": shown, "seconds": round(seconds, 2),
                           "exit": "stopped at the cap" if capped else returncode})
        if capped:
            raise CapReached(label)
        if returncode != expect_rc:
            raise StepFailed(label, returncode, tail(text))
        return StepResult(seconds, text)

    def shown(self, argv: list[str]) -> str:
        """The command as a user types it: `pocketbert ...`, folders named WORK, DATA and MODEL."""
        words = ["pocketbert"] + argv[3:] if argv[1:3] == ["-m", "pocketbert.cli"] else \
            ["python", f"scripts/{Path(argv[1]).name}"] + argv[2:]
        text = " ".join(words)
        for path, name in ((self.base_model, "MODEL"), (self.data_dir, "DATA"), (self.work, "WORK")):
            if isinstance(path, Path):  # a folder, not a model's name such as minilm
                text = text.replace(str(path), name)
        return text


def run_part(check: Check, name: str, part, cap: float) -> dict:
    figures: dict = {}
    record = {"status": DONE, "cap_s": round(cap, 1), "figures": figures}
    started = time.monotonic()
    check.begin(name, cap)
    try:
        part(check, figures)
    except CapReached as exc:
        record["status"] = PARTIAL if figures else SKIPPED
        record["reason"] = f"its cap of {cap:g} s was reached during step '{exc.step}'"
    except StepFailed as exc:
        record.update(status=FAILED, reason=str(exc), log_tail=exc.tail)
    except SetUpFailed as exc:
        record.update(status=FAILED, reason=str(exc))
    except gpu_check_parts.NeedsEarlierPart as exc:
        record.update(status=SKIPPED, reason=str(exc))
    except Exception as exc:  # a bug in reading one part's figures must not cost the others theirs
        record.update(status=FAILED, reason=f"{type(exc).__name__}: {exc}", log_tail=tail(traceback.format_exc()))
    record["seconds"] = round(time.monotonic() - started, 2)
    record["steps"] = check.steps
    return record


def set_up(check: Check, kit: Path | None, dry: bool, data_dir: Path | None, model: str, fig: dict) -> None:
    """The environment the parts run in: the kit unpacked (packages, weights, data), or the dry run's tiny base;
    then a probe that everything imports, and of the device."""
    import gpu_kit

    if kit:
        unpacked = gpu_kit.unpack(kit, check.work / "kit")
        if unpacked["site"]:
            check.env["PYTHONPATH"] = os.pathsep.join([str(unpacked["site"]), check.env["PYTHONPATH"]])
        check.base_model, data_dir = unpacked["model"], data_dir or unpacked["data"]
        fig["kit"] = json.loads((kit / gpu_kit.MANIFEST).read_text()).get("weights")
    if data_dir is None:
        raise SetUpFailed("no data folder: pass --data-dir (or DATA_DIR= to make), or --kit")
    check.data_dir = Path(data_dir).resolve()
    tiny = ["--tiny-base", check.work / "tiny-base"] if dry else []
    if dry:
        check.base_model = check.work / "tiny-base"
    elif not kit:
        check.base_model = model
    probe = check.script("probe", "gpu_check_setup.py", *tiny)
    fig.update(json.loads(probe.log.strip().splitlines()[-1]))
    if check.plan.device == "cuda" and not fig.get("gpu"):
        raise SetUpFailed("no CUDA GPU is visible to torch: make gpu-check DRY=1 runs the toy sizes on the CPU")


# What the export keeps in the cache (each module's CACHE_FOLDER): the app tokenizers' programs and checks, the
# tokenizer tables and checks, the app runtimes. Keyed by their sources' hashes, they hold no training figure.
EXPORT_CACHE_FOLDERS = ("app-programs", "app-tokenizer-checks", "tokenizer-app-tables", "tokenizer-checks",
                        "tokenizer-tables", "tokenizer-pair-probes", "app-runtimes")


def share_export_caches(cache: Path) -> None:
    """The dry run's cache starts empty as the GPU check's does (the teacher cache is measured cold), but takes the
    export's cached programs and checks from the caller's own cache when it has one (the tests' session cache):
    its export then does not build the Swift and Kotlin tokenizers again."""
    from pocketbert.core.run.cache_dir import CACHE_ENV

    caller = os.environ.get(CACHE_ENV, "").strip()
    if not caller:
        return
    cache.mkdir(parents=True, exist_ok=True)
    for name in EXPORT_CACHE_FOLDERS:
        (Path(caller) / name).mkdir(parents=True, exist_ok=True)
        (cache / name).symlink_to(Path(caller) / name, target_is_directory=True)


def git_state() -> dict:
    """The commit measured, and whether the tree had changes beside it (a device call carries uncommitted files)."""
    def git(*args):
        try:
            done = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True)
        except OSError:  # no git on the machine
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"git_commit": git("rev-parse", "--short", "HEAD"), "git_changed_files": None if status is None
            else len(status.splitlines())}


def updated(earlier: dict, result: dict, asked: list[str]) -> dict:
    """This call's parts over an earlier call's JSON (--update): a part this call ran replaces the earlier one's,
    the others keep theirs, each part says which call measured it, and `calls` lists every call."""
    def call(r: dict) -> dict:
        return {key: r.get(key) for key in ("date", "git_commit", "git_changed_files", "setup_s", "wall_time_s")} | {
            "device": ((r["parts"].get("setup", {}).get("figures") or {}).get("gpu") or {}).get("name")}

    calls = earlier.get("calls") or [call(earlier) | {"parts": list(earlier["parts"])}]
    parts = {name: {"call": record.get("call", 0), **record} for name, record in earlier["parts"].items()}
    ran = ["setup", *asked]
    parts.update({name: {"call": len(calls), **result["parts"][name]} for name in ran if name in result["parts"]})
    parts = {name: parts[name] for name in BUDGET_S if name in parts}
    return {**result, "parts": parts, "skipped": [f"{name}: {r['status']}, {r.get('reason')}"
                                                  for name, r in parts.items() if r["status"] != DONE],
            "calls": [*calls, call(result) | {"parts": [name for name in ran if name in result["parts"]]}]}


def write_outputs(result: dict, out: Path) -> None:
    for name, text in ((JSON_NAME, json.dumps(result, indent=2) + "\n"),
                       (TABLE_NAME, gpu_check_render.render_table(result))):
        partial = out / (name + ".partial")
        partial.write_text(text)
        os.replace(partial, out / name)


def parse_caps(items: list[str]) -> dict[str, float]:
    """PART=SECONDS items; ValueError with the one line to print for a bad one."""
    caps = {}
    for item in items:
        name, _, seconds = item.partition("=")
        try:
            value = float(seconds)
        except ValueError:
            value = math.nan
        if name not in BUDGET_S or not 0 < value <= MAX_BUDGET_S:
            raise ValueError(f"--cap {item}: give PART=SECONDS, SECONDS above 0 and at most {MAX_BUDGET_S}, PART one "
                             f"of {', '.join(BUDGET_S)}")
        caps[name] = value
    return caps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry", action="store_true", help="every part at toy sizes on the CPU")
    parser.add_argument("--kit", type=Path, default=None, help="a folder from scripts/gpu_kit.py build")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--model", default="minilm", help="the teacher's base model without a kit")
    parser.add_argument("--out", type=Path, default=None,
                        help="where the JSON, table and log go (default results/gpu, runs/gpu-check-dry with --dry)")
    parser.add_argument("--parts", default=None, help=f"comma-separated, of: {', '.join(list(BUDGET_S)[1:])}")
    parser.add_argument("--cap", action="append", default=[], metavar="PART=SECONDS", help="another cap for a part")
    parser.add_argument("--started", type=float, default=None, help="epoch seconds when the set-up began (make's)")
    parser.add_argument("--update", action="store_true",
                        help="keep the parts not run from the JSON already in --out (a second call on the GPU)")
    parser.add_argument("--keep-work", action="store_true", help="keep the runs, logs and unpacked kit")
    parser.add_argument("--budget", type=float, default=TOTAL_BUDGET_S,
                        help=f"seconds for the whole check, {MIN_BUDGET_S:g} to {MAX_BUDGET_S:g} (a device call's limit)")
    args = parser.parse_args(argv)
    if not MIN_BUDGET_S <= args.budget <= MAX_BUDGET_S:
        parser.error(f"--budget {args.budget:g}: give {MIN_BUDGET_S:g} to {MAX_BUDGET_S:g} seconds")
    started_wall = args.started or time.time()
    scale = DRY_CAP_SCALE if args.dry else 1
    deadline = time.monotonic() + scale * args.budget - (time.time() - started_wall)
    try:
        caps = {**{part: scale * seconds for part, seconds in BUDGET_S.items()}, **parse_caps(args.cap)}
    except ValueError as exc:
        parser.error(str(exc))
    asked = list(BUDGET_S)[1:] if args.parts is None else [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in asked if p not in gpu_check_parts.PARTS]
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}; choose from: {', '.join(gpu_check_parts.PARTS)}")
    plan = gpu_check_parts.DRY_PLAN if args.dry else gpu_check_parts.GPU_PLAN
    out = args.out or (REPO_ROOT / ("runs/gpu-check-dry" if args.dry else "results/gpu"))
    out.mkdir(parents=True, exist_ok=True)
    earlier = json.loads((out / JSON_NAME).read_text()) if args.update and (out / JSON_NAME).is_file() else None
    work = Path(tempfile.mkdtemp(prefix="pocketbert-gpu-check-"))
    if args.dry:
        share_export_caches(work / "cache")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
           "POCKETBERT_CACHE": str(work / "cache"), "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    result = {"what": "make gpu-check (scripts/gpu_check.py): the GPU figures", "mode": "dry" if args.dry
              else "gpu", "date": time.strftime("%Y-%m-%d"), **git_state(),
              "budget_s": {"total": scale * args.budget, "parts": caps}, "plan": dataclasses.asdict(plan), "parts": {}}

    def save() -> None:  # after every part, so a check stopped from outside keeps what it finished
        write_outputs(result if earlier is None else updated(earlier, result, asked), out)

    forked = False
    if args.dry:  # the steps' own environment before their modules read it on import (the hub offline)
        os.environ.update(env)
        forked = import_step_modules()
    with open(out / LOG_NAME, "w") as log:
        check = Check(plan, work, sys.executable, env, log, forked=forked)
        try:
            result["parts"]["setup"] = run_part(
                check, "setup", lambda c, fig: set_up(c, args.kit, args.dry, args.data_dir, args.model, fig),
                min(caps["setup"], deadline - time.monotonic()))
            result["setup_s"] = round(time.time() - started_wall, 1)
            save()
            for name in list(BUDGET_S)[1:]:
                cap = min(caps[name], deadline - time.monotonic() - WRAP_UP_S)
                if name not in asked:
                    record = {"status": SKIPPED, "reason": "not asked for (--parts)"}
                elif result["parts"]["setup"]["status"] != DONE:
                    record = {"status": SKIPPED, "reason": "the set-up did not finish"}
                elif cap <= 0:
                    record = {"status": SKIPPED, "reason": f"the {scale * args.budget} s of the whole check were spent"}
                else:
                    record = run_part(check, name, gpu_check_parts.PARTS[name], cap)
                result["parts"][name] = record
                result["wall_time_s"] = round(time.time() - started_wall, 1)
                save()
        finally:
            result["wall_time_s"] = round(time.time() - started_wall, 1)
            result["skipped"] = [f"{name}: {r['status']}, {r['reason']}" for name, r in result["parts"].items()
                                 if r["status"] != DONE]
            save()
            if not args.keep_work:
                shutil.rmtree(work, ignore_errors=True)
    failed = any(r["status"] == FAILED for r in result["parts"].values())
    if earlier is not None:
        result = updated(earlier, result, asked)
    print(gpu_check_render.render_table(result))
    print(f"-> {out / JSON_NAME}, {out / TABLE_NAME}, {out / LOG_NAME}" + (f" (work kept in {work})"
                                                                           if args.keep_work else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
