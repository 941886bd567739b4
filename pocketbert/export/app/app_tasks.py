"""What the app folders (`export android`, `export ios`) ship and say per task: the model the Android folder runs,
the files beside it, the code's settings, what the export proved of it and what only a device can show.

Keyed by the task's name (the manifest's config.task), as app_readme keys its code; app_folders.py does the same
steps for every task with what this table gives. The Android folder runs the int8 model.ort (token ids in) with
pocketbert's Kotlin tokenizer and its tables; with --text-in, the text-in model instead:
- sentiment: model.ort, logits out (text-in: model.text.ort, the tokenizer inside);
- qa: model.ort window by window (text-in: the one-call model, question and context strings in; windows, span
  search and answer text inside, as the Python pipeline); for the runtimes that run the model window by window
  (ONNX Runtime's ids-in model, Core ML, Core AI, ExecuTorch) the answer routine rendered from the same rules
  (QaAnswer.swift / QaAnswer.kt) with its golden file.
"""

from __future__ import annotations

import json
from pathlib import Path

from pocketbert.core.errors import ExportError
from pocketbert.core.run.stage_records import ExportRecord, ParityRow
from pocketbert.core.run.run_files import (
    LABELS,
    ORT_MODEL,
    ORT_REQUIRED_OPERATORS,
    ORT_QA_MODEL,
    ORT_QA_REQUIRED_OPERATORS,
    ORT_TEXT_MODEL,
    ORT_TEXT_REQUIRED_OPERATORS,
    QA_GOLDEN,
    QA_ROUTINES,
    TOKENIZER_GOLDEN,
    TOKENIZER_JSON,
    TOKENIZER_TABLES,
)

PTE_FOR_ANDROID = "ExecuTorch program, int8 Linear layers (the alternative to ONNX Runtime below)"
VERDICTS_PROVEN = ("the execution-provider verdicts above (ONNX Runtime's checks, and pocketbert's transcription of "
                   "XNNPACK's, run on the graph files)")


# The Kotlin tokenizer the ids-in folder carries (pocketbert's own, JVM stdlib only; it reads TOKENIZER_TABLES).
KOTLIN_TOKENIZER = Path(__file__).resolve().parent / "kotlin" / "tokenizer" / "BertTokenizer.kt"
ORT_IDS_OPERATORS = "operators the model needs, for a reduced ONNX Runtime build"
IDS_FILES = {TOKENIZER_TABLES: "tokenizer.json's rules as tables, read by BertTokenizer.kt",
             KOTLIN_TOKENIZER.name: "the tokenizer, in Kotlin (pocketbert's own; add it to the app's sources)"}


def _not_compiled(contrib_ops: list[str]) -> list[str]:
    """What only a phone shows of the text-in folder."""
    return ["the Kotlin is type-checked here against stubs of ONNX Runtime's and Android's APIs (kotlinc, in "
            "pocketbert's tests), not run; neither NNAPI nor XNNPACK ran (the Linux onnxruntime has neither): run "
            "the app's tests on a phone",
            f"onnxruntime-extensions-android must carry the model's {', '.join(contrib_ops)} ops (its BERT- and "
            "GPT-2-tokenizer groups, both in the published package)"]


def _ids_not_run() -> list[str]:
    """What only a phone shows of the ids-in folder."""
    return ["the Kotlin is type-checked here against stubs of ONNX Runtime's and Android's APIs (kotlinc, in "
            "pocketbert's tests), not run; neither NNAPI nor XNNPACK ran (the Linux onnxruntime has neither): run "
            "the app's tests on a phone",
            f"BertTokenizer on Android's runtime: run the texts of {TOKENIZER_GOLDEN} through `encode` in a unit "
            "test; each must give its `ids`"]


