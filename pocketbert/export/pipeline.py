"""`pocketbert export`: build every artifact from the student folder, prove parity, then move into place."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from contextlib import ExitStack
from pathlib import Path

from tqdm.auto import tqdm

from pocketbert.core.students.architectures import architecture_of
from pocketbert.core.tasks.data import subsample
from pocketbert.core.tasks.task_data import load_task_data
from pocketbert.core.students.inference import batched_logits, torch_forward
from pocketbert.core.students.models import load_tokenizer, quiet_transformers
from pocketbert.core.students.stage_folder import load_stage_model
from pocketbert.core.config.recipe import ExportSection, Recipe, complete_recipe, with_overrides
from pocketbert.core.errors import ConfigError, ExportError
from pocketbert.export import hub_layout, mobile_usability, onnx_export, parity, table_rows, variants
from pocketbert.export.app import qa_postprocess
from pocketbert.export.app import app_programs
from pocketbert.export.app.app_files import write_app_files
from pocketbert.export.evaluators import placement
from pocketbert.export.text_in import qa_graph
from pocketbert.core.students.piece_counts import count_pieces, recipe_texts
from pocketbert.export.fitted_student import read_fitted_student
from pocketbert.core.run.manifest import path_size, verified_stage, write_manifest
from pocketbert.core.run.atomic_folder import check_writable, staged_output
from pocketbert.core.run.run_files import (EXPORT_DIR, PARITY, PLACEMENT, STUDENT_DIR, TOKENIZER_GOLDEN, TOKENIZER_JSON,
                                       TOKENIZER_TABLES)
from pocketbert.core.run.user_paths import recorded_dataset

# The .ort files are the dynamic int8 and the static QDQ graphs; the fp32 one shows what an accelerator could
# take without quantized ops.
USABILITY_CHECKED = ("onnx", "onnx-int8", "onnx-qdq")


# What an export proves on this machine, and what only a phone can (the manifest says both).
PROVEN_HERE = [
    "every model in parity.json gave the student's answers on its own runtime: onnxruntime on the CPU, onnxruntime "
    "with onnxruntime-extensions for the text-in models (fed raw text), Core ML programs on Core ML on macOS or, "
    "elsewhere, evaluated op by op from the saved program (MIL interpreter)",
    "tokenizer.json, and the text-in models' tokenizer graph, give the ids of tokenizer_golden.json",
    "the text-in models' tokenizer graph gives tokenizer.json's ids (a pair: token types and offsets too) on every "
    "Unicode scalar value, alone, between words, inside a word and repeated",
    "the execution-provider verdicts (NNAPI, CoreML, XNNPACK), from checks of the graph files",
    "the Core ML program inside a Core ML-delegated ExecuTorch program (model.coreml.pte), taken out of the saved "
    "file and evaluated op by op",
]
NEEDS_A_DEVICE = [
    "Core ML on Apple hardware: which compute unit runs each program, the Neural Engine included (predicted here "
    "from the saved programs: placement.json, docs/placement.md)",
    "a Core ML-delegated ExecuTorch program through ExecuTorch's Core ML backend (Apple hardware only)",
    "NNAPI, XNNPACK and onnxruntime-extensions-android on an Android phone",
    "compiling and running the Swift and Kotlin of the app folders",
    "PocketBertTokenizer (the iOS folder's Swift package) against tokenizer_golden.json on the device, in the app's "
    "unit tests",
]


def _refuse_unknown(names: list[str], known: tuple[str, ...], key: str, family: str) -> None:
    unknown = [v for v in names if v not in known]
    if unknown:
        raise ExportError(f"export.{key} takes only {', '.join(known)} (got {names}); [] leaves {family} out")


def _refuse_misfits(names: list[str], prefix: str, what: str, remedy: str, task, architecture) -> None:
    misfits = [v for v in names if not variants.VARIANTS[prefix + v].applies_to(task, architecture)]
    if misfits:
        raise ExportError(f"{what} {', '.join(misfits)} does not apply to a {task.name} {architecture.name} "
                          f"student: {remedy}")


def check_coreml_choice(names: list[str], task, architecture) -> None:
    """Refuse, before any work, Core ML variants that do not exist or do not apply."""
    unknown = [v for v in names if v not in variants.COREML_VARIANTS]
    if unknown or "fp16" not in names:
        raise ExportError(f"export.coreml_variants must include fp16 and only {', '.join(variants.COREML_VARIANTS)} "
                          f"(got {names})")
    _refuse_misfits(names, "", "Core ML variant", "leave it out of export.coreml_variants", task, architecture)


def check_coreai_choice(names: list[str], task, architecture) -> None:
    """Refuse, before any work, Core AI variants that do not exist or do not apply, or a missing coreai extra."""
    import importlib.util

    _refuse_unknown(names, variants.COREAI_VARIANTS, "coreai_variants", "Core AI")
    _refuse_misfits(names, variants.COREAI_PREFIX, "Core AI variant", "set export.coreai_variants to []", task,
                    architecture)
    if names and any(importlib.util.find_spec(m) is None for m in ("coreai_torch", "coreai")):
        raise ExportError("the Core AI variants need coreai-torch and coreai-core: run `pip install "
                          "'pocketbert[coreai]'` (or `make install`), or set export.coreai_variants to []")


def check_executorch_choice(names: list[str], task, architecture) -> None:
    """Refuse, before any work, ExecuTorch programs that do not exist or do not apply."""
    _refuse_unknown(names, variants.EXECUTORCH_VARIANTS, "executorch_variants", "ExecuTorch")
    _refuse_misfits(names, "", "ExecuTorch program", "set export.executorch_variants to []", task, architecture)


def _applicable(names: list[str], family: str, prefix: str, task, architecture) -> list[str]:
    """A recipe's list of programs is written for BERT-family students (the `ane` layout needs attention, a BiLSTM
    has no ExecuTorch program): another architecture takes the programs it can, with a note. Asked for by name on
    the command line, a misfit is refused instead (check_coreml_choice, check_coreai_choice,
    check_executorch_choice)."""
    misfits = [n for n in names if prefix + n in variants.VARIANTS
               and not variants.VARIANTS[prefix + n].applies_to(task, architecture)]
    if misfits:
        print(f"note: the recipe's {family} {', '.join(misfits)} left out: it does not apply to a "
              f"{architecture.name} student", file=sys.stderr)
    return [n for n in names if n not in misfits]


def _chosen(given: list[str] | None, from_recipe: list[str] | None, defaults: tuple[str, ...], family: str,
            prefix: str, task, architecture) -> list[str]:
    """A family's programs: as given on the command line (a misfit is then refused); else the recipe's list, less
    what this architecture cannot take; with none in the recipe, the defaults this architecture takes."""
    if given is not None:
        return given
    if from_recipe is None:
        return [n for n in defaults if variants.VARIANTS[prefix + n].applies_to(task, architecture)]
    return _applicable(from_recipe, family, prefix, task, architecture)


def export_jobs(export: ExportSection) -> int:
    """export.jobs, or every core this process may run on where the recipe leaves it unset."""
    from pocketbert.export.job_graph import machine_cores

    return export.jobs or machine_cores()


def export_recipe(recorded: dict, settings: dict | None = None) -> Recipe:
    """The student's recorded recipe, typed, with the export-section keys given on the command line (`settings`,
    null included) over its own and validated again: a bad value is one line naming the key."""
    recipe = complete_recipe(recorded)
    if not settings:
        return recipe
    return with_overrides(recipe, {f"export.{key}": value for key, value in settings.items()}, "export option",
                          keep_none=True)


@contextlib.contextmanager
def interrupts_remembered():
    """Ctrl-C raises KeyboardInterrupt as always, and is also remembered: code that catches BaseException on the
    way (a converter, a worker pool under load) cannot make an interrupted export publish."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:  # Ctrl-C handled otherwise: left so
        yield lambda: False
        return
    seen = []

    def remember(signum, frame):
        seen.append(signum)
        signal.default_int_handler(signum, frame)

    previous = signal.signal(signal.SIGINT, remember)
    try:
        yield lambda: bool(seen)
    finally:
        signal.signal(signal.SIGINT, previous)


