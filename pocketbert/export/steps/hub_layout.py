"""The export folder as transformers.js and Optimum's ORTModel load it: config.json and the tokenizer files at
the top (already there), the ONNX graphs under onnx/ with the names those libraries look for.

The files under onnx/ are hard links to the gated graphs beside them (a copy where the file system has no
links): the same bytes, proven by the same parity gate, at no extra size on disk.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pocketbert.core.run.run_files import HUB_ONNX_DIR, HUB_ONNX_NAMES


def write_hub_layout(export_dir: Path, architecture) -> dict:
    """Link the exported graphs under onnx/; what was written, or why nothing was."""
    if not architecture.hub_layout:
        return {"written": [], "reason": f"a {architecture.name} model has no model type transformers.js or "
                                         "Optimum know; use ONNX Runtime directly"}
    folder = Path(export_dir) / HUB_ONNX_DIR
    folder.mkdir(exist_ok=True)
    written = {}
    for source, name in HUB_ONNX_NAMES.items():
        if not (Path(export_dir) / source).is_file():
            continue
        try:
            os.link(Path(export_dir) / source, folder / name)
        except OSError:
            shutil.copyfile(Path(export_dir) / source, folder / name)
        written[f"{HUB_ONNX_DIR}/{name}"] = source
    return {"written": written}
