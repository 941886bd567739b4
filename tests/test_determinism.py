"""The same seed and data give the same metrics and weights on the CPU; the seed is in the manifest."""

from __future__ import annotations

import json

import pytest
from helpers import run_cli
from safetensors.torch import load_file

pytestmark = pytest.mark.slow  # three teacher trainings through the CLI: about 50 s on 2 cores

TIMINGS = ("loop_seconds", "examples_per_second")  # measured, so they differ between equal runs


def teacher(capsys, run, tiny_base, shared_data, seed):
    result = run_cli(capsys, "train", "teacher", "--run", run, "--model", tiny_base, "--preset", "tiny",
                     "--data-dir", shared_data, "--seed", seed, "--device", "cpu")
    assert result.exit_code == 0, result.err
    manifest = json.loads((run / "teacher" / "manifest.json").read_text())
    return manifest, load_file(run / "teacher" / "model.safetensors")


def test_same_seed_same_metrics_and_weights(capsys, tmp_path, tiny_base, shared_data):
    first, first_weights = teacher(capsys, tmp_path / "a", tiny_base, shared_data, 5)
    again, again_weights = teacher(capsys, tmp_path / "b", tiny_base, shared_data, 5)
    other, other_weights = teacher(capsys, tmp_path / "c", tiny_base, shared_data, 6)
    assert first["config"]["seed"] == 5 and other["config"]["seed"] == 6
    assert first["metrics"]["eval"] == again["metrics"]["eval"]
    untimed = [{k: v for k, v in m["metrics"]["train"].items() if k not in TIMINGS} for m in (first, again)]
    assert untimed[0] == untimed[1] and untimed[0]["final_loss"] > 0
    assert all(first_weights[k].equal(again_weights[k]) for k in first_weights)
    assert not all(first_weights[k].equal(other_weights[k]) for k in first_weights)
