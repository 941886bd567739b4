"""One worker process of a parallel export: it takes jobs (job_graph.Job) from the export's process one at a time
and answers each with its result, the notes its builds wrote for the manifest, and its seconds, or with the error
that stopped it.

It is started with the spawn method (torch and fork do not mix), so this module imports nothing heavy before it
has capped its threads: the environment it sets is what torch, OpenMP and ONNX Runtime read when they load.
"""

from __future__ import annotations

import os
import pickle
import signal
import time
import traceback

from pocketbert.export.steps import job_graph

# The libraries' own thread-count variables, set before any of them loads.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
FAULT_STALL_S = 600  # export_job_stalls: longer than any test waits for the export to end


def serve(conn, parent_pid: int, threads: int) -> None:
    """The worker's loop: ("context", bytes) once, then ("job", name, kind, args, variants, notes) until ("stop",)."""
    from pocketbert.core.process import parent_watch
    from pocketbert.core.process.collector import collect_less
    from pocketbert.core.process.launch_env import SESSION_THREADS_ENV

    collect_less()  # before torch and the programs' tools load

    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    os.environ[SESSION_THREADS_ENV] = str(threads)
    os.environ[parent_watch.PARENT_ENV] = str(parent_pid)
    parent_watch.stop_with_parent()  # the export's process killed, SIGKILL included: its workers end too
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the export's process's to take: it stops the workers
    os.setpgrp()  # a group of its own, which the export's process ends with every program this worker started

    import logging

    import torch

    torch.set_num_threads(threads)
    # what the export's own process keeps quiet: coremltools' warnings as it loads without Apple's frameworks
    logging.getLogger("coremltools").setLevel(logging.ERROR)
    state = {"threads": threads}
    while True:
        message = conn.recv()
        if message[0] == "stop":
            return
        if message[0] == "context":
            from pocketbert.core.process.quiet import quiet_tools

            with quiet_tools():  # loading the student imports the converters, which log as they load
                state["context"], state["given"] = pickle.loads(message[1])
            continue
        _, name, kind, args, variants, notes = message
        started = time.perf_counter()
        try:
            result, new_notes = RUNS[kind](state, args, variants, notes)
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the export's process, which stops
            conn.send(("failed", name, _picklable(exc), traceback.format_exc()))
            continue
        conn.send(("done", name, result, new_notes, round(time.perf_counter() - started, 2)))


def _picklable(exc: BaseException) -> BaseException:
    """The exception itself where it survives pickling (an ExportError keeps its class and exit status), else a
    RuntimeError that names it."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any failure to pickle
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _with_notes(state: dict, notes: dict):
    """The context with the notes the export has so far (the checked tokenizer's, ...); the keys a job adds or
    changes go back with its result."""
    import copy

    context = state["context"]
    context.notes = copy.deepcopy(notes)
    return context


def _changed(before: dict, after: dict) -> dict:
    return {k: v for k, v in after.items() if k not in before or before[k] != v}


def _app_tokenizer(state, args, variants, notes):
    from pocketbert.core.run.run_files import TOKENIZER_GOLDEN, TOKENIZER_JSON, TOKENIZER_TABLES
    from pocketbert.export.app import app_programs

    language, out, contexts = args
    return app_programs.app_tokenizer_check_of(language, out / TOKENIZER_JSON, out / TOKENIZER_TABLES,
                                               out / TOKENIZER_GOLDEN, contexts), {}


def _tokenizer_part(state, args, variants, notes):
    from pocketbert.export.text_in import tokenizer_check

    tokenizer_json, text_inputs, offsets, contexts, start, stop = args
    return tokenizer_check.check_part(tokenizer_json, text_inputs, offsets, contexts, start, stop,
                                      state["threads"]), {}


def _golden(state, args, variants, notes):
    from pocketbert.export.programs.variants import check_golden

    context = _with_notes(state, notes)
    check_golden(context)
    return None, _changed(notes, context.notes)


def _build(state, args, variants, notes):
    """The group's variants built in plan order, each timed; a shared program is converted by the first."""
    from pocketbert.core.process.faults import fault_asked
    from pocketbert.core.errors import ExportError
    from pocketbert.export.programs.variants import VARIANTS

    context = _with_notes(state, notes)
    seconds = {}
    for name in variants:
        variant = VARIANTS[name]
        started = time.perf_counter()
        variant.build(context, context.out / variant.file_name(context.task))
        seconds[name] = round(time.perf_counter() - started, 2)
        if fault_asked("export_job_fails", name):
            raise ExportError(f"the build of {name} failed (POCKETBERT_FAULT asked for it)")
        if fault_asked("export_job_killed", name):
            os.kill(os.getpid(), signal.SIGKILL)
        if fault_asked("export_job_stalls", name):  # an export that cannot end before the test's Ctrl-C lands
            time.sleep(FAULT_STALL_S)
    return seconds, _changed(notes, context.notes)


def _gate(state, args, variants, notes):
    from pocketbert.export.programs.variants import VARIANTS

    context, variant = state["context"], VARIANTS[variants[0]]
    return variant.runtime.gate(variant, context.out / variant.file_name(context.task), state["given"]), {}


def _place(state, args, variants, notes):
    from pocketbert.export.evaluators import placement
    from pocketbert.export.programs.variants import VARIANTS

    context = state["context"]
    return placement.check(context.out / VARIANTS[variants[0]].file_name(context.task)), {}


def _usability(state, args, variants, notes):
    from pocketbert.export.checks import mobile_usability

    context = state["context"]
    return mobile_usability.usability(context.path(variants[0]), context.max_length), {}


RUNS = {job_graph.APP_TOKENIZER: _app_tokenizer, job_graph.TOKENIZER_PART: _tokenizer_part,
        job_graph.GOLDEN: _golden, job_graph.BUILD: _build, job_graph.GATE: _gate, job_graph.PLACE: _place,
        job_graph.USABILITY: _usability}
