"""The run-directory contract: every file name a stage reads or writes, in one place.

    runs/<name>/
      teacher/   Hugging Face save_pretrained folder (+ tokenizer), manifest.json
      student/   same, for the distilled student
      student_fitted/  `train vocabulary`: the student with its vocabulary fitted to the recipe's text (same
                 files, fewer word-piece rows), piece_shares.npy, manifest.json; `export --vocabulary fitted` ships it
      export/    model.onnx, model.int8.onnx, model.ort, model.required_operators.config,
                 <Name>.mlpackage, tokenizer files, config.json, labels.json, parity.json, manifest.json
      bench/     results.json (source of truth), report.md, report.html, plots
      bench_imports/  phone measurements brought in by `pocketbert bench import`
"""

from __future__ import annotations

from pathlib import Path

DEFAULT_RUNS_ROOT = Path("runs")

TEACHER_DIR = "teacher"
STUDENT_DIR = "student"
FITTED_STUDENT_DIR = "student_fitted"  # `train vocabulary`: the student with a fitted vocabulary, for the export
PIECE_SHARES = "piece_shares.npy"  # in student_fitted/: each kept row's largest share of one source's counted pieces
MLM_STUDENT_DIR = "student_mlm"  # `train mlm`: a task-agnostic student, input to `train distill --student-model`
EXPORT_DIR = "export"
BENCH_DIR = "bench"
CHECKPOINTS_DIR = "checkpoints"  # checkpoints/<stage>/last.pt while a training stage runs; removed when it ends
CHECKPOINT_FILE = "last.pt"  # a training stage's latest checkpoint, in checkpoints/<stage>/
CHECKPOINT_PARTIAL = CHECKPOINT_FILE + ".partial"  # written first, renamed over CHECKPOINT_FILE when complete
EPOCH_SCORES_FILE = "epochs.json"  # with epoch stopping: each finished epoch's validation score, in checkpoints/<stage>/
BEST_WEIGHTS_FILE = "best.pt"  # with epoch stopping: the best epoch's weights so far, beside EPOCH_SCORES_FILE

MANIFEST = "manifest.json"
LABELS = "labels.json"
TASK_INFO = "pocketbert_task.json"  # task, labels and max length, saved beside the HF weights

ONNX_FP32 = "model.onnx"
ONNX_FP16 = "model.fp16.onnx"
ONNX_INT8 = "model.int8.onnx"
ONNX_QDQ = "model.qdq.onnx"  # static int8, QuantizeLinear/DequantizeLinear around MatMul/Gemm
HUB_ONNX_DIR = "onnx"  # export/onnx/: the names transformers.js and Optimum look for, linked to the files above
HUB_ONNX_NAMES = {ONNX_FP32: "model.onnx", ONNX_INT8: "model_quantized.onnx", ONNX_FP16: "model_fp16.onnx"}
ORT_MODEL = "model.ort"
ORT_REQUIRED_OPERATORS = "model.required_operators.config"
ONNX_TEXT = "model.text.onnx"  # text in (the tokenizer inside the graph, onnxruntime-extensions), logits out
ONNX_TEXT_INT8 = "model.text.int8.onnx"
ORT_TEXT_MODEL = "model.text.ort"  # the text-in int8 model for ONNX Runtime Mobile (+ onnxruntime-extensions)
ORT_TEXT_REQUIRED_OPERATORS = "model.text.required_operators.config"
ONNX_QA = "model.qa.onnx"  # QA in one call: question and context strings in, the answer (text, spans, score) out
ONNX_QA_INT8 = "model.qa.int8.onnx"
ORT_QA_MODEL = "model.qa.ort"  # the one-call QA int8 model for ONNX Runtime Mobile (+ onnxruntime-extensions)
ORT_QA_REQUIRED_OPERATORS = "model.qa.required_operators.config"
QA_GOLDEN = "qa_golden.json"  # questions, contexts and the answers the Python pipeline gives: checks for app code
# QA post-processing for apps whose model returns per-window logits (Core ML, ExecuTorch, Core AI), one per language
QA_ROUTINES = {"javascript": "qa_answer.mjs", "kotlin": "QaAnswer.kt", "swift": "QaAnswer.swift"}
EXECUTORCH_FP32 = "model.pte"  # ExecuTorch program, XNNPACK delegate
EXECUTORCH_INT8 = "model.int8.pte"  # the same with int8 Linear layers (dynamic activations, per-channel weights)
EXECUTORCH_COREML = "model.coreml.pte"  # ExecuTorch program, the whole graph delegated to Core ML (fp16)
ORT_QDQ_MODEL = "model.qdq.ort"  # the static QDQ graph for ONNX Runtime Mobile: what NNAPI and XNNPACK can take
ORT_QDQ_REQUIRED_OPERATORS = "model.qdq.required_operators.config"
COREML_PACKAGE_SUFFIX = ".mlpackage"
COREAI_ASSET_SUFFIX = ".aimodel"  # Core AI (iOS 27 / macOS 27): a folder, main.mlirb + metadata.json
PARITY = "parity.json"
PLACEMENT = "placement.json"  # the placement check: where each operation of each Apple program is predicted to run
IOS_APP_DIR = "ios"          # `export ios`: the folder an Xcode project takes as it is
ANDROID_APP_DIR = "android"  # `export android`: the files an Android app's assets take
TOKENIZER_JSON = "tokenizer.json"  # the tokenizers library's file: what swift-transformers, transformers.js, DJL read
TOKENIZER_CONFIG = "tokenizer_config.json"
VOCAB = "vocab.txt"  # WordPiece vocabulary, one token a line, for apps that tokenize natively
TOKENIZER_FILES = (TOKENIZER_JSON, TOKENIZER_CONFIG, VOCAB)
TOKENIZER_GOLDEN = "tokenizer_golden.json"  # texts and the ids they must give: checks for an app's tokenizer
TOKENIZER_TABLES = "tokenizer.tables"  # tokenizer.json tabulated per code point: what the apps' own tokenizers read
SWIFT_TOKENIZER_PACKAGE = "PocketBertTokenizer"  # in ios/: the Swift package that reads tokenizer.tables
MODEL_CONFIG = "config.json"
WEIGHTS = "model.safetensors"  # save_pretrained's weights (the BiLSTM and static students save theirs under it too)
WEIGHT_FILES = (WEIGHTS, "pytorch_model.bin", "model.safetensors.index.json")  # any of them: a folder has weights
BILSTM_CONFIG = "bilstm_config.json"  # the BiLSTM student's shape, beside its weights
STATIC_CONFIG = "static_config.json"  # the static-embedding student's shape, beside its weights
MLM_STUDENT_RECORD = "pocketbert_mlm.json"  # a masked-LM student's layer map and teacher, beside its weights
APP_README = "README.md"  # in ios/ and android/: how an app uses the folder