def export_run(run_dir: Path, data_dir: Path | None = None, overwrite: bool = False, settings: dict | None = None,
               coreml_variants: list[str] | None = None, coreai_variants: list[str] | None = None,
               executorch_variants: list[str] | None = None) -> tuple[Path, list[parity.ParityResult]]:
    """settings: export-section keys given on the command line (parity_examples, vocabulary, ...), over the
    recipe's. The variant lists, given, are the programs asked for by name (a misfit is refused, not left out)."""
    started = time.time()
    check_writable(run_dir, EXPORT_DIR, overwrite)
    student_dir, student_manifest = verified_stage(run_dir, STUDENT_DIR, "pocketbert train distill")
    model, tokenizer, task, info = load_stage_model(student_dir)
    architecture = architecture_of(info)
    recipe = export_recipe(student_manifest["config"]["recipe"], settings)
    export, evaluation = recipe.export, recipe.eval
    shaping = sorted(k for k in settings or {} if k.startswith("vocabulary_"))
    if shaping and export.vocabulary != "fitted":
        raise ConfigError(f"{', '.join('--' + k.replace('_', '-') for k in shaping)} shape a fitted vocabulary, and "
                          "this export keeps the full one: add --vocabulary fitted")
    max_length = export.max_length or info["max_length"]
    seed = recipe.seed
    coreml_names = list(coreml_variants or export.coreml_variants)
    if not coreml_variants:
        coreml_names = _applicable(coreml_names, "Core ML", "", task, architecture)
    check_coreml_choice(coreml_names, task, architecture)
    coreai_names = _chosen(coreai_variants, export.coreai_variants, variants.DEFAULT_COREAI, "Core AI",
                           variants.COREAI_PREFIX, task, architecture)
    check_coreai_choice(coreai_names, task, architecture)
    executorch_names = _chosen(executorch_variants, export.executorch_variants,
                               variants.EXECUTORCH_VARIANTS, "ExecuTorch", "", task, architecture)
    check_executorch_choice(executorch_names, task, architecture)
    dataset = recorded_dataset(run_dir, recipe.dataset)  # a local file, wherever this command runs from
    data = load_task_data(dataset, task.name, data_dir, None, task.label_names or None, seed)
    examples = subsample(data.eval, export.parity_examples, seed)
    n_coreml = len(examples) if export.coreml_parity_examples is None else min(export.coreml_parity_examples,
                                                                              len(examples))
    plan = variants.selected(coreml_names, task, architecture, coreai_names, executorch_names)
    fitted = None
    if export.vocabulary == "fitted":  # the run's fitted student (`pocketbert train vocabulary`), as trained
        fitted = read_fitted_student(run_dir, settings or {})
        model, tokenizer = fitted.model, fitted.tokenizer
    shares = None
    if export.embedding_int4_share:  # the rarest rows of the table go to 4 bits: rank them on the recipe's text
        table_rows.int4_group(model.get_input_embeddings().embedding_dim)  # a width that cannot be packed: refused now
        # as the shipped tokenizer cuts it: a fitted student carries its rows' shares, counted when it was fitted
        shares = fitted.shares() if fitted is not None else count_pieces(tokenizer, recipe_texts(
            task, data, recipe.transfer, data_dir, seed)).shares

    jobs = export_jobs(export)
    with staged_output(run_dir, EXPORT_DIR, overwrite) as out, ExitStack() as workers, \
            interrupts_remembered() as interrupted:
        steps = tqdm(total=len(plan) + 2, desc="export", unit="step", disable=jobs > 1)  # jobs > 1: a line a job
        timings: dict = {"build_s": {}, "gate_s": {}}  # where the export's wall time goes, for the manifest
        phase = time.perf_counter()
        app_files = write_app_files(model, tokenizer, task, out, max_length)
        parallel = None
        if jobs > 1:  # the workers start now, on what needs no student: the tokenizer checks
            from pocketbert.export.parallel_export import ParallelExport

            parallel = workers.enter_context(ParallelExport(
                out, plan, task, export, jobs, sum(p.numel() * p.element_size() for p in model.parameters()),
                USABILITY_CHECKED, placement.is_apple_program))
        else:
            # the Swift and Kotlin tokenizers the app folders ship, built where their toolchain is: every code point
            app_tokenizers = app_programs.app_tokenizer_checks(out / TOKENIZER_JSON, out / TOKENIZER_TABLES,
                                                               out / TOKENIZER_GOLDEN,
                                                               tuple(export.tokenizer_check_contexts))
        # Parity inputs come from the exported tokenizer files, as an app would tokenize.
        quiet_transformers()  # a BiLSTM's config.json names a model type transformers does not know, on purpose
        app_tokenizer = load_tokenizer(str(out))
        features = task.features(app_tokenizer, examples, max_length, info.get("doc_stride"))
        pad_id = app_tokenizer.pad_token_id
        batch_size = evaluation.batch_size
        student_logits = batched_logits(task, features, pad_id, batch_size, torch_forward(model, task), "student")
        if task.answers_in_graph:  # for apps whose model returns per-window logits: routines and golden answers
            app_files += qa_postprocess.write_app_routines(
                out, app_tokenizer, examples, features, student_logits, evaluation, max_length,
                qa_graph.effective_stride(max_length, info.get("doc_stride")))
        steps.update()
        timings["app_files_and_student_s"] = round(time.perf_counter() - phase, 2)
        context = variants.BuildContext(
            model=model, task=task, architecture=architecture, tokenizer=app_tokenizer, data=data, out=out,
            max_length=max_length, doc_stride=info.get("doc_stride"), batch_size=batch_size, seed=seed,
            export=export, eval=evaluation, row_shares=shares,
            description=f"pocketbert {task.name} student ({architecture.describe(model)})")
        # Whole examples only (a QA example spans several windows): the features of the first n examples.
        n_features = {"parity": len(features), "coreml": task.features_for_examples(features, n_coreml)}
        given = variants.GateInputs(task, examples, features, student_logits, n_features, pad_id, batch_size, evaluation)
        if parallel is not None:  # every build, placement, usability check and gate below, in the workers
            finished = parallel.finish(context, given)
            results, placements, ort_usability = finished.results, finished.placements, finished.ort_usability
            app_tokenizers, context.notes = finished.app_tokenizers, finished.notes
            timings.update(finished.timings)
            workers.close()
        else:
            for variant in plan:
                steps.set_postfix_str(variant.name)
                phase = time.perf_counter()
                variant.build(context, out / variant.file_name(task))
                timings["build_s"][variant.name] = round(time.perf_counter() - phase, 2)
                steps.update()
            phase = time.perf_counter()
            # Where each Apple program would run, read from the saved programs (docs/placement.md).
            placements = placement.check_all([out / v.file_name(task) for v in plan])
            timings["placement_s"] = round(time.perf_counter() - phase, 2)
            phase = time.perf_counter()
            ort_usability = {context.path(name).name: mobile_usability.usability(context.path(name), max_length)
                             for name in USABILITY_CHECKED}
            timings["ort_usability_s"] = round(time.perf_counter() - phase, 2)

            steps.set_postfix_str("parity")
            results = []
            for variant in plan:
                phase = time.perf_counter()
                results.append(variant.runtime.gate(variant, out / variant.file_name(task), given))
                timings["gate_s"][variant.name] = round(time.perf_counter() - phase, 2)
            steps.update()
            steps.close()
        (out / PLACEMENT).write_text(json.dumps([p.to_dict() for p in placements.values()]) + "\n")
        placed = {name: p.summary() for name, p in placements.items()}

        rows = {r.artifact: {**r.to_dict(), **({"placement": placed[r.artifact]} if r.artifact in placed else {})}
                for r in results}
        (out / PARITY).write_text(json.dumps(list(rows.values()), indent=2) + "\n")
        failed = [r for r in results if not r.passed]
        if failed:
            raise ExportError(failed[0].failure() + "; nothing was written (check the export path or retrain)")
        sizes = {(out / v.file_name(task)).name: path_size(out / v.file_name(task)) for v in plan}
        if fitted is not None:  # the token-id models' sizes with the full table (a text-in graph also holds the words)
            fitted.measure_full_sizes([out / v.file_name(task) for v in plan if v.file_name(task).endswith(".onnx")
                                       and not v.runtime.takes_text])
        if interrupted():  # a Ctrl-C that a library's handler took on the way: still nothing is published
            raise KeyboardInterrupt
        hub = hub_layout.write_hub_layout(out, architecture)
        chosen_coreml = [v.name for v in plan if v.family == variants.COREML_FAMILY]
        chosen_coreai = [v.name for v in plan if v.family == variants.COREAI_FAMILY]
        write_manifest(
            out, stage="export", started=started,
            config={"max_length": max_length, "task": task.name, "architecture": architecture.name,
                    "onnx_opset": onnx_export.ONNX_OPSET,
                    "coreml_minimum_deployment_target": {n: variants.VARIANTS[n].minimum_ios for n in chosen_coreml},
                    "coreml_variants": chosen_coreml,
                    "coreai_variants": [n[len(variants.COREAI_PREFIX):] for n in chosen_coreai],
                    "coreai_minimum_os": {n: variants.VARIANTS[n].minimum_ios for n in chosen_coreai},
                    "executorch_variants": [v.name for v in plan if v.family == variants.EXECUTORCH_FAMILY],
                    "parity_examples": len(examples), "vocabulary": export.vocabulary,
                    "tokenizer_check_contexts": export.tokenizer_check_contexts,
                    "coreml_parity_examples": n_coreml, "dataset": data.name,
                    "variants": {v.name: {"file": v.file_name(task), "runtime": v.runtime.name,
                                          "precision": v.precision} for v in plan}},
            inputs={"student": student_dir, **({"fitted_student": fitted.folder} if fitted is not None else {})},
            metrics={"sizes_bytes": sizes, "parity": rows, "placement": placed,
                     "student_eval_on_parity_set": results[0].student_metrics,
                     # export.vocabulary: fitted: the fitted student's record (rows kept, text counted, recovery, cost
                     # against the full student) and the token-id models' sizes with the full table
                     "vocabulary": fitted.record if fitted is not None else None,
                     "int8_mixed_precision": context.notes.get("int8_mixed_precision"),
                     "reproducibility": onnx_export.reproducibility(),
                     "int8_word_table": context.notes.get("word_table"),
                     "coreml_enumerated_lengths": context.notes.get("coreml_enumerated_lengths"),
                     "coreml_warnings": context.notes.get("coreml_warnings", []),
                     "coreai_entry_points": context.notes.get("coreai_lengths"),
                     "ort_mobile_usability": ort_usability,
                     "timings": timings,
                     "hub_layout": hub,
                     # a text-in model reads one window: QA questions whose context needs more are the app's to window
                     "text_in": {r.artifact: {"examples_checked": r.n_examples,
                                              "longer_than_one_window": len(examples) - r.n_examples}
                                 for v, r in zip(plan, results) if v.runtime.takes_text},
                     # QA in one call: its settings (the windows' bound, the long-context policy) and its gate
                     "qa_in_graph": ({"settings": context.notes["qa_in_graph"],
                                      "checked": {r.artifact: r.by_windows for v, r in zip(plan, results)
                                                  if v.runtime.gives_answers}}
                                     if "qa_in_graph" in context.notes else None),
                     # every Unicode scalar value in four contexts: the text-in graph against tokenizer.json
                     "text_in_tokenizer_exhaustive": context.notes.get("text_in_exhaustive"),
                     # the same for the app folders' own tokenizers, compiled here (or why not)
                     "app_tokenizer_exhaustive": app_tokenizers,
                     "proven_here": PROVEN_HERE, "needs_a_device": NEEDS_A_DEVICE,
                     # proven here: tokenizer.json, loaded as any client loads it, gives the golden ids;
                     # an app's own tokenizer (Swift, Kotlin) needs the golden file run on the device
                     "tokenizer_golden": {"texts": len(json.loads((out / TOKENIZER_GOLDEN).read_text())["texts"]),
                                          "tokenizer_json_truncates_at": max_length,
                                          "checked_here": ["tokenizer.json (tokenizers library)"] + (
                                              ["the text-in models' tokenizer graph (onnxruntime-extensions), "
                                               f"{context.notes['text_in_golden']} probes"]
                                              if "text_in_golden" in context.notes else [])}},
            # write_manifest records every artifact's hash: app folders and bench check them before they copy or
            # time a file
            extra={"app_files": [p.name for p in app_files]},
        )
    return Path(run_dir) / EXPORT_DIR, results
