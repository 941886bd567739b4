"""`pocketbert export` in five named steps: plan (export/steps/plan.py: the student read, the programs chosen, nothing
written), build, place and gate (each program made, its placement read, its runtime held to the student: one
after another in export/steps/serial_export.py or in workers in export/steps/parallel_export.py), and record
(export/steps/record.py: parity.json, placement.json, the manifest). The folder appears whole or not at all."""

from __future__ import annotations

import contextlib
import time
from contextlib import ExitStack
from pathlib import Path

from tqdm.auto import tqdm

from pocketbert.core.config.export_request import ExportRequest
from pocketbert.core.run.atomic_folder import staged_output
from pocketbert.core.run.run_files import EXPORT_DIR
from pocketbert.core.students.inference import batched_logits, torch_forward
from pocketbert.core.students.models import load_tokenizer, quiet_transformers
from pocketbert.export.checks import parity
from pocketbert.export.programs import variants
from pocketbert.export.app import qa_postprocess
from pocketbert.export.app.app_files import write_app_files
from pocketbert.export.evaluators import placement
from pocketbert.export.steps.plan import ExportPlan, plan_export
from pocketbert.export.steps.record import record_gates, record_manifest
from pocketbert.export.text_in import qa_graph

# The .ort files are the dynamic int8 and the static QDQ graphs; the fp32 one shows what an accelerator could
# take without quantized ops.
USABILITY_CHECKED = ("onnx", "onnx-int8", "onnx-qdq")


@contextlib.contextmanager
def interrupts_remembered():
    """Ctrl-C (and SIGTERM, which the command raises as Terminated) raise as always, and are also remembered: code
    that catches BaseException on the way (a converter, a worker pool under load) cannot make an interrupted export
    publish. Yields a function giving the exception to raise for the first signal seen, or None."""
    import signal
    import threading

    from pocketbert.core.process.termination import Terminated

    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:  # Ctrl-C handled otherwise: left so
        yield lambda: None
        return
    handled = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    handled = {sig: handler for sig, handler in handled.items() if callable(handler)}
    seen = []

    def remember(signum, frame):
        seen.append(signum)
        handled[signum](signum, frame)

    for sig in handled:
        signal.signal(sig, remember)
    try:
        yield lambda: None if not seen else (Terminated if seen[0] == signal.SIGTERM else KeyboardInterrupt)
    finally:
        for sig, handler in handled.items():
            if signal.getsignal(sig) is remember:  # a handler that reset itself meanwhile stays as it set itself
                signal.signal(sig, handler)


def export_run(request: ExportRequest) -> tuple[Path, list[parity.ParityResult]]:
    """The export of a request the command built and checked (export/steps/plan.py check_request)."""
    run_dir = request.run_dir
    plan = plan_export(request)
    with staged_output(run_dir, EXPORT_DIR, request.overwrite) as out, ExitStack() as workers, \
            interrupts_remembered() as interrupted:
        steps = tqdm(total=len(plan.variants) + 2, desc="export", unit="step", disable=plan.jobs > 1)
        phase = time.perf_counter()
        app_files = write_app_files(plan.model, plan.tokenizer, plan.task, out, plan.max_length)
        runner = _runner(plan, out, workers)  # started on what needs no student: the tokenizer checks
        context, given, more_app_files = _gate_inputs(plan, out)
        steps.update()
        prepared_s = round(time.perf_counter() - phase, 2)
        built = runner.finish(context, given, steps)
        built.timings["app_files_and_student_s"] = prepared_s
        steps.close()
        workers.close()
        rows = record_gates(out, built)
        signalled = interrupted()
        if signalled is not None:  # a Ctrl-C or SIGTERM that a library's handler took on the way: nothing published
            raise signalled()
        record_manifest(plan, out, built, rows, app_files + more_app_files)
    return Path(run_dir) / EXPORT_DIR, built.results


def _runner(plan: ExportPlan, out: Path, workers: ExitStack):
    """The build, place and gate steps' runner, started: workers for export.jobs > 1, else this process."""
    if plan.jobs > 1:
        from pocketbert.export.steps.parallel_export import ParallelExport

        return workers.enter_context(ParallelExport(
            out, plan.variants, plan.task, plan.export, plan.jobs,
            sum(p.numel() * p.element_size() for p in plan.model.parameters()), USABILITY_CHECKED,
            placement.is_apple_program))
    from pocketbert.export.steps.serial_export import SerialExport

    return SerialExport(out, plan.variants, plan.export, USABILITY_CHECKED)


def _gate_inputs(plan: ExportPlan, out: Path) -> tuple[variants.BuildContext, variants.GateInputs, list[Path]]:
    """What the builds share and what every gate compares against: the student's logits on the parity examples,
    tokenized by the exported tokenizer files as an app tokenizes. A QA export also writes the app's answer
    routines and their golden answers here (the files are returned)."""
    task, evaluation = plan.task, plan.recipe.eval
    quiet_transformers()  # a BiLSTM's config.json names a model type transformers does not know, on purpose
    app_tokenizer = load_tokenizer(str(out))
    features = task.features(app_tokenizer, plan.examples, plan.max_length, plan.doc_stride)
    pad_id = app_tokenizer.pad_token_id
    student_logits = batched_logits(task, features, pad_id, evaluation.batch_size, torch_forward(plan.model, task),
                                    "student")
    app_files = []
    if task.answers_in_graph:  # for apps whose model returns per-window logits: routines and golden answers
        app_files = qa_postprocess.write_app_routines(
            out, app_tokenizer, plan.examples, features, student_logits, evaluation, plan.max_length,
            qa_graph.effective_stride(plan.max_length, plan.doc_stride))
    context = variants.BuildContext(
        model=plan.model, task=task, architecture=plan.architecture, tokenizer=app_tokenizer, data=plan.data,
        out=out, max_length=plan.max_length, doc_stride=plan.doc_stride, batch_size=evaluation.batch_size,
        seed=plan.recipe.seed, export=plan.export, eval=evaluation, row_shares=plan.row_shares,
        description=plan.description())
    # Whole examples only (a QA example spans several windows): the features of the first n examples.
    n_features = {"parity": len(features), "coreml": task.features_for_examples(features, plan.n_coreml)}
    given = variants.GateInputs(task, plan.examples, features, student_logits, n_features, pad_id,
                                evaluation.batch_size, evaluation)
    return context, given, list(app_files)
