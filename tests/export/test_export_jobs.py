"""`pocketbert export --jobs N`: the parallel export holds the serial export's artifacts (scripts/export_jobs_timing.py
compares them), a failing or killed worker publishes nothing and ends the export in one line, a count that is no
count of processes is refused, and the plan's jobs wait only for jobs before them."""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import pytest
from helpers import QUICK_EXPORT, error_line, linked_copy, run_cli

from pocketbert.core.process import exit_codes
from pocketbert.core.run import run_files
from pocketbert.core.run.manifest import read_manifest
from pocketbert.core.run.stage_records import ExportRecord
from pocketbert.core.process.faults import FAULT_ENV
from pocketbert.core.config import export_families as families
from pocketbert.export.programs import variants
from pocketbert.export.steps import job_graph

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "export_jobs_timing.py"
JOBS = 2
# The first build: its file is on disk when the fault strikes, and the export has the least left to do.
FAULTED_VARIANT = "onnx"
REAPED_WITHIN_S = 10
MIN_FILES_COMPARED = 10  # the ONNX family's models and operator lists, the tokenizer and app files
BROKEN_CODES = (0x41, 0x3B1, 0x4E00, 0xAC00, 0xE000, 0x1F600, 0xF0007)  # more than NAMED_MISMATCHES, in many parts


