"""The threads of every ONNX Runtime session pocketbert opens: a number given wins, else the process's cap
(POCKETBERT_ORT_THREADS, which a parallel export's workers and the test workers set), else the runtime chooses;
a cap that is not a number is refused in one line."""

from __future__ import annotations

import os

import pytest
from helpers import cli_process
from onnx import TensorProto, helper

from pocketbert.core.errors import ConfigError
from pocketbert.core.process.exit_codes import USAGE
from pocketbert.core.process.launch_env import (
    SESSION_THREADS_ENV,
    THREADS_ENV,
    drop_invalid_thread_count,
    session_threads,
)
from pocketbert.core.students.inference import ort_session
from pocketbert.export.text_in.session import text_session

CAP = 3  # neither ONNX Runtime's own choice (0) nor a number a session here is given


@pytest.fixture
def identity_model(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    model = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path = tmp_path / "identity.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def threads_of(session) -> int:
    return session.get_session_options().intra_op_num_threads


@pytest.mark.parametrize("open_session", [ort_session, text_session], ids=["ort_session", "text_session"])
def test_a_session_takes_the_cap_unless_it_is_given_a_number(open_session, identity_model, monkeypatch):
    monkeypatch.delenv(SESSION_THREADS_ENV, raising=False)
    assert threads_of(open_session(identity_model)) == 0
    monkeypatch.setenv(SESSION_THREADS_ENV, str(CAP))
    assert threads_of(open_session(identity_model)) == CAP
    assert threads_of(open_session(identity_model, threads=1)) == 1


@pytest.mark.parametrize("value", ["two", "-1", "1.5", "²"])
def test_a_cap_that_is_not_a_number_of_threads_is_refused_saying_what_to_set(value, monkeypatch):
    monkeypatch.setenv(SESSION_THREADS_ENV, value)
    with pytest.raises(ConfigError, match=f"^{SESSION_THREADS_ENV}='{value}' is not a number of threads: set it"):
        session_threads()
    assert session_threads(2) == 2  # a number given is not the cap's to refuse


def test_an_empty_cap_is_no_cap(monkeypatch):
    monkeypatch.setenv(SESSION_THREADS_ENV, " ")
    assert session_threads() == 0


def test_a_command_refuses_a_cap_that_is_not_a_number_before_any_work(tmp_path, shared_data):
    run = tmp_path / "run"
    done = cli_process("train", "teacher", "--run", run, "--preset", "tiny", "--data-dir", shared_data,
                       env={SESSION_THREADS_ENV: "two"})
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == USAGE and len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith("error: ") and SESSION_THREADS_ENV in lines[0], lines[0]
    assert not run.exists()


def test_openmps_count_in_digits_int_refuses_is_dropped_as_any_bad_count(monkeypatch):
    """"²" passes str.isdigit but not int(): said once and dropped, as "many" is, not an internal error."""
    monkeypatch.setenv(THREADS_ENV, "2,²")
    said = drop_invalid_thread_count()
    assert said is not None and said.startswith("warning: ") and THREADS_ENV not in os.environ
