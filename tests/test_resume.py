"""A distillation killed with SIGKILL at a random step and continued with --resume ends with the same weights."""

from __future__ import annotations

import random

import pytest
from helpers import cli_process, error_line, run_cli, run_with_teacher
from safetensors.torch import load_file

from pocketbert.train.checkpoint import FAULT_ENV

pytestmark = pytest.mark.slow
SIGKILL_EXIT = -9
# 96 examples in batches of 16: 6 steps, a checkpoint every 2.
# --device cpu: bitwise equality needs deterministic kernels, which GPUs do not promise.
DISTILL = ["--preset", "tiny", "--device", "cpu", "--max-train-examples", "96", "--set", "distill.checkpoint_every=2"]


@pytest.fixture(scope="module")
def uninterrupted(teacher_run, shared_data, tmp_path_factory):
    run = run_with_teacher(teacher_run, tmp_path_factory.mktemp("resume") / "uninterrupted")
    done = cli_process("train", "distill", "--run", run, *DISTILL, "--data-dir", shared_data)
    assert done.returncode == 0, done.stderr
    return load_file(run / "student" / "model.safetensors")


@pytest.mark.parametrize("fault", ["kill_after_step", "kill_in_checkpoint"])
def test_resume_after_sigkill_gives_identical_weights(teacher_run, uninterrupted, shared_data, fault, tmp_path):
    step = random.Random(fault).choice([2, 3, 4, 5]) if fault == "kill_after_step" else 4
    run = run_with_teacher(teacher_run, tmp_path / f"killed-{fault}")
    killed = cli_process("train", "distill", "--run", run, *DISTILL, "--data-dir", shared_data,
                 env={FAULT_ENV: f"{fault}:{step}"})
    assert killed.returncode == SIGKILL_EXIT
    assert not (run / "student").exists(), "a killed stage must leave no student folder"
    assert (run / "checkpoints" / "student" / "last.pt").is_file()

    resumed = cli_process("train", "distill", "--run", run, *DISTILL, "--data-dir", shared_data, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed at step" in resumed.stderr
    weights = load_file(run / "student" / "model.safetensors")
    assert weights.keys() == uninterrupted.keys()
    for name, tensor in uninterrupted.items():
        assert weights[name].equal(tensor), f"{name} differs after resuming"
    assert not (run / "checkpoints").exists(), "a finished stage keeps no checkpoint"


def test_resume_from_another_configuration_is_refused(teacher_run, shared_data, capsys, tmp_path):
    run = run_with_teacher(teacher_run, tmp_path / "other-config")
    killed = cli_process("train", "distill", "--run", run, *DISTILL, "--data-dir", shared_data, env={FAULT_ENV: "kill_after_step:3"})
    assert killed.returncode == SIGKILL_EXIT
    result = run_cli(capsys, "train", "distill", "--run", run, *DISTILL, "--temperature", "4", "--data-dir", shared_data,
                     "--resume")
    assert result.exit_code != 0
    assert "written for another configuration" in error_line(result)
