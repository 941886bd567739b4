"""Training in several processes (torchrun, gloo on the CPU): resume, world size, unused parameters, the ablation,
failures while others wait, several machines; and the device-side choices that need no GPU to check.

Every run pins --device cpu, so these tests mean the same on machines with and without GPUs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import error_line, run_cli, run_with_teacher
from safetensors.torch import load_file

from pocketbert.core.errors import ConfigError
from pocketbert.core.process import launch_env
from pocketbert.core.run.run_files import ABLATION_DIR, ABLATION_RESULTS, ABLATION_TABLE
from pocketbert.train import distributed, precision, trainer
from pocketbert.train.checkpoint import FAULT_ENV

PROCESS_TIMEOUT_S = 300
WAIT_TIMEOUT_S = 120  # POCKETBERT_DDP_TIMEOUT in the failure test: a hang would end the test, not CI
TINY = ["--preset", "tiny", "--device", "cpu"]
# 64 examples in batches of 16: 4 batches, 2 steps per process, a checkpoint after the first.
DDP = [*TINY, "--set", "distill.checkpoint_every=1"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def finish(processes: list[subprocess.Popen], what: str) -> list[subprocess.CompletedProcess]:
    done = []
    for process in processes:
        try:
            out, err = process.communicate(timeout=PROCESS_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for p in processes:
                os.killpg(p.pid, signal.SIGKILL)
            pytest.fail(f"{what} did not finish in {PROCESS_TIMEOUT_S} s")
        done.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return done


def torchrun(*args, env: dict | None = None) -> subprocess.CompletedProcess:
    """The CLI in two processes started by torchrun, as a user starts it (--run-dir: torchrun takes --run as its
    own --run-path)."""
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
               "--master_port", str(free_port()), "-m", "pocketbert.cli", *map(str, args)]
    # `-m pocketbert.cli`: the workers run this interpreter, whether or not its venv is on PATH.
    # A session of its own: on a timeout the workers go too, not only torchrun.
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}, start_new_session=True)
    return finish([process], "torchrun")[0]


def processes(args_of: list[list], machine_of: list[int], env_of: list[dict] | None = None):
    """One CLI process per entry, joined into one process group the way torchrun joins them, but with no agent
    to stop the others when one fails: each process must end by itself. machine_of[r] is the machine that
    process r plays (LOCAL_RANK and LOCAL_WORLD_SIZE follow from it)."""
    port, world = free_port(), len(args_of)
    started = []
    for r, args in enumerate(args_of):
        same_machine = [q for q in range(world) if machine_of[q] == machine_of[r]]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               "WORLD_SIZE": str(world), "RANK": str(r), "LOCAL_RANK": str(same_machine.index(r)),
               "LOCAL_WORLD_SIZE": str(len(same_machine)), **((env_of or [{}] * world)[r])}
        started.append(subprocess.Popen([sys.executable, "-m", "pocketbert.cli", *map(str, args)],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                        start_new_session=True))
    return finish(started, "the process group")


def last_error(stderr: str) -> str:
    lines = [line for line in stderr.replace("\r", "\n").splitlines() if line.startswith("error:")]
    return lines[-1] if lines else ""


def manifest(path: Path) -> dict:
    return json.loads((path / "manifest.json").read_text())


def copy_run(teacher_run: Path, name: str) -> Path:
    return run_with_teacher(teacher_run, teacher_run.parent / f"ddp-{name}")


@pytest.fixture(scope="module")
def two_process_run(teacher_run, shared_data):
    run = copy_run(teacher_run, "uninterrupted")
    done = torchrun("train", "distill", "--run-dir", run, *DDP, "--data-dir", shared_data)
    assert done.returncode == 0, done.stderr[-3000:]
    return run, done


@pytest.fixture(scope="module")
def killed_run(teacher_run, shared_data):
    """Two processes killed with SIGKILL after step 1 (whose checkpoint process 0 wrote)."""
    run = copy_run(teacher_run, "killed")
    done = torchrun("train", "distill", "--run-dir", run, *DDP, "--data-dir", shared_data,
                    env={FAULT_ENV: "kill_after_step:1"})
    assert done.returncode != 0
    assert (run / "checkpoints" / "student" / "last.pt").is_file() and not (run / "student").exists()
    return run


@pytest.mark.slow
def test_two_processes_split_the_work_and_process_0_writes(two_process_run, shared_data):
    from pocketbert.core.config.recipe import validate_recipe
    from pocketbert.core.students.stage_folder import load_stage_model
    from pocketbert.core.tasks.task_data import load_task_data

    run, done = two_process_run
    student = manifest(run / "student")
    train = student["metrics"]["train"]
    assert train["distributed"] == {"world_size": 2, "backend": "gloo", "machines": 1, "replicas_identical": True}
    assert train["steps"] == 2
    assert done.stdout.count("-> wrote") == 1  # process 0 alone reports and writes
    assert not list(run.glob(".student*"))
    # Each process scored half of the eval set; together they match one process scoring all of it.
    model, tokenizer, task, _ = load_stage_model(run / "student")
    recipe = validate_recipe(student["config"]["recipe"])
    data = load_task_data(recipe.dataset, recipe.task, shared_data, None, task.label_names, recipe.seed)
    examples, _, features = trainer.prepare_features(task, tokenizer, data, recipe.distill, recipe.eval, recipe.seed)
    alone = trainer.evaluate(model, task, examples, features, tokenizer.pad_token_id, recipe.eval,
                             torch.device("cpu"), "eval")
    together = dict(student["metrics"]["eval"])
    shares = together.pop("features_scored_by_process")
    assert together.pop("scored") == data.eval_set(len(examples)).describe()  # the questions the score is on
    assert shares == [len(features) - len(features) // 2, len(features) // 2]  # each its share, not all of it
    assert alone == together


@pytest.mark.slow
def test_resume_after_sigkill_with_two_processes_is_bitwise_equal(killed_run, two_process_run, shared_data):
    run = killed_run.parent / "resumed"
    shutil.copytree(killed_run, run)
    done = torchrun("train", "distill", "--run-dir", run, *DDP, "--data-dir", shared_data, "--resume")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resumed at step 1" in done.stderr
    expected = load_file(two_process_run[0] / "student" / "model.safetensors")
    weights = load_file(run / "student" / "model.safetensors")
    assert weights.keys() == expected.keys()
    for name, tensor in expected.items():
        assert weights[name].equal(tensor), f"{name} differs after resuming"


@pytest.mark.slow
def test_resuming_with_another_number_of_processes_is_refused(killed_run, shared_data, capsys):
    run = killed_run.parent / "one-process"
    shutil.copytree(killed_run, run)
    result = run_cli(capsys, "train", "distill", "--run", run, *DDP, "--data-dir", shared_data, "--resume")
    assert result.exit_code == 2
    line = error_line(result)
    assert "written by 2 process(es)" in line and "--nproc_per_node 2" in line
    assert not (run / "student").exists() and (run / "checkpoints" / "student" / "last.pt").is_file()


@pytest.mark.slow
def test_cosine_only_distillation_runs_under_ddp(teacher_run, shared_data):
    # No loss reads the logits: the pooler and classifier get no gradient, which DDP must be told.
    run = copy_run(teacher_run, "cosine-only")
    done = torchrun("train", "distill", "--run-dir", run, *TINY, "--kl-weight", "0", "--ce-weight", "0",
                    "--data-dir", shared_data)
    assert done.returncode == 0, done.stderr[-3000:]
    train = manifest(run / "student")["metrics"]["train"]
    assert train["steps"] == 2 and set(k for k in train if k.startswith("final_")) == {"final_loss", "final_cos"}


@pytest.mark.slow
def test_ablation_under_torchrun_writes_one_table(teacher_run, shared_data):
    run = copy_run(teacher_run, "ablation")
    done = torchrun("train", "ablate", "--run-dir", run, *TINY, "--variants", "no_kl", "--data-dir", shared_data)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((run / ABLATION_DIR / ABLATION_RESULTS).read_text())
    assert [row["variant"] for row in result["rows"]] == ["full", "no_kl"]
    assert done.stdout.count("# Ablation") == 1
    assert (run / ABLATION_DIR / ABLATION_TABLE).read_text().count("| − soft-target KL |") == 1


@pytest.mark.slow
def test_process_0_failing_while_the_others_wait_ends_every_process(teacher_run, shared_data, tmp_path):
    run = copy_run(teacher_run, "cache-fails")
    args = ["train", "distill", "--run", run, *TINY, "--data-dir", shared_data]
    env = {FAULT_ENV: "disk_full_in_cache:0", distributed.TIMEOUT_ENV: str(WAIT_TIMEOUT_S),
           "POCKETBERT_CACHE": str(tmp_path / "empty-cache")}  # an empty cache: process 0 must fill it
    done = processes([args, args], machine_of=[0, 0], env_of=[env, env])
    assert [d.returncode for d in done] == [2, 2]
    assert "disk filled up while writing teacher outputs" in last_error(done[0].stderr)
    waiting = last_error(done[1].stderr)
    assert "process 0 failed while filling the teacher-output cache" in waiting and "disk filled up" in waiting
    assert not (run / "student").exists()


@pytest.mark.slow
def test_several_machines_without_a_shared_run_directory_are_refused(teacher_run, shared_data):
    runs = [copy_run(teacher_run, f"machine-{m}") for m in (0, 1)]
    done = processes([["train", "distill", "--run", run, *TINY, "--data-dir", shared_data] for run in runs],
                     machine_of=[0, 1])
    assert [d.returncode for d in done] == [2, 2]
    for d in done:
        line = last_error(d.stderr)
        assert "process(es) 1" in line and "cannot see the run directory" in line
    assert not any((run / "student").exists() for run in runs)


@pytest.mark.slow
def test_several_machines_fill_an_unshared_cache_once_each(teacher_run, shared_data, tmp_path):
    run = copy_run(teacher_run, "two-machines")
    caches = [tmp_path / f"cache-{m}" for m in (0, 1)]
    args = ["train", "distill", "--run", run, *TINY, "--data-dir", shared_data]
    done = processes([args, args], machine_of=[0, 1], env_of=[{"POCKETBERT_CACHE": str(c)} for c in caches])
    assert [d.returncode for d in done] == [0, 0], done[1].stderr[-2000:]
    report = manifest(run / "student")["metrics"]["teacher_cache"]
    assert report["filled"] == "once per machine (the cache is not shared)"
    for cache in caches:
        entries = [p for p in (cache / "teacher-outputs").iterdir() if not p.name.startswith(".")]
        assert len(entries) == 1 and (entries[0] / "meta.json").is_file()


@pytest.mark.slow
def test_processes_that_built_other_features_are_refused_before_training(teacher_run, shared_data, tmp_path):
    # Another subset on process 1 stands for another data copy or tokenizer version: other step counts, then a
    # hang in the gradient all-reduce, unless the features are compared first.
    run = copy_run(teacher_run, "other-features")
    args = ["train", "distill", "--run", run, *TINY, "--data-dir", shared_data]
    env = {distributed.TIMEOUT_ENV: str(WAIT_TIMEOUT_S), "POCKETBERT_CACHE": str(tmp_path / "cache")}
    done = processes([args, [*args, "--max-train-examples", "48"]], machine_of=[0, 0], env_of=[env, env])
    assert [d.returncode for d in done] == [2, 2]
    for d in done:
        line = last_error(d.stderr)
        assert "process(es) 1 (" in line and "built other training features than process 0" in line
        assert "Traceback" not in d.stderr
    assert not (run / "student").exists()


STALL_STEP_TIMEOUT_S = 5  # the step timeout of the stall test: far under checkpoint.FAULT_STALL_S


@pytest.mark.slow
def test_a_stalled_process_frees_the_others_after_the_step_timeout(teacher_run, shared_data, tmp_path):
    from pocketbert.train.checkpoint import FAULT_STALL_S

    run = copy_run(teacher_run, "stalled")
    args = ["train", "distill", "--run", run, *TINY, "--data-dir", shared_data]
    # the join waits WAIT_TIMEOUT_S: two processes started at once on a loaded machine join seconds apart
    env = {distributed.TIMEOUT_ENV: str(WAIT_TIMEOUT_S), distributed.STEP_TIMEOUT_ENV: str(STALL_STEP_TIMEOUT_S),
           distributed.JOIN_TIMEOUT_ENV: str(WAIT_TIMEOUT_S), "POCKETBERT_CACHE": str(tmp_path / "cache"),
           FAULT_ENV: "stall_in_training:1"}
    done = processes([args, args], machine_of=[0, 0], env_of=[env, env])
    assert done[0].returncode == 2, done[0].stderr[-2000:]  # not the cache-fill wait: it ran out after a few s
    line = last_error(done[0].stderr)
    assert "lost the other processes" in line and distributed.STEP_TIMEOUT_ENV in line, done[0].stderr[-1500:]
    assert done[1].returncode != 0 and FAULT_STALL_S > 3 * STALL_STEP_TIMEOUT_S
    assert not (run / "student").exists()


def test_a_local_rank_beyond_the_gpus_is_refused():
    distributed.check_local_rank(0, 1)
    with pytest.raises(ConfigError, match=r"LOCAL_RANK 1 .* 1 GPU\(s\): start torchrun with --nproc_per_node 1"):
        distributed.check_local_rank(1, 1)


@pytest.mark.parametrize("env, read, default", [
    (distributed.TIMEOUT_ENV, distributed.timeout_seconds, distributed.DEFAULT_TIMEOUT_S),
    (distributed.JOIN_TIMEOUT_ENV, distributed.join_timeout_seconds, launch_env.DEFAULT_JOIN_TIMEOUT_S),
    (distributed.STEP_TIMEOUT_ENV, distributed.step_timeout_seconds, launch_env.DEFAULT_STEP_TIMEOUT_S)])
def test_each_wait_timeout_is_a_setting(monkeypatch, env, read, default):
    monkeypatch.delenv(env, raising=False)
    assert read() == default
    monkeypatch.setenv(env, "90")
    assert read() == 90.0
    for bad in ("soon", "0", "-5"):
        monkeypatch.setenv(env, bad)
        with pytest.raises(ConfigError, match="positive number of seconds"):
            read()


def test_each_process_draws_its_own_dropout(monkeypatch):
    for name, value in {"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}.items():
        monkeypatch.setenv(name, value)  # what torchrun sets beside RANK (launch_env refuses a lone RANK)

    def draws(rank: int) -> torch.Tensor:
        monkeypatch.setenv("RANK", str(rank))
        trainer.set_seed(13)
        distributed.seed_replica(13)
        return torch.rand(8)

    trainer.set_seed(13)
    alone = torch.rand(8)
    assert draws(0).equal(alone)  # process 0 draws what a single process draws
    assert not draws(1).equal(alone)


def test_precision_follows_what_the_hardware_does_natively():
    assert precision.precision_for(torch.device("cpu")) == precision.FP32
    assert precision.precision_for(torch.device("cuda"), native_bf16=True) == precision.BF16
    assert precision.precision_for(torch.device("cuda"), native_bf16=False) == precision.FP16  # T4, V100
    assert not precision.grad_scaler(torch.device("cpu"), precision.FP32).is_enabled()
