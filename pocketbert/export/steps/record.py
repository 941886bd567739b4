"""The export's last step, record: the gates' table (parity.json), where each Apple program would run
(placement.json), and the manifest that app folders and the bench read. A failed gate ends the export here, before
anything is published."""

from __future__ import annotations

import json
from pathlib import Path

from pocketbert.core.config import export_families as families
from pocketbert.core.errors import ExportError
from pocketbert.core.run.manifest import path_size, write_manifest
from pocketbert.core.run.run_files import PARITY, PLACEMENT, TOKENIZER_GOLDEN
from pocketbert.export.programs import onnx_export
from pocketbert.export.steps import hub_layout
from pocketbert.export.steps.built import Built
from pocketbert.export.steps.plan import ExportPlan

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
# Proven here where a toolchain was (app_tokenizer_exhaustive says which ran, or why not).
APP_TOKENIZERS_PROVEN = ("the app folders' Swift and Kotlin tokenizers give tokenizer.json's ids on every Unicode "
                         "scalar value: {languages} compiled and checked here")
NEEDS_A_DEVICE = [
    "Core ML on Apple hardware: which compute unit runs each program, the Neural Engine included (predicted here "
    "from the saved programs: placement.json, docs/placement.md)",
    "a Core ML-delegated ExecuTorch program through ExecuTorch's Core ML backend (Apple hardware only)",
    "NNAPI, XNNPACK and onnxruntime-extensions-android on an Android phone",
    "the app folders' Swift and Kotlin against Apple's and Android's own frameworks (Core ML, ONNX Runtime's mobile "
    "packages, ExecuTorch's runtime): off a device they are compiled against stubs of those APIs, and their "
    "tokenizers and QA routines run",
    "PocketBertTokenizer (the iOS folder's Swift package) against tokenizer_golden.json on the device, in the app's "
    "unit tests",
]


def _app_tokenizers_proven(checks: dict) -> list[str]:
    ran = sorted(language for language, check in (checks or {}).items() if "not_run" not in check)
    return [APP_TOKENIZERS_PROVEN.format(languages=" and ".join(ran))] if ran else []


def record_gates(out: Path, built: Built) -> dict:
    """parity.json (each row with its program's placement) and placement.json; an ExportError for the first failed
    gate. Returns the rows by file name."""
    (out / PLACEMENT).write_text(json.dumps([p.to_dict() for p in built.placements.values()]) + "\n")
    placed = {name: p.summary() for name, p in built.placements.items()}
    rows = {r.artifact: {**r.to_dict(), **({"placement": placed[r.artifact]} if r.artifact in placed else {})}
            for r in built.results}
    (out / PARITY).write_text(json.dumps(list(rows.values()), indent=2) + "\n")
    failed = [r for r in built.results if not r.passed]
    if failed:
        raise ExportError(failed[0].failure() + "; nothing was written (check the export path or retrain)")
    return rows


def _config(plan: ExportPlan) -> dict:
    task, export = plan.task, plan.export
    chosen = {family: plan.chosen(family) for family in families.CHOSEN}
    by_name = {v.name: v for v in plan.variants}
    return {"max_length": plan.max_length, "task": task.name, "architecture": plan.architecture.name,
            "onnx_opset": onnx_export.ONNX_OPSET,
            "coreml_minimum_deployment_target": {n: by_name[families.COREML.variant(n)].minimum_ios
                                                 for n in chosen[families.COREML]},
            "coreml_variants": chosen[families.COREML],
            "coreai_variants": chosen[families.COREAI],
            "coreai_minimum_os": {families.COREAI.variant(n): by_name[families.COREAI.variant(n)].minimum_ios
                                  for n in chosen[families.COREAI]},
            "executorch_variants": chosen[families.EXECUTORCH],
            "parity_examples": len(plan.examples), "vocabulary": export.vocabulary,
            "tokenizer_check_contexts": export.tokenizer_check_contexts,
            "coreml_parity_examples": plan.n_coreml, "dataset": plan.data.name,
            "variants": {v.name: {"file": v.file_name(task), "runtime": v.runtime.name, "precision": v.precision}
                         for v in plan.variants}}


