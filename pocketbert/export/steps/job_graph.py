"""A parallel export's work as jobs that name what they wait for, and how many processes the machine can hold.

Each variant's record (variants.py) says which files its build reads and which of the context's programs it shares
with others; from those this module makes the jobs: a build job per group of variants made from one shared program
(built once, in one process, in plan order), a gate job and, for an Apple program, a placement job per variant,
the ONNX Runtime mobile-usability checks, each app language's exhaustive tokenizer check, and the text-in
tokenizer graph's exhaustive check split by ranges of code points. Nothing is built twice: a shared program, the
calibration set and the enumerated lengths are made once (the last two in the export's own process, before any
job needs them).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# A job's kinds: what a worker process runs (job_worker.RUNS) or, for MERGE, the export's own process.
APP_TOKENIZER, TOKENIZER_PART, MERGE, GOLDEN, BUILD, GATE, PLACE, USABILITY = (
    "app tokenizer", "tokenizer part", "merge", "golden", "build", "gate", "place", "usability")
TOKENIZER_CHECK = "text-in tokenizer check"  # the MERGE job the text-in builds wait for
TOKENIZER_GOLDEN_JOB = "text-in golden ids"

# What one worker process needs in memory, for the cap on processes (workers_for): the imported runtimes (torch,
# coremltools, ONNX Runtime, ExecuTorch: about 1.5 GiB resident each on the default run) and this many copies of
# the student's weights (the model itself, a traced or exported graph, a converted program, its compressed copy).
WORKER_BASE_BYTES = 3 * 2**30 // 2
WEIGHT_COPIES = 8


@dataclass(frozen=True)
class Job:
    name: str                       # unique; the progress line names it
    kind: str
    args: tuple = ()
    after: tuple[str, ...] = ()     # the jobs whose results it needs (their files, their notes)
    needs_context: bool = False     # runs on the export's BuildContext and GateInputs (sent once to each worker)
    variants: tuple[str, ...] = ()  # the variants it builds, gates or places, in plan order


def machine_cores() -> int:
    """The cores this process may run on (a container's or taskset's share, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS: no affinity masks
        return os.cpu_count() or 1


def available_memory() -> int:
    """Bytes the kernel says can be taken without swapping: /proc/meminfo's MemAvailable, else free pages."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def workers_for(jobs: int, parallel_jobs: int, weight_bytes: int, memory: int | None = None) -> tuple[int, int]:
    """(processes, threads each) for `jobs` cores: no more processes than jobs that can run at once nor than
    available memory holds at WORKER_BASE_BYTES + WEIGHT_COPIES x the weights each; processes x threads <= jobs."""
    memory = available_memory() if memory is None else memory
    fits = max(1, memory // (WORKER_BASE_BYTES + WEIGHT_COPIES * weight_bytes))
    processes = max(1, min(jobs, parallel_jobs, fits))
    return processes, max(1, jobs // processes)


def build_groups(plan: list) -> list[list]:
    """The plan's variants in build jobs: those sharing a program together, each group where its first member is."""
    groups: dict[str, list] = {}
    for variant in plan:
        groups.setdefault(variant.shares or variant.name, []).append(variant)
    return list(groups.values())


def build_name(group: list) -> str:
    return f"build {', '.join(v.name for v in group)}"


def plan_jobs(plan: list, task, apple_programs: set[str], usability_checked: tuple[str, ...],
              app_languages: tuple[str, ...], app_check: tuple, tokenizer_parts: list[tuple[int, int]] | None,
              tokenizer_check: tuple) -> list[Job]:
    """Every job of a parallel export, in the order a free worker takes them (the first whose waits are over).

    app_check: what each app language's check reads (export folder, contexts); tokenizer_parts: the probe ranges of
    the text-in tokenizer check to run, or None when no variant needs the checked tokenizer or the check's result
    is cached (then MERGE reads it, waiting for nothing); tokenizer_check: what each part reads (tokenizer.json,
    text inputs, offsets, contexts)."""
    jobs = [Job(f"{APP_TOKENIZER} {language}", APP_TOKENIZER, (language, *app_check)) for language in app_languages]
    names = {v.name for v in plan}
    text_in = [v for v in plan if v.checked_tokenizer]
    if text_in:
        parts = [Job(f"{TOKENIZER_PART} {k + 1}/{len(tokenizer_parts)} (probes {a}-{b})", TOKENIZER_PART,
                     (*tokenizer_check, a, b)) for k, (a, b) in enumerate(tokenizer_parts or [])]
        jobs += parts
        jobs.append(Job(TOKENIZER_CHECK, MERGE, after=tuple(p.name for p in parts)))
        jobs.append(Job(TOKENIZER_GOLDEN_JOB, GOLDEN, needs_context=True))
    built_by = {}
    for group in build_groups(plan):
        for variant in group:
            built_by[variant.name] = build_name(group)
        after = {built_by[r] for v in group for r in v.reads if r in names}
        if any(v.checked_tokenizer for v in group):
            after |= {TOKENIZER_CHECK, TOKENIZER_GOLDEN_JOB}
        jobs.append(Job(build_name(group), BUILD, after=tuple(sorted(after)), needs_context=True,
                        variants=tuple(v.name for v in group)))
    for variant in plan:
        jobs.append(Job(f"gate {variant.file_name(task)}", GATE, after=(built_by[variant.name],), needs_context=True,
                        variants=(variant.name,)))
        if variant.file_name(task) in apple_programs:
            jobs.append(Job(f"place {variant.file_name(task)}", PLACE, after=(built_by[variant.name],),
                            needs_context=True, variants=(variant.name,)))
    for name in usability_checked:
        if name in built_by:
            jobs.append(Job(f"mobile usability {name}", USABILITY, after=(built_by[name],), needs_context=True,
                            variants=(name,)))
    return jobs


def check_graph(jobs: list[Job]) -> None:
    """Every wait names an earlier job: a plan whose records name a later or missing variant is a bug, caught here
    before any process starts."""
    seen: set[str] = set()
    for job in jobs:
        missing = [a for a in job.after if a not in seen]
        if missing or job.name in seen:
            raise ValueError(f"job {job.name!r} waits for {missing or 'itself'}, not an earlier job")
        seen.add(job.name)
