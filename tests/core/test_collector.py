"""The collector thresholds of a pocketbert process: a command runs at them, in its own process (the thresholds a
new interpreter starts with replaced) and inside another program (whose own come back when the command ends)."""

from __future__ import annotations

import gc
import json
import subprocess
import sys

import pytest

from pocketbert.core.process.collector import THRESHOLDS, collecting_less

CALLERS = (1234, 5, 6)  # thresholds of a program that runs a command inside itself: neither Python's nor ours


@pytest.fixture
def callers_thresholds():
    before = gc.get_threshold()
    gc.set_threshold(*CALLERS)
    yield
    gc.set_threshold(*before)


def test_the_block_runs_at_the_thresholds_and_gives_the_callers_back_even_when_it_fails(callers_thresholds):
    with pytest.raises(RuntimeError):
        with collecting_less():
            assert gc.get_threshold() == THRESHOLDS
            raise RuntimeError("the command failed")
    assert gc.get_threshold() == CALLERS


def test_a_command_run_inside_another_program_leaves_its_thresholds(callers_thresholds, monkeypatch):
    from pocketbert import cli

    seen = []
    monkeypatch.setattr(cli.cli, "main", lambda **kwargs: seen.append(gc.get_threshold()))
    cli.main(["--help"])
    assert seen == [THRESHOLDS] and gc.get_threshold() == CALLERS


def test_a_command_in_its_own_process_runs_at_the_thresholds():
    """A real `pocketbert` process with one command added to its stages, which prints the thresholds the interpreter
    started with and those the command runs at."""
    code = ("import gc, json, click\n"
            "from pocketbert import cli\n"
            "started = gc.get_threshold()\n"
            "@click.command()\n"
            "def thresholds(): click.echo(json.dumps([started, gc.get_threshold()]))\n"
            "cli.STAGE_COMMANDS['thresholds'] = ('__main__', 'thresholds', 'the collector thresholds')\n"
            "cli.main(['thresholds'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    started, inside = (tuple(t) for t in json.loads(done.stdout.strip().splitlines()[-1]))
    assert inside == THRESHOLDS != started