def _text_in_records(plan: ExportPlan, built: Built) -> dict:
    """What the manifest says of the models with the tokenizer (or the whole QA pipeline) inside."""
    notes, pairs = built.notes, list(zip(plan.variants, built.results))
    return {
        # a text-in model reads one window: QA questions whose context needs more are the app's to window
        "text_in": {r.artifact: {"examples_checked": r.n_examples,
                                 "longer_than_one_window": len(plan.examples) - r.n_examples}
                    for v, r in pairs if v.runtime.takes_text},
        # QA in one call: its settings (the windows' bound, the long-context policy) and its gate
        "qa_in_graph": ({"settings": notes["qa_in_graph"],
                         "checked": {r.artifact: r.by_windows for v, r in pairs if v.runtime.gives_answers}}
                        if "qa_in_graph" in notes else None),
        # every Unicode scalar value in four contexts: the text-in graph against tokenizer.json
        "text_in_tokenizer_exhaustive": notes.get("text_in_exhaustive"),
    }


def _tokenizer_golden(plan: ExportPlan, out: Path, notes: dict) -> dict:
    """Proven here: tokenizer.json, loaded as any client loads it, gives the golden ids; an app's own tokenizer
    (Swift, Kotlin) needs the golden file run on the device."""
    return {"texts": len(json.loads((out / TOKENIZER_GOLDEN).read_text())["texts"]),
            "tokenizer_json_truncates_at": plan.max_length,
            "checked_here": ["tokenizer.json (tokenizers library)"] + (
                ["the text-in models' tokenizer graph (onnxruntime-extensions), "
                 f"{notes['text_in_golden']} probes"] if "text_in_golden" in notes else [])}


def record_manifest(plan: ExportPlan, out: Path, built: Built, rows: dict, app_files: list[Path]) -> None:
    """The export's manifest: its settings, every artifact's size and hash, and what the gates and checks found."""
    task, notes = plan.task, built.notes
    files = [out / v.file_name(task) for v in plan.variants]
    sizes = {path.name: path_size(path) for path in files}
    vocabulary = None
    if plan.fitted is not None:  # the token-id models' sizes with the full table (a text-in graph also holds the words)
        vocabulary = plan.fitted.with_full_sizes([out / v.file_name(task) for v in plan.variants
                                                  if v.file_name(task).endswith(".onnx") and not v.runtime.takes_text])
    placed = {name: p.summary() for name, p in built.placements.items()}
    write_manifest(
        out, stage="export", started=plan.started, config=_config(plan),
        inputs={"student": plan.student_dir, **({"fitted_student": plan.fitted.folder} if plan.fitted else {})},
        metrics={"sizes_bytes": sizes, "parity": rows, "placement": placed,
                 "student_eval_on_parity_set": built.results[0].student_metrics,
                 # export.vocabulary: fitted: the fitted student's record (rows kept, text counted, recovery, cost
                 # against the full student) and the token-id models' sizes with the full table
                 "vocabulary": vocabulary,
                 "int8_mixed_precision": notes.get("int8_mixed_precision"),
                 "reproducibility": onnx_export.reproducibility(),
                 "int8_word_table": notes.get("word_table"),
                 "coreml_enumerated_lengths": notes.get("coreml_enumerated_lengths"),
                 "coreml_warnings": notes.get("coreml_warnings", []),
                 "coreai_entry_points": notes.get("coreai_lengths"),
                 "ort_mobile_usability": built.ort_usability,
                 "timings": built.timings,
                 "hub_layout": hub_layout.write_hub_layout(out, plan.architecture),
                 **_text_in_records(plan, built),
                 # the app folders' own tokenizers, compiled here (or why not), on every Unicode scalar value
                 "app_tokenizer_exhaustive": built.app_tokenizers,
                 "proven_here": PROVEN_HERE + _app_tokenizers_proven(built.app_tokenizers),
                 "needs_a_device": NEEDS_A_DEVICE,
                 "tokenizer_golden": _tokenizer_golden(plan, out, notes)},
        # write_manifest records every artifact's hash: app folders and bench check them before they copy or time a
        # file
        extra={"app_files": [p.name for p in app_files]},
    )