def _timing_script():
    spec = importlib.util.spec_from_file_location("export_jobs_timing", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nothing_published(run: Path) -> None:
    assert not (run / run_files.EXPORT_DIR).exists()
    assert not [p.name for p in run.iterdir() if p.name.startswith(f".{run_files.EXPORT_DIR}.")]  # no staging left


@pytest.mark.slow
def test_the_parallel_export_holds_the_serial_exports_artifacts(quick_exported_run, tmp_path, shared_data):
    """The serial side is the session's quick export (the tiny preset exports in one process): the same student and
    options, made by `pocketbert export` in the test process."""
    run = linked_copy(quick_exported_run, tmp_path / "run", ["teacher", "student"])
    serial = quick_exported_run / run_files.EXPORT_DIR
    assert "parallel" not in read_manifest(serial, ExportRecord).metrics.timings  # made in one process
    result = _timing_script().compare(run, JOBS, shared_data, QUICK_EXPORT, serial_export=serial)
    assert result["parallel"]["processes"] == JOBS  # it did run in worker processes
    assert result["files_compared"] >= MIN_FILES_COMPARED
    assert result["files_differing"] == []  # every ONNX, ORT, tokenizer and app file, byte for byte
    assert result["compared_by_gate_figures"]  # the Core ML program, whose converter stamps UUIDs and dates
    assert result["gates_differing"] == [] and result["manifest_records_differing"] == []
    assert result["agree"]


@pytest.mark.slow
@pytest.mark.parametrize("fault, says", [
    (f"export_job_fails:{FAULTED_VARIANT}", f"the build of {FAULTED_VARIANT} failed"),
    (f"export_job_killed:{FAULTED_VARIANT}", "a worker process of the export was killed (signal 9)"),
])
def test_a_failing_worker_stops_the_export_and_publishes_nothing(quick_exported_run, tmp_path, capsys, shared_data,
                                                                 monkeypatch, fault, says):
    run = linked_copy(quick_exported_run, tmp_path / "run", ["teacher", "student"])
    monkeypatch.setenv(FAULT_ENV, fault)  # the spawned workers read it from this process's environment
    result = run_cli(capsys, "export", "--run", run, "--data-dir", shared_data, "--jobs", JOBS, *QUICK_EXPORT)
    assert result.exit_code == exit_codes.USAGE
    assert says in error_line(result) and error_line(result).startswith("error: ")
    _nothing_published(run)


@pytest.mark.parametrize("given", [("--jobs", "0"), ("--jobs", "-2"), ("--set", "export.jobs=0")])
def test_a_count_of_jobs_below_one_is_refused_in_one_line(tmp_path, capsys, given):
    result = run_cli(capsys, "export", "--run", tmp_path / "none", *given)
    assert result.exit_code == exit_codes.USAGE
    line = error_line(result)
    assert "jobs" in line and len(result.err.strip().splitlines()) == 1, result.err


def test_each_job_waits_only_for_earlier_jobs_and_a_shared_program_is_built_once():
    from pocketbert.core.students.architectures import ARCHITECTURES
    from pocketbert.core.tasks.registry import make_task

    task, architecture = make_task("qa"), ARCHITECTURES["bert-family"]  # QA: the one-call graphs' waits too
    plan = variants.selected(list(families.COREML.names), task, architecture, list(families.COREAI.names))
    jobs = job_graph.plan_jobs(plan, task, {v.file_name(task) for v in plan if v.family != "onnx"}, ("onnx",),
                               ("swift",), (Path("out"), ("alone",)), [(0, 100), (100, 200)], ("t", ("text",)))
    job_graph.check_graph(jobs)  # raises on a wait for a later or missing job
    builds = [j for j in jobs if j.kind == job_graph.BUILD]
    built = [name for j in builds for name in j.variants]
    assert sorted(built) == sorted(v.name for v in plan)  # each variant in exactly one build
    shared = {v.shares for v in plan if v.shares}
    for program in shared:  # the variants of one shared program in one job, in plan order
        members = [v.name for v in plan if v.shares == program]
        assert any(list(j.variants) == members for j in builds), program
    by_variant = {name: j for j in builds for name in j.variants}
    for v in plan:  # a build waits for the builds of the files it reads
        assert {by_variant[r].name for r in v.reads} <= set(by_variant[v.name].after)
        if v.checked_tokenizer:
            assert job_graph.TOKENIZER_CHECK in by_variant[v.name].after


def test_processes_are_bounded_by_jobs_by_what_can_run_at_once_and_by_memory():
    gib = 2**30
    assert job_graph.workers_for(16, 40, 100 * 2**20, memory=128 * gib) == (16, 1)
    assert job_graph.workers_for(16, 5, 100 * 2**20, memory=128 * gib) == (5, 3)  # 5 x 3 <= 16
    per_worker = job_graph.WORKER_BASE_BYTES + job_graph.WEIGHT_COPIES * gib
    assert job_graph.workers_for(16, 40, gib, memory=3 * per_worker) == (3, 5)
    assert job_graph.workers_for(4, 40, gib, memory=gib) == (1, 4)  # never fewer than one


def test_the_machine_cores_are_the_default(monkeypatch):
    from pocketbert.core.config.recipe import ExportSection
    from pocketbert.export.steps.plan import export_jobs

    assert export_jobs(ExportSection(jobs=None)) == len(os.sched_getaffinity(0))
    assert export_jobs(ExportSection(jobs=3)) == 3


@pytest.mark.slow  # the code-point table is derived once a session (~30 s)
def test_the_tokenizer_check_split_by_code_point_ranges_merges_to_the_whole_checks_result(wordpiece_tokenizer,
                                                                                         tmp_path):
    import json
    from dataclasses import replace

    from pocketbert.export.text_in import tokenizer_check
    from pocketbert.export.text_in.text_tokenizer import mapping_for

    wordpiece_tokenizer.save_pretrained(tmp_path)
    data = json.loads((tmp_path / "tokenizer.json").read_text(encoding="utf-8"))
    mapping = mapping_for(data)
    broken = replace(mapping, rows={**mapping.rows, **{code: (0x62,) for code in BROKEN_CODES}})
    blocks = [chr(c) for code in BROKEN_CODES for c in range(code & ~0xFF, (code | 0xFF) + 1)]
    probes = [form.format(ch) for form in tokenizer_check.CONTEXTS.values() for ch in blocks]
    whole = tokenizer_check.run_check(data, ("text",), False, probes, broken)
    ranges = tokenizer_check.part_ranges(len(probes), ("text",), 3)
    assert len(ranges) == 3 and ranges[0][0] == 0 and ranges[-1][1] == len(probes)
    assert all(a % tokenizer_check.PROBES_PER_TEXT == 0 for a, _ in ranges)  # each part starts a text
    parts = [tokenizer_check.run_check(data, ("text",), False, probes[a:b], broken, workers=1, named=None)
             for a, b in ranges]
    merged = tokenizer_check.merged(parts, seconds=0.0)
    timing = ("seconds", "workers")
    assert whole["mismatch_count"] > tokenizer_check.NAMED_MISMATCHES
    assert sum(1 for p in parts if p["mismatch_count"]) >= 2  # the mismatches fall in several parts
    assert {k: v for k, v in merged.items() if k not in timing} == {k: v for k, v in whole.items() if k not in timing}


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc")
def test_ctrl_c_stops_every_worker_and_publishes_nothing(quick_exported_run, tmp_path, shared_data):
    import signal
    import subprocess
    import sys

    from pocketbert.boundary import INTERRUPTED_LINE

    run = linked_copy(quick_exported_run, tmp_path / "run", ["teacher", "student"])
    # One build sleeps in its worker: the export cannot finish before the Ctrl-C lands, however late a loaded
    # machine lets this test read the first job's line.
    process = subprocess.Popen([sys.executable, "-m", "pocketbert.cli", "export", "--run", str(run), "--data-dir",
                                str(shared_data), "--jobs", str(JOBS), *QUICK_EXPORT],
                               stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                               env={**os.environ, FAULT_ENV: f"export_job_stalls:{FAULTED_VARIANT}"},
                               # a background job (make test under `&`, some CI runners) starts with SIGINT ignored,
                               # and the export would inherit it: the test is of a terminal's Ctrl-C
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        for line in process.stderr:  # the first finished job: the workers are running
            if line.startswith("export ["):
                break
        workers = _children(process.pid)
        assert workers, "no worker process was running"
        process.send_signal(signal.SIGINT)
        rest = process.stderr.read()
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == exit_codes.INTERRUPTED
    assert rest.strip().splitlines()[-1] == INTERRUPTED_LINE
    deadline = time.monotonic() + REAPED_WITHIN_S  # an ended worker is reaped by init a moment after its parent
    while [pid for pid in workers if _alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in workers if _alive(pid)]
    _nothing_published(run)
