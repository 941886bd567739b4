"""An onnxruntime session that runs onnxruntime-extensions' custom ops: what every graph of text_in/ runs in (the
tokenizer graph, its probes, the text-in and QA models)."""

from __future__ import annotations

from pathlib import Path

from pocketbert.core.errors import require
from pocketbert.core.students.inference import ort_options


def extensions_library() -> str:
    return require("onnxruntime_extensions", "export").get_library_path()


def text_session(path: Path | bytes, threads: int = 0):
    """An onnxruntime session with the extensions' custom ops registered, of a file or a serialized model, at
    `ort_options(threads)`."""
    ort = require("onnxruntime", "export")
    options = ort_options(threads)
    options.register_custom_ops_library(extensions_library())
    model = path if isinstance(path, bytes) else str(path)
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
