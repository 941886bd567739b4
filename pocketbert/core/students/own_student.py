"""pocketbert's own student classes (the BiLSTM, the static-embedding student): what their forward returns, and
how they sit on disk: the config dataclass they were built from as JSON beside their weights (safetensors), so that
a folder rebuilds its model from nothing else, as nanoGPT's checkpoints do. Each class keeps its own config file
name (pocketbert/core/run/run_files.py)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from pocketbert.core.errors import ModelError
from pocketbert.core.run.run_files import WEIGHTS


class Output:
    """What an own student's forward returns: `.logits`, as a transformers output has, so tasks and the export
    wrapper treat every student alike."""

    def __init__(self, logits):
        self.logits = logits


def save_own_student(model, folder: Path, config_file: str) -> None:
    """`model.config` (a dataclass) as JSON and the weights, into `folder`."""
    from safetensors.torch import save_file

    folder = Path(folder)
    (folder / config_file).write_text(json.dumps(asdict(model.config), indent=2) + "\n")
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(folder / WEIGHTS))


def load_own_student(folder: Path, model_class: type, config_class: type, config_file: str, what: str,
                     recipe: str):
    """The model save_own_student wrote into `folder`, in eval mode; ModelError saying how to make it again
    (`--recipe recipe`) when the folder cannot rebuild it."""
    from safetensors.torch import load_file

    folder = Path(folder)
    try:
        model = model_class(config_class(**json.loads((folder / config_file).read_text())))
        model.load_state_dict(load_file(str(folder / WEIGHTS)))
    except (OSError, TypeError, ValueError, RuntimeError) as exc:
        raise ModelError(f"cannot load the {what} student in {folder}: {str(exc).splitlines()[0]}; "
                         f"train it again with `pocketbert train distill --recipe {recipe}`") from exc
    return model.eval()