BENCH_RESULTS = "results.json"
BENCH_REPORT = "report.md"
BENCH_HTML = "report.html"  # self-contained: plots embedded
BENCH_PLOTS = {  # plot name -> file, written beside report.md
    "versus": "student_vs_bert_base.png",
    "runtimes": "latency.png",
    "sequence": "latency_vs_sequence.png",
    "batch": "latency_vs_batch.png",
    "variants": "accuracy_latency_size.png",
    "roofline": "roofline.png",
}
ABLATION_DIR = "ablation"  # ablation/<variant>/student/ per variant, and the table beside them
ABLATION_RESULTS = "ablation.json"
ABLATION_TABLE = "ablation.md"
ABLATION_PLOT = "ablation.png"
INSPECT_DIR = "inspect"  # `pocketbert inspect`: inspect.json first, then the report drawn from it
INSPECT_RESULTS = "inspect.json"
INSPECT_TABLE = "inspect.md"
INSPECT_HTML = "inspect.html"  # self-contained: plots embedded
COMPARE_RESULTS = "compare.json"  # `pocketbert compare`, in its --out folder
COMPARE_TABLE = "compare.md"
COMPARE_PLOT = "compare.png"
LADDER_RESULTS = "ladder.json"  # `pocketbert ladder`, in its --out folder beside the rungs' run folders
LADDER_TABLE = "ladder.md"
LADDER_PLOT = "ladder.png"
LADDER_COMPARE_DIR = "compare"  # the ladder's `pocketbert compare` output, which ladder.json is read from
TRAIN_BENCH_RESULTS = "train_bench.json"  # `pocketbert bench train`, in the run directory
CALIBRATION_RESULTS = "calibration.json"  # `pocketbert bench calibration --out`: published points, floors, factors
CALIBRATION_TABLE = "calibration.md"
DEVICE_KIT_DIR = "device_kit"  # `pocketbert bench kit`: the Swift package that measures on a Mac or an iPhone
KIT_MEASUREMENT = "pocketbert_kit_measurement.json"  # what the kit writes and `bench import` reads
BENCH_IMPORTS_DIR = "bench_imports"  # phone measurements (`pocketbert bench import`), kept across bench runs


def coreml_package_name(class_stem: str, variant: str = "fp16") -> str:
    """PocketBertSentiment.mlpackage for the fp16 program, PocketBertSentiment.<variant>.mlpackage for the others:
    the stem is the task's coreml_class_stem, the name of the class Xcode generates."""
    return class_stem + ("" if variant == "fp16" else f".{variant}") + COREML_PACKAGE_SUFFIX


def coreai_asset_name(class_stem: str, variant: str = "fp16") -> str:
    """PocketBertSentiment.aimodel for the fp16 program, PocketBertSentiment.<variant>.aimodel for the others,
    beside the Core ML package of the same stem."""
    return coreml_package_name(class_stem, variant)[:-len(COREML_PACKAGE_SUFFIX)] + COREAI_ASSET_SUFFIX


def stage_path(run_dir: Path, stage: str) -> Path:
    return Path(run_dir) / stage


def checkpoint_folder(run_dir: Path, stage: str) -> Path:
    return Path(run_dir) / CHECKPOINTS_DIR / stage


# What proves a folder is a stage's own output: its manifest.json naming the stage, or, for the stages that
# write no manifest, their results file.
STAGE_RECORDS = {BENCH_DIR: BENCH_RESULTS, INSPECT_DIR: INSPECT_RESULTS}


