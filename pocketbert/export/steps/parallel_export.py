"""The export's builds, placement checks, usability checks and gates in worker processes (export.jobs > 1): the
same files and the same records as the serial export, in the time the longest chain of them takes.

start() spawns the workers as soon as the tokenizer files are written and hands them what needs no student (each
app language's tokenizer check, the text-in tokenizer check in ranges of code points); finish() sends the student
and the gate's inputs once to each worker, runs the builds and gates as their inputs are ready and gives back what
the serial export's loops give: the gate results in plan order, the placements, the usability verdicts, the
builders' notes and the timings.
"""

from __future__ import annotations

import copy
import pickle
import sys
import time
from pathlib import Path

from pocketbert.core.config.recipe import ExportSection
from pocketbert.core.run.run_files import TOKENIZER_JSON
from pocketbert.export.steps import job_graph
from pocketbert.export.app import app_programs
from pocketbert.export.steps.built import Built
from pocketbert.export.steps.job_graph import Job
from pocketbert.export.steps.process_pool import WorkerPool

# Builders' notes that several variants add to (each appends its own): joined in plan order, not replaced.
APPENDED_NOTES = ("coreml_warnings",)
# What the serial export computes on first use inside a build, made here once before the workers start: the
# calibration set (int8 and static int8) and the enumerated lengths (enumerated, ane and Core AI programs).
CALIBRATED = ("onnx-int8", "onnx-qdq")
LENGTH_SHARES = ("ane_programs", "coreai_program", "coreai_ane_program")
LENGTH_VARIANTS = ("enumerated",)


class ParallelExport:
    def __init__(self, out: Path, plan: list, task, export: ExportSection, jobs: int, weight_bytes: int,
                 usability_checked: tuple[str, ...], is_apple_program):
        from pocketbert.export.text_in import tokenizer_check

        self.out, self.plan, self.task, self.started = out, plan, task, time.perf_counter()
        contexts = tuple(export.tokenizer_check_contexts)
        offsets = "offset_mapping" in task.text_in_extra_outputs
        check = (out / TOKENIZER_JSON, task.text_in_inputs, offsets, contexts)
        self.cached_check = tokenizer_check.cached(*check)
        apple = {v.file_name(task) for v in plan if is_apple_program(out / v.file_name(task))}
        # as many processes as jobs can run at once (the probe ranges: one a core), as memory holds
        text_in = any(v.checked_tokenizer for v in plan)
        probe_ranges = jobs if text_in and self.cached_check is None else 0
        at_once = len(plan) + len(usability_checked) + len(app_programs.PROGRAMS) + probe_ranges
        self.processes, self.threads = job_graph.workers_for(jobs, at_once, weight_bytes)
        parts = None if self.cached_check is not None else tokenizer_check.part_ranges(
            tokenizer_check.probe_count(out / TOKENIZER_JSON, contexts), task.text_in_inputs, self.processes)
        self.jobs = job_graph.plan_jobs(plan, task, apple, usability_checked, tuple(app_programs.PROGRAMS),
                                        (out, contexts), parts, check)
        job_graph.check_graph(self.jobs)
        self._check = check
        self._check_started = time.perf_counter()
        self.pool = WorkerPool(self.processes, self.threads, len(self.jobs), self._progress)
        try:
            early = [j for j in self.jobs if not j.needs_context]
            self.pool.add(early, {j.name: self._merged_check for j in early if j.kind == job_graph.MERGE})
        except BaseException:
            self.pool.close()
            raise

    def _merged_check(self, results: dict) -> tuple[dict, dict]:
        """The text-in tokenizer check's parts merged (or its cached result), held to tokenizer.json."""
        from pocketbert.export.text_in import tokenizer_check

        result = self.cached_check
        if result is None:
            parts = [results[j.name] for j in self.jobs if j.kind == job_graph.TOKENIZER_PART]
            result = tokenizer_check.merge_parts(*self._check, parts, time.perf_counter() - self._check_started)
        tokenizer_check.require_equal(result)
        return result, {"text_in_exhaustive": result}

    def _progress(self, job: Job, result, seconds: float, done: int, total: int) -> None:
        """One line per finished job, as it finishes."""
        print(f"export [{done}/{total}] {job.name}: {seconds:.1f} s", file=sys.stderr, flush=True)

    def finish(self, context, given, steps=None) -> Built:
        """Every job run on `context` (variants.BuildContext) and `given` (variants.GateInputs). `steps`, the serial
        export's progress bar, is unused: each job prints its own line."""
        uses_lengths = any(v.shares in LENGTH_SHARES or v.name in LENGTH_VARIANTS for v in self.plan)
        if uses_lengths or {v.name for v in self.plan} & set(CALIBRATED):
            context.calibration  # noqa: B018 - computed once here, sent to every worker with the context
        if uses_lengths:
            context.length_buckets  # noqa: B018
        shipped = copy.copy(context)  # its cached calibration and lengths go along; the dataset stays here
        shipped.data = None
        self.pool.merged_notes.update(context.notes)
        self.pool.add([j for j in self.jobs if j.needs_context])
        self.pool.provide_context(pickle.dumps((shipped, given), protocol=pickle.HIGHEST_PROTOCOL))
        done = self.pool.run()
        return self._assembled(context, done)

    def _assembled(self, context, done: dict) -> Built:
        by_kind: dict[str, list[Job]] = {}
        for job in self.jobs:
            by_kind.setdefault(job.kind, []).append(job)
        notes = dict(context.notes)
        for job in self.jobs:  # plan order, as the serial export's builders write them
            for key, value in self.pool.notes.get(job.name, {}).items():
                if key in APPENDED_NOTES and key in notes:
                    notes[key] = notes[key] + [v for v in value if v not in notes[key]]
                else:
                    notes.setdefault(key, value)
        seconds = self.pool.seconds
        build_s = {name: s for job in by_kind.get(job_graph.BUILD, []) for name, s in done[job.name].items()}
        timings = {"build_s": {v.name: build_s[v.name] for v in self.plan},
                   "gate_s": {j.variants[0]: seconds[j.name] for j in by_kind.get(job_graph.GATE, [])},
                   "placement_s": round(sum(seconds[j.name] for j in by_kind.get(job_graph.PLACE, [])), 2),
                   "ort_usability_s": round(sum(seconds[j.name] for j in by_kind.get(job_graph.USABILITY, [])), 2),
                   # the seconds above are each job's own; these say how they ran together
                   "parallel": {"processes": self.processes, "threads_each": self.threads,
                                "jobs": len(self.jobs), "wall_s": round(time.perf_counter() - self.started, 2)}}
        return Built(
            results=[done[j.name] for j in by_kind.get(job_graph.GATE, [])],
            placements={context.path(j.variants[0]).name: done[j.name] for j in by_kind.get(job_graph.PLACE, [])},
            ort_usability={context.path(j.variants[0]).name: done[j.name]
                           for j in by_kind.get(job_graph.USABILITY, [])},
            app_tokenizers={j.args[0]: done[j.name] for j in by_kind.get(job_graph.APP_TOKENIZER, [])},
            notes=notes, timings=timings)

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> "ParallelExport":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