def _ids_proven(shipped: ParityRow, ort_version: str) -> list[str]:
    return [f"`{ORT_MODEL}` gave the student's answers on {shipped.n_examples} eval examples in onnxruntime "
            f"{ort_version} (agreement {shipped.agreement:.4f}, max |diff| {shipped.max_abs_diff:.3g})",
            VERDICTS_PROVEN]


class SentimentApp:
    """Text in, a label out: model.ort with BertTokenizer (or model.text.ort), the labels and the tokenizer's golden
    ids."""

    text_in_model = ORT_TEXT_MODEL
    text_in_operators = ORT_TEXT_REQUIRED_OPERATORS
    text_in_model_is = "text-in model"

    def android_files(self, pte: list[str], text_in: bool) -> dict[str, str]:
        if not text_in:
            return {ORT_MODEL: "ONNX Runtime Mobile model, int8 weights, token ids in (BertTokenizer.kt makes them)",
                    ORT_REQUIRED_OPERATORS: ORT_IDS_OPERATORS, **IDS_FILES, LABELS: "label names in logit order",
                    TOKENIZER_GOLDEN: "texts and the token ids they must give: BertTokenizer's check in a unit test",
                    **{name: PTE_FOR_ANDROID for name in pte},
                    **({TOKENIZER_JSON: "the tokenizer the ExecuTorch program's ids come from"} if pte else {})}
        return {ORT_TEXT_MODEL: "ONNX Runtime Mobile model, int8 weights, text in: the tokenizer is inside the model "
                                "(onnxruntime-extensions ops)",
                ORT_TEXT_REQUIRED_OPERATORS: "operators the model needs, for a reduced ONNX Runtime build",
                LABELS: "label names in logit order",
                TOKENIZER_GOLDEN: "texts and the token ids they must give (the model's tokenizer gave them at "
                                  "export)",
                **{name: PTE_FOR_ANDROID for name in pte},
                **({TOKENIZER_JSON: "the tokenizer the ExecuTorch program's ids come from"} if pte else {})}

    def android_input_step(self, max_length: int, values: dict, text_in: bool) -> str:
        if not text_in:
            return (f"BertTokenizer gives tokenizer.json's ids; the code cuts a text at {max_length} tokens ([SEP] "
                    "kept) and runs it at its own length.")
        return f"The model takes the text itself and tokenizes it as tokenizer.json does, up to {max_length} tokens."

    def android_proven(self, shipped: ParityRow, text_in: bool, ort_version: str) -> list[str]:
        if not text_in:
            return _ids_proven(shipped, ort_version)
        return [f"`{ORT_TEXT_MODEL}` fed raw text on {shipped.n_examples} eval examples in onnxruntime with "
                f"onnxruntime-extensions: agreement {shipped.agreement:.4f} with the student",
                "the model's tokenizer gives tokenizer.json's ids on every text of tokenizer_golden.json",
                VERDICTS_PROVEN]

    def android_needs_device(self, contrib_ops: list[str], shipped: ParityRow, pte: list[str],
                             text_in: bool) -> list[str]:
        return _not_compiled(contrib_ops) if text_in else _ids_not_run()

    def code_values(self, export_dir: Path, manifest: ExportRecord) -> dict:
        return {}

    def ios_files(self) -> dict[str, str]:
        return {}

    def ios_steps(self) -> list[str]:
        return []

    def ios_needs_device(self) -> list[str]:
        return []

    def executorch_note(self, language: str) -> str:
        return ""


SWIFT_ROUTINE, KOTLIN_ROUTINE = QA_ROUTINES["swift"], QA_ROUTINES["kotlin"]


