"""Checkpoints from strangers: a pickle that would run code is refused, and so is a model's own Python."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from helpers import error_line, run_cli

pytestmark = pytest.mark.slow  # the CLI on a saved checkpoint


class CodeRunningPickle:
    """Unpickling this calls exec(), which would create the marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('ran')",))


def test_pickle_that_would_run_code_is_refused(capsys, tmp_path, tiny_base, shared_data):
    marker = tmp_path / "code-ran"
    evil = tmp_path / "evil-checkpoint"
    shutil.copytree(tiny_base, evil)
    from safetensors.torch import load_file

    state = load_file(evil / "model.safetensors")  # real weights, plus one entry that runs code when unpickled
    (evil / "model.safetensors").unlink()
    state["payload"] = CodeRunningPickle(marker)
    torch.save(state, evil / "pytorch_model.bin")

    result = run_cli(capsys, "train", "teacher", "--run", tmp_path / "run", "--model", evil, "--preset", "tiny",
                     "--data-dir", shared_data)
    assert result.exit_code != 0
    line = error_line(result)
    assert line.startswith("error: refused to load") and "would run code" in line and "safetensors" in line
    assert not marker.exists(), "the pickle's code ran"
    assert not (tmp_path / "run" / "teacher").exists()


def test_remote_code_is_not_run_without_the_flag(capsys, tmp_path, tiny_base, shared_data):
    marker = tmp_path / "remote-code-ran"
    model = tmp_path / "custom-model"
    shutil.copytree(tiny_base, model)
    config = json.loads((model / "config.json").read_text())
    config.update({"model_type": "sneakybert",
                   "auto_map": {"AutoConfig": "modeling_sneaky.SneakyConfig",
                                "AutoModelForSequenceClassification": "modeling_sneaky.SneakyModel"}})
    (model / "config.json").write_text(json.dumps(config))
    (model / "modeling_sneaky.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")

    result = run_cli(capsys, "train", "teacher", "--run", tmp_path / "run", "--model", model, "--preset", "tiny",
                     "--data-dir", shared_data)
    assert result.exit_code != 0
    assert "--trust-remote-code" in error_line(result)
    assert not marker.exists(), "the checkpoint's Python ran"
