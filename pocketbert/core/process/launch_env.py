"""Which process of a run this is: the launch variables, read from the environment in one place and checked as a set.

torchrun sets WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT together, consistently;
a process started by hand has none of them. Anything in between is a shell that kept a variable from an earlier
torchrun or SLURM job, or a typo: a lone RANK=1 made a single process believe it was the second of a run, train,
and write nothing; WORLD_SIZE=2 without MASTER_ADDR failed deep inside torch.distributed. Both are the user's
setup, so they end in one line naming the variable and what to unset, before any work.

The threads a process may use are read here too: OpenMP's count, and the cap on ONNX Runtime sessions' threads.
This module imports no torch: the commands check the environment before loading anything.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from pocketbert.core.errors import ConfigError

WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE = "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"
MASTER_ADDR, MASTER_PORT = "MASTER_ADDR", "MASTER_PORT"
LAUNCH_VARIABLES = (WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
MAX_PORT = 65535

TIMEOUT_ENV = "POCKETBERT_DDP_TIMEOUT"  # waiting for another process's teacher-cache fill
DEFAULT_TIMEOUT_S = 2 * 3600
STEP_TIMEOUT_ENV = "POCKETBERT_DDP_STEP_TIMEOUT"  # every other collective
DEFAULT_STEP_TIMEOUT_S = 600
# Joining waits for the slowest peer to start (imports, a loaded machine, a node that boots late): a step timeout
# short enough to catch a stalled step must not bound it.
JOIN_TIMEOUT_ENV = "POCKETBERT_DDP_JOIN_TIMEOUT"
DEFAULT_JOIN_TIMEOUT_S = 600


@dataclass(frozen=True)
class Launch:
    world_size: int = 1
    rank: int = 0
    local_rank: int = 0
    local_world_size: int = 1


def _way_out() -> str:
    """What to unset to train in one process: the launch variables this shell has."""
    present = [name for name in LAUNCH_VARIABLES if name in os.environ]
    return (f"run `unset {' '.join(present)}` to train in one process, or start the command with torchrun, "
            "which sets them all")


def _whole(name: str, low: int, high: int | None = None) -> int | None:
    """The variable as a whole number within [low, high]; None when it is not set."""
    raw = os.environ.get(name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        value = None
    if value is None or value < low or (high is not None and value > high):
        bounds = f"from {low} to {high}" if high is not None else f">= {low}"
        raise ConfigError(f"{name}={raw!r} in the environment is not a whole number {bounds}: {_way_out()}")
    return value


def launch() -> Launch:
    """This process's place in the run, from the environment; ConfigError when the variables do not fit together."""
    world = _whole(WORLD_SIZE, 1)
    rank, local_rank = _whole(RANK, 0), _whole(LOCAL_RANK, 0)
    local_world = _whole(LOCAL_WORLD_SIZE, 1)
    _whole(MASTER_PORT, 1, MAX_PORT)
    if world is None:
        stray = next((f"{name}={os.environ[name]}" for name in (RANK, LOCAL_RANK, LOCAL_WORLD_SIZE)
                      if name in os.environ), None)
        if stray:
            raise ConfigError(f"{stray} is set but WORLD_SIZE is not (left from an earlier torchrun or SLURM job?): "
                              f"{_way_out()}")
        return Launch()
    if world > 1:
        for name, value in ((RANK, rank), (MASTER_ADDR, os.environ.get(MASTER_ADDR, "").strip() or None),
                            (MASTER_PORT, os.environ.get(MASTER_PORT))):
            if value is None:
                raise ConfigError(f"WORLD_SIZE={world} asks for {world} processes, but {name} is not set: "
                                  f"{_way_out()}")
    rank = rank or 0
    local_world = local_world if local_world is not None else world
    local_rank = local_rank or 0
    for low_name, low, high_name, high in ((RANK, rank, WORLD_SIZE, world),
                                           (LOCAL_RANK, local_rank, LOCAL_WORLD_SIZE, local_world)):
        if low >= high:
            raise ConfigError(f"{low_name}={low} is not below {high_name}={high} (processes count from 0): "
                              f"{_way_out()}")
    if local_world > world:
        raise ConfigError(f"LOCAL_WORLD_SIZE={local_world} is more than WORLD_SIZE={world}: {_way_out()}")
    if world > 1:  # the collectives' time limits are read only by a run of several processes: checked with it
        timeout_seconds(), step_timeout_seconds()
    return Launch(world, rank, local_rank, local_world)


THREADS_ENV = "OMP_NUM_THREADS"


def drop_invalid_thread_count() -> str | None:
    """OpenMP's thread count, read before torch loads: a value that is not a positive whole number (or a
    comma-separated list of them, as OpenMP takes) is removed from the environment, so that neither this
    process's OpenMP runtimes nor the commands it starts complain about it each; returns the line saying so."""
    raw = os.environ.get(THREADS_ENV)
    if raw is None:
        return None
    counts = [_whole_number(item) for item in raw.split(",")]
    if all(count is not None and count > 0 for count in counts):
        return None
    del os.environ[THREADS_ENV]
    return (f"warning: {THREADS_ENV}={raw!r} is not a positive whole number, so it is ignored and every core is "
            f"used: set it to e.g. 1, or unset it")


# A process that shares the machine's cores with others (a parallel export's worker, a test worker) caps every
# ONNX Runtime session's threads: a session's idle threads spin, on cores the other processes are waiting for (a tiny
# student's forward took 2.2 to 2.9 times the CPU at ONNX Runtime's choice of 2 threads as at 1 with the other core
# busy; results/README.md, Fresh-clone checks of this version).
SESSION_THREADS_ENV = "POCKETBERT_ORT_THREADS"


def session_threads(threads: int = 0) -> int:
    """The intra-op threads of a session: `threads` where given, else SESSION_THREADS_ENV's where set, else 0
    (ONNX Runtime chooses)."""
    if threads:
        return threads
    value = os.environ.get(SESSION_THREADS_ENV, "").strip()
    if not value:
        return 0
    cap = _whole_number(value)
    if cap is None:
        raise ConfigError(f"{SESSION_THREADS_ENV}={value!r} is not a number of threads: set it to a whole "
                          "number (0: ONNX Runtime chooses) or unset it")
    return cap


def _whole_number(raw: str) -> int | None:
    """`raw` as a whole number written in ASCII digits, else None (str.isdigit also takes "²", which int refuses)."""
    raw = raw.strip()
    return int(raw) if raw.isascii() and raw.isdigit() else None


def checked(command):
    """A command that reads the environment's launch variables, refusing a bad set before its work starts."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        launch()
        return command(*args, **kwargs)

    return run


def _seconds_from(env: str, default: float) -> float:
    raw = os.environ.get(env)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise ConfigError(f"{env}={raw} is not a positive number of seconds: set it to e.g. {int(default)}")
    return value


def timeout_seconds() -> float:
    """How long a process waits for another's teacher-cache fill."""
    return _seconds_from(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)


def step_timeout_seconds() -> float:
    """How long any other collective (a training step's all-reduce) may wait before the run stops."""
    return _seconds_from(STEP_TIMEOUT_ENV, DEFAULT_STEP_TIMEOUT_S)


def join_timeout_seconds() -> float:
    """How long a process waits for every other to join the process group."""
    return _seconds_from(JOIN_TIMEOUT_ENV, DEFAULT_JOIN_TIMEOUT_S)