class QAApp:
    """Question and context in, the answer out: the per-window models with the answer routine and its golden file
    (model.ort with BertTokenizer on Android; with --text-in, model.qa.ort in one call)."""

    text_in_model = ORT_QA_MODEL
    text_in_operators = ORT_QA_REQUIRED_OPERATORS
    text_in_model_is = "the one-call QA model"

    def android_files(self, pte: list[str], text_in: bool) -> dict[str, str]:
        if not text_in:
            return {ORT_MODEL: "ONNX Runtime Mobile model, int8 weights, one window's token ids in, its start and end "
                               "logits out",
                    ORT_REQUIRED_OPERATORS: ORT_IDS_OPERATORS, **IDS_FILES,
                    KOTLIN_ROUTINE: "the answer routine: windows and span search as the Python pipeline "
                                    "(generated; add it to the app's sources)",
                    QA_GOLDEN: "questions with their contexts, each window's logits and the answer the Python "
                               "pipeline gives: checks for the app's tests",
                    TOKENIZER_GOLDEN: "texts and the token ids they must give: BertTokenizer's check in a unit test",
                    **{name: PTE_FOR_ANDROID for name in pte},
                    **({TOKENIZER_JSON: "the tokenizer the ExecuTorch program's ids come from"} if pte else {})}
        return {ORT_QA_MODEL: "ONNX Runtime Mobile model, int8 weights, question and context strings in, the answer "
                              "out: tokenizer, doc-stride windows, span search and the answer's text inside the model "
                              "(onnxruntime-extensions ops)",
                ORT_QA_REQUIRED_OPERATORS: "operators the model needs, for a reduced ONNX Runtime build",
                QA_GOLDEN: "questions with their contexts and the answer the Python pipeline gives (and, for an app "
                           "that runs the model window by window, each window's logits): checks for the app's tests",
                TOKENIZER_GOLDEN: "texts and the token ids they must give (the model's tokenizer gave them at "
                                  "export)",
                **{name: PTE_FOR_ANDROID for name in pte},
                **({TOKENIZER_JSON: "the tokenizer the ExecuTorch program's ids come from",
                    KOTLIN_ROUTINE: "the answer routine for the ExecuTorch program's per-window logits: windows and "
                                    "span search as the Python pipeline (generated; add it to the app's sources)"}
                   if pte else {})}

    def android_input_step(self, max_length: int, values: dict, text_in: bool) -> str:
        if not text_in:
            return (f"The code cuts the context into the {max_length}-token windows the Python pipeline makes (the "
                    f"question in each, {values['stride']} context tokens shared), runs the model on each at its own "
                    "length and lets `qaAnswer` pick the span; the answer is the context's text at the winning word "
                    "pieces' code-point offsets.")
        return (f"The model takes the question and the whole context as strings and tokenizes them as tokenizer.json "
                f"does; it cuts the context into {max_length}-token windows (the question in each, "
                f"{values['stride']} context tokens shared) and searches them all, as the Python pipeline does. A "
                f"context over {values['max_context_tokens']} word pieces is read up to there (`context_cut`). All "
                "windows run as one batch: bound the question's length in the app.")

    def android_proven(self, shipped: ParityRow, text_in: bool, ort_version: str) -> list[str]:
        if not text_in:
            return _ids_proven(shipped, ort_version)
        windows = shipped.by_windows
        one, several = windows["one_window"]["questions"], windows["several_windows"]["questions"]
        metrics, pipeline = shipped.metrics, shipped.student_metrics
        return [f"`{ORT_QA_MODEL}` fed each question and its whole context on {shipped.n_examples} eval questions "
                f"({one} of one window, {several} of several) in onnxruntime with onnxruntime-extensions: the same "
                f"answer text as the Python pipeline on {shipped.agreement:.1%} of them; exact match "
                f"{metrics['exact_match']:.2f} and F1 {metrics['f1']:.2f}, the pipeline's "
                f"{pipeline['exact_match']:.2f} and {pipeline['f1']:.2f}",
                f"every answer is the context's text at the UTF-16, code-point and UTF-8 spans the model gives "
                f"({windows['span_mismatches']} not), and every question ran as many windows as the pipeline made "
                f"({windows['windows_differ']} did not)",
                VERDICTS_PROVEN]

    def android_needs_device(self, contrib_ops: list[str], shipped: ParityRow, pte: list[str],
                             text_in: bool) -> list[str]:
        if not text_in:
            return _ids_not_run() + [f"the questions of {QA_GOLDEN} through `answer(question, context)` on a phone: "
                                     "the Python pipeline's answer is `answer`"]
        needs = _not_compiled(contrib_ops) + [
            f"the questions of {QA_GOLDEN} through `answer(question, context)` on a phone: the Python pipeline's "
            f"answer is `answer`; the int8 model gave it on {shipped.agreement:.1%} of the gate's questions"]
        if pte:
            needs.append(f"the ExecuTorch code is type-checked here, not run; `{KOTLIN_ROUTINE}` runs (kotlinc, on "
                         "a golden file in pocketbert's tests). DJL's ids and character spans against "
                         f"{QA_GOLDEN}'s `context_index` and `offsets`: in a unit test")
        return needs

    def code_values(self, export_dir: Path, manifest: ExportRecord) -> dict:
        """The windows and the span search the app code repeats: the export's own settings (qa_golden.json's, which
        the routine's tests read), the bound of the one-call model and the special tokens' ids."""
        golden = json.loads((export_dir / QA_GOLDEN).read_text(encoding="utf-8"))
        settings = manifest.metrics.qa_in_graph.settings if manifest.metrics.qa_in_graph is not None else {}
        vocab = json.loads((export_dir / TOKENIZER_JSON).read_text(encoding="utf-8"))["model"]["vocab"]
        return {"stride": golden["stride"], "n_best": golden["n_best"],
                "max_answer_length": golden["max_answer_length"],
                "max_context_tokens": settings.get("max_context_tokens"), "cls_id": vocab["[CLS]"],
                "sep_id": vocab["[SEP]"]}

    def ios_files(self) -> dict[str, str]:
        return {SWIFT_ROUTINE: "the answer routine: windows and span search as the Python pipeline, over the model's "
                               "per-window logits (generated; add it to the app target)",
                QA_GOLDEN: "questions with each window's logits and the Python pipeline's answer: add it to the unit "
                           "test target and check the routine with it"}

    def ios_steps(self) -> list[str]:
        return [f"Add `{SWIFT_ROUTINE}` to the app target (the code calls its `windowStarts` and `qaAnswer`) and "
                f"`{QA_GOLDEN}` to the unit-test target. The code cuts the context into the windows the Python "
                "pipeline makes, runs the model on each and lets `qaAnswer` pick the span; the answer is the "
                "context's own text between the span's first and last tokens' code-point offsets "
                "(`substring(context, codePoints:)`), accents and case as written."]

    def ios_needs_device(self) -> list[str]:
        return [f"`{SWIFT_ROUTINE}` is type-checked here, not run (its JavaScript and Kotlin twins, rendered from "
                "the same specification, run on golden files in pocketbert's tests): run "
                f"each question of `{QA_GOLDEN}` through `windowStarts` and `qaAnswer` in a unit test; the winning "
                "tokens' `offsets` must cut out its `answer`",
                f"`BertTokenizer.tokenize`'s ids for a question's context against `{QA_GOLDEN}`'s `context_tokens` "
                "and `context_index`: the windows the Swift cuts come from them"]

    def executorch_note(self, language: str) -> str:
        """What the ExecuTorch section adds for an app in `language` (a QA_ROUTINES key)."""
        routine = QA_ROUTINES[language]
        return (f"; it returns each window's start and end logits, and `{routine}` picks the answer over all windows "
                f"as the Python pipeline does (check it with `{QA_GOLDEN}`)")


APPS = {"sentiment": SentimentApp(), "qa": QAApp()}


def app_of(task: str):
    if task not in APPS:
        raise ExportError(f"the export is of task '{task}', which the app folders are not written for: "
                          f"{', '.join(APPS)} are")
    return APPS[task]
