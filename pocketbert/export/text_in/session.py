"""An onnxruntime session that runs onnxruntime-extensions' custom ops: what every graph of text_in/ runs in (the
tokenizer graph, its probes, the text-in and QA models)."""

from __future__ import annotations

from pathlib import Path

from pocketbert.core.errors import require
from pocketbert.core.process.launch_env import session_threads


def extensions_library() -> str:
    return require("onnxruntime_extensions", "export").get_library_path()


def text_session(path: Path | bytes, threads: int = 0):
    """An onnxruntime session with the extensions' custom ops registered, of a file or a serialized model, at
    `session_threads(threads)`."""
    ort = require("onnxruntime", "export")
    options = ort.SessionOptions()
    options.register_custom_ops_library(extensions_library())
    options.intra_op_num_threads = session_threads(threads)
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    model = path if isinstance(path, bytes) else str(path)
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
