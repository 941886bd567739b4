"""The environment is input: the launch variables torchrun sets (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
MASTER_ADDR, MASTER_PORT) are checked as a set before any work, and POCKETBERT_DEBUG takes 0/1/true/false and never
changes an exit status. The runs and data named here do not exist, so a check that came late would fail on them with
another message (a lone RANK=1 used to train, write nothing and exit 0; WORLD_SIZE=abc exited 70, "a bug")."""

from __future__ import annotations

import pytest

from pocketbert.core.process import exit_codes
from pocketbert.boundary import DEBUG_ENV
from pocketbert.core.process.launch_env import JOIN_TIMEOUT_ENV, LAUNCH_VARIABLES, STEP_TIMEOUT_ENV, TIMEOUT_ENV
from tests.helpers import cli_process, error_line, run_cli

TORCHRUN_PAIR = {"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


@pytest.fixture
def clean_launch_env(monkeypatch):
    """No launch variable from the shell running the tests; the test sets its own."""
    for name in (*LAUNCH_VARIABLES, TIMEOUT_ENV, STEP_TIMEOUT_ENV, JOIN_TIMEOUT_ENV, DEBUG_ENV):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _stage(command: str, tmp_path) -> list:
    return ["train", command, "--run", tmp_path / "run", "--preset", "tiny", "--dataset", tmp_path / "missing.tsv"]


def _refused(result, *words):
    line = error_line(result)
    assert result.exit_code == exit_codes.USAGE, result.err
    assert line.startswith("error:") and all(w in line for w in words), line
    assert "Traceback" not in result.err
    assert len([ln for ln in result.err.splitlines() if ln.strip()]) == 1, result.err


@pytest.mark.parametrize("env, words", [
    ({"RANK": "1"}, ["RANK=1", "WORLD_SIZE is not", "unset RANK"]),
    ({"LOCAL_RANK": "3"}, ["LOCAL_RANK=3", "WORLD_SIZE is not", "unset LOCAL_RANK"]),
    ({"WORLD_SIZE": "abc"}, ["WORLD_SIZE='abc'", "whole number", "unset WORLD_SIZE"]),
    ({"WORLD_SIZE": "2"}, ["WORLD_SIZE=2", "RANK is not set", "unset WORLD_SIZE"]),
    ({"WORLD_SIZE": "2", "RANK": "0"}, ["MASTER_ADDR is not set", "unset WORLD_SIZE RANK"]),
    ({**TORCHRUN_PAIR, "MASTER_PORT": "99999"}, ["MASTER_PORT='99999'", "from 1 to 65535"]),
    ({k: v for k, v in TORCHRUN_PAIR.items() if k != "MASTER_PORT"}, ["MASTER_PORT is not set"]),
    ({**TORCHRUN_PAIR, "RANK": "2"}, ["RANK=2 is not below WORLD_SIZE=2"]),
    ({**TORCHRUN_PAIR, "RANK": "-1"}, ["RANK='-1'", ">= 0"]),
    ({**TORCHRUN_PAIR, "RANK": "1.5"}, ["RANK='1.5'", "whole number"]),
    ({**TORCHRUN_PAIR, "LOCAL_WORLD_SIZE": "4"}, ["LOCAL_WORLD_SIZE=4 is more than WORLD_SIZE=2"]),
    ({**TORCHRUN_PAIR, "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "1"}, ["LOCAL_RANK=1 is not below LOCAL_WORLD_SIZE=1"]),
    ({**TORCHRUN_PAIR, TIMEOUT_ENV: "soon"}, [TIMEOUT_ENV, "positive number of seconds"]),
])
@pytest.mark.parametrize("command", ["teacher", "distill"])
def test_a_launch_environment_that_does_not_fit_together_is_refused(capsys, tmp_path, clean_launch_env, env, words,
                                                                    command):
    for name, value in env.items():
        clean_launch_env.setenv(name, value)
    _refused(run_cli(capsys, *_stage(command, tmp_path)), *words)
    assert not (tmp_path / "run").exists()


def test_bench_train_checks_the_environment_too(capsys, tmp_path, clean_launch_env):
    clean_launch_env.setenv("RANK", "1")
    _refused(run_cli(capsys, "bench", "train", "--run", tmp_path / "run", "--data-dir", tmp_path), "RANK=1",
             "unset RANK")


@pytest.mark.parametrize("env", [{}, {"WORLD_SIZE": "1"}, {"WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0"},
                                 {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}])
def test_one_process_environments_reach_the_stage(capsys, tmp_path, clean_launch_env, env):
    """What torchrun --nproc_per_node 1 sets, or stray MASTER_* alone, is a single process: the stage runs and
    stops on the missing dataset, as without any variable."""
    for name, value in env.items():
        clean_launch_env.setenv(name, value)
    _refused(run_cli(capsys, *_stage("teacher", tmp_path)), "missing.tsv")


@pytest.mark.parametrize("value", ["2", "yes", "on", "debug"])
def test_pocketbert_debug_takes_only_0_1_true_false(capsys, tmp_path, clean_launch_env, value):
    clean_launch_env.setenv(DEBUG_ENV, value)
    _refused(run_cli(capsys, *_stage("teacher", tmp_path)), f"{DEBUG_ENV}='{value}'", "unset POCKETBERT_DEBUG")


@pytest.mark.parametrize("value", ["0", "false", "FALSE", ""])
def test_pocketbert_debug_off_shows_no_traceback(capsys, tmp_path, clean_launch_env, value):
    """POCKETBERT_DEBUG=0 used to turn debugging on: any value was taken as yes."""
    clean_launch_env.setenv(DEBUG_ENV, value)
    _refused(run_cli(capsys, *_stage("teacher", tmp_path)), "missing.tsv")


@pytest.mark.slow
@pytest.mark.parametrize("value", ["1", "true"])
def test_debugging_shows_the_traceback_and_keeps_the_exit_status(tmp_path, value):
    """With debugging on, every failure used to exit 1: the status `bench compare` keeps for a regression."""
    done = cli_process(*_stage("teacher", tmp_path), env={DEBUG_ENV: value})
    assert done.returncode == exit_codes.USAGE, done.stderr
    assert "Traceback" in done.stderr and "ConfigError" in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: ") and "missing.tsv" in done.stderr
