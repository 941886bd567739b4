"""Exit statuses that mean one thing each (pocketbert/exit_codes.py): 0 success, 1 a regression found by
`bench compare`, 2 a usage, input or file-system error, 70 a bug in pocketbert, 130 interrupted."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import cli_process, error_line, run_cli

from pocketbert.core.run import run_files
from pocketbert.core.process import exit_codes
from pocketbert.boundary import INTERRUPTED_LINE, verdict
from pocketbert.train.checkpoint import FAULT_ENV

WRITE_START_TIMEOUT_S = 120


def stderr_lines(text: str) -> list[str]:
    """What the user reads on stderr, without progress bars and library start-up notes."""
    return [line for line in text.replace("\r", "\n").splitlines()
            if line.strip() and "it/s" not in line and "step/s" not in line and "batch/s" not in line
            and not line.startswith(("W1", "I1", "E1")) and "torchao" not in line]


def results_file(path, median):
    row = {"device": "host", "model": "student", "runtime": "onnxruntime", "model_format": "onnx",
           "precision": "fp32", "threads": 1, "compute_units": None, "batch": 1, "sequence_length": 128,
           "tokenization": "excluded", "median_ms": median, "ci_low_ms": None, "ci_high_ms": None}
    path.write_text(json.dumps({"host": {"cpu": "cpu A"}, "measurements": [row]}))
    return path


@pytest.mark.slow
def test_a_crash_in_bench_compare_is_not_a_regression(tmp_path):
    """A value of the wrong type used to crash `bench compare` with a traceback and exit status 1, the status
    CI reads as "regression found"."""
    before = results_file(tmp_path / "a.json", 10.0)
    after = results_file(tmp_path / "b.json", "fast")
    done = cli_process("bench", "compare", before, after)
    assert done.returncode not in (exit_codes.OK, exit_codes.FINDING), done.stderr
    assert done.returncode in (exit_codes.USAGE, exit_codes.INTERNAL)
    assert "Traceback" not in done.stderr
    lines = stderr_lines(done.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr


def test_bench_compare_given_a_folder_is_one_line(tmp_path, capsys):
    before = results_file(tmp_path / "a.json", 10.0)
    folder = tmp_path / "results"
    folder.mkdir()
    result = run_cli(capsys, "bench", "compare", before, folder)
    assert result.exit_code == exit_codes.USAGE
    assert "Traceback" not in result.err
    assert error_line(result).startswith("error: ") and str(folder) in error_line(result)


def test_a_bug_is_said_in_one_line_with_its_own_status():
    try:
        {}["missing"]
    except KeyError as exc:
        line, code, debuggable = verdict(exc)
    assert code == exit_codes.INTERNAL and code not in (exit_codes.FINDING, exit_codes.USAGE)
    assert line.startswith("error: internal error") and "POCKETBERT_DEBUG=1" in line and "\n" not in line
    assert debuggable


def test_a_bug_while_handling_a_missing_file_is_still_a_bug(tmp_path):
    """Only a write fault (a full disk inside torch.save) is recognised behind another exception; a bug raised
    while a missing file was being handled must not be reported as the user's missing file."""
    try:
        try:
            (tmp_path / "absent.json").read_text()
        except FileNotFoundError:
            {}["missing"]
    except KeyError as exc:
        assert verdict(exc)[1] == exit_codes.INTERNAL


def test_usage_errors_exit_2(capsys):
    for args in (["nope"], ["train", "teacher", "--bogus"], ["bench", "--run", "r", "--time-cap", "abc"]):
        result = run_cli(capsys, *args)
        assert result.exit_code == exit_codes.USAGE, (args, result.err)
        # click's own usage errors end in its "Error:" line; a value pocketbert's option types refuse, in "error:"
        assert error_line(result).lower().startswith("error: "), result.err
        assert "Traceback" not in result.err


def test_a_truncated_gzip_file_is_an_input_error_not_an_interrupt(tmp_path, capsys, tiny_base):
    """click turns EOFError into Abort, which once printed "aborted" and exited 130 as if Ctrl-C was pressed."""
    rows = "".join(json.dumps({"text": f"sentence number {i} is {'good' if i % 2 else 'bad'}", "label": i % 2}) + "\n"
                   for i in range(400))
    whole = gzip.compress(rows.encode())
    data = tmp_path / "train.jsonl.gz"
    data.write_bytes(whole[: len(whole) // 2])
    result = run_cli(capsys, "train", "teacher", "--run", tmp_path / "run", "--model", tiny_base, "--dataset", data,
                     "--preset", "tiny")
    assert result.exit_code == exit_codes.USAGE, result.err
    assert "Traceback" not in result.err
    line = error_line(result)
    assert line.startswith("error: ") and "interrupted" not in line and "aborted" not in result.err.lower()
    assert not (tmp_path / "run" / run_files.TEACHER_DIR).exists()


@pytest.mark.slow
def test_ctrl_c_says_interrupted_and_exits_130(tmp_path, tiny_base, shared_data):
    run = tmp_path / "run"
    # The stall hook holds the stage before its first step: a tiny teacher otherwise finishes before the signal.
    process = subprocess.Popen([sys.executable, "-m", "pocketbert.cli", "train", "teacher", "--run", str(run),
                                "--model", str(tiny_base), "--preset", "tiny", "--data-dir", str(shared_data)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, FAULT_ENV: "stall_in_training:0"},
                               # a background job (make test under `&`, some CI runners) starts with SIGINT ignored,
                               # and Python keeps it ignored: give the child the terminal's default, as a user has
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + WRITE_START_TIMEOUT_S
    while not list(run.glob(f".{run_files.TEACHER_DIR}.tmp-*")):
        assert process.poll() is None, "the stage ended before it started writing"
        assert time.monotonic() < deadline, "the stage never started writing"
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=WRITE_START_TIMEOUT_S)
    assert process.returncode == exit_codes.INTERRUPTED, err
    assert stderr_lines(err)[-1] == INTERRUPTED_LINE, err
    assert "Traceback" not in err and "aborted" not in err.lower()
    assert list(run.iterdir()) == [], "an interrupted stage left something behind"
