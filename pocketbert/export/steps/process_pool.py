"""The worker processes of a parallel export, and the loop that hands them jobs as their waits are over.

A job's error stops every worker (each is sent SIGTERM, then SIGKILL) and is raised in the export's process as it
was raised in the worker, so the export ends with its one line and its exit status, and the staging folder, the
only place workers write, is removed unpublished. A worker that dies (the out-of-memory killer) ends the export
the same way; so does Ctrl-C, which the workers ignore and the export's process takes.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import wait

from pocketbert.core.errors import ExportError, PocketbertError
from pocketbert.export.steps import job_worker
from pocketbert.export.steps.job_graph import Job

STOP_WAIT_S = 10  # a worker asked to stop (or sent SIGTERM) has this long before SIGKILL


class _Worker:
    def __init__(self, context, parent_pid: int, threads: int, index: int):
        self.conn, child = context.Pipe()
        self.process = context.Process(target=job_worker.serve, args=(child, parent_pid, threads),
                                       name=f"pocketbert-export-{index}", daemon=True)
        self.process.start()
        child.close()
        self.job: Job | None = None
        self.has_context = False


class WorkerPool:
    """`processes` spawned workers of `threads` threads each; jobs added with add(), their results from run()."""

    def __init__(self, processes: int, threads: int, total: int,
                 on_done: Callable[[Job, object, float, int, int], None]):
        spawn = multiprocessing.get_context("spawn")
        self.workers = [_Worker(spawn, os.getpid(), threads, k) for k in range(processes)]
        self.pending: list[Job] = []
        self.results: dict[str, object] = {}
        self.notes: dict[str, dict] = {}     # per job: the notes it wrote (merged in plan order by the caller)
        self.seconds: dict[str, float] = {}
        self.merged_notes: dict = {}          # every finished job's notes so far: what the next job starts from
        self.context_bytes: bytes | None = None
        self.on_done = on_done
        self.total = total  # the jobs to come, for the progress lines
        self.in_parent: dict[str, Callable[[dict], tuple[object, dict]]] = {}

    def add(self, jobs: list[Job], in_parent: dict | None = None) -> None:
        """Jobs to run; in_parent: job name -> function(results) -> (result, notes) run in this process."""
        self.pending += jobs
        self.in_parent.update(in_parent or {})
        self._dispatch()

    def provide_context(self, payload: bytes) -> None:
        """The pickled (BuildContext, GateInputs) every context job runs on, sent once to each worker."""
        self.context_bytes = payload
        self._dispatch()

    def _ready(self, job: Job) -> bool:
        return all(a in self.results for a in job.after) and (self.context_bytes is not None or
                                                              not job.needs_context)

    def _finish(self, job: Job, result, notes: dict, seconds: float) -> None:
        self.results[job.name], self.notes[job.name], self.seconds[job.name] = result, notes, seconds
        self.merged_notes.update(notes)
        self.on_done(job, result, seconds, len(self.results), self.total)

    def _dispatch(self) -> None:
        progressed = True
        while progressed:
            progressed = False
            for job in [j for j in self.pending if j.name in self.in_parent and self._ready(j)]:
                self.pending.remove(job)
                started = time.perf_counter()
                result, notes = self.in_parent[job.name](self.results)
                self._finish(job, result, notes, round(time.perf_counter() - started, 2))
                progressed = True
        for worker in self.workers:
            if worker.job is not None:
                continue
            job = next((j for j in self.pending if j.name not in self.in_parent and self._ready(j)), None)
            if job is None:
                return
            self.pending.remove(job)
            if job.needs_context and not worker.has_context:
                worker.conn.send(("context", self.context_bytes))
                worker.has_context = True
            worker.conn.send(("job", job.name, job.kind, job.args, job.variants, dict(self.merged_notes)))
            worker.job = job

    def run(self) -> dict[str, object]:
        """Until every job is done: each result by job name. Raises the first job's error, every worker stopped."""
        try:
            while self.pending or any(w.job is not None for w in self.workers):
                busy = [w for w in self.workers if w.job is not None]
                if not busy:
                    waiting = ", ".join(j.name for j in self.pending[:3])
                    raise ExportError(f"the export's jobs wait for each other ({waiting}): a bug in the plan")
                ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy])
                for worker in busy:
                    if worker.conn in ready:
                        self._receive(worker)
                    elif worker.process.sentinel in ready:
                        self._receive_or_died(worker)
                self._dispatch()
        finally:
            self.close()
        return self.results

    def _receive_or_died(self, worker: _Worker) -> None:
        if worker.conn.poll():  # its answer came just before it ended (or the end of its pipe did)
            self._receive(worker)
            return
        self._died(worker)

    def _died(self, worker: _Worker) -> None:
        worker.process.join(STOP_WAIT_S)
        code = worker.process.exitcode
        how = f"was killed (signal {-code})" if code is not None and code < 0 else f"ended (exit {code})"
        raise ExportError(f"a worker process of the export {how} during {worker.job.name}: if the system ran out of "
                          "memory, export again with fewer --jobs")

    def _receive(self, worker: _Worker) -> None:
        try:
            message = worker.conn.recv()
        except EOFError:
            self._died(worker)
            return
        job, worker.job = worker.job, None
        if message[0] == "failed":
            _, _, exc, trace = message
            if not isinstance(exc, PocketbertError):  # not a user's error: the worker's traceback helps
                print(f"{job.name} failed in a worker process:\n{trace}", file=sys.stderr)
            raise exc
        _, _, result, notes, seconds = message
        self._finish(job, result, notes, seconds)

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop every worker: an idle one asked, a busy one sent SIGTERM with the programs it started (its process
        group), then SIGKILL; none outlives the export's process. Called again, it does nothing."""
        for worker in self.workers:
            if worker.process.is_alive() and worker.job is None:
                try:
                    worker.conn.send(("stop",))
                except OSError:
                    pass
            elif worker.process.is_alive():
                _signal_group(worker.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT_S
        for worker in self.workers:
            worker.process.join(max(0.0, deadline - time.monotonic()))
            if worker.process.is_alive():
                _signal_group(worker.process.pid, signal.SIGKILL)
                worker.process.join()
            worker.conn.close()
        self.workers = []


def _signal_group(pid: int, sig: int) -> None:
    """The worker leads a process group of its own (job_worker.serve): the converters and tokenizer programs it
    runs end with it."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
