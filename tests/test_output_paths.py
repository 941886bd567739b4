"""One rule for every output path: each command that writes where an `--out` option says (found in the Click
command tree, so a new one cannot be left out) refuses, with and without --overwrite, every target that is not
new, empty or its own marked output: exit 2, one `error:` line naming the target, and every byte as it was.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import click
import pytest
from helpers import error_line, run_cli
from test_nothing_lost import tree

pytestmark = pytest.mark.slow

USAGE_ERROR = 2
MARKER = ".pocketbert_output.json"

# Each writing command's other arguments ({run}: the run; {target}: the path tried), and the --out option it takes.
WRITERS = {
    ("bench", "calibration"): ["--out", "{target}"],
    ("bench", "kit"): ["--run", "{run}", "--out", "{target}"],
    ("compare",): ["{run}", "--out", "{target}"],
    ("export", "android"): ["--run", "{run}", "--out", "{target}"],
    ("export", "ios"): ["--run", "{run}", "--out", "{target}"],
    ("ladder",): ["--run", "{run}", "--out", "{target}", "--device", "cpu"],
    ("train", "prune"): ["--run", "{run}", "--out-run", "{target}", "--preset", "tiny", "--device", "cpu"],
}


def commands_with_an_out_option() -> dict[tuple[str, ...], click.Command]:
    """Every command of the CLI with an option naming where it writes (--out, --out-run, ...)."""
    from pocketbert.cli import cli

    context = click.Context(cli)
    found = {}

    def walk(command, path):
        if isinstance(command, click.Group):
            for name in command.list_commands(context):
                walk(command.get_command(context, name), (*path, name))
        elif any(opt.startswith("--out") for p in command.params if isinstance(p, click.Option) for opt in p.opts):
            found[path] = command

    walk(cli, ())
    return found


def forbidden_targets(area: Path, run: Path, other_command: str) -> dict[str, Path]:
    """The places no output may go, made under `area` (which holds the run)."""
    mine = area / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("the user's own notes\n")
    (area / "notes.txt").write_text("a file of the user's\n")
    other = area / "other-output"
    other.mkdir()
    (other / MARKER).write_text(json.dumps({"made_by": other_command, "files": {}}) + "\n")
    (other / "result.txt").write_text("another command's result\n")
    return {"a user's folder": mine, "a user's file": area / "notes.txt", "the run": run,
            "a stage folder": run / "student", "a path inside a run": run / "export" / "inside",
            "a folder holding the run": area, "another command's output": other}


@pytest.mark.parametrize("command", sorted(commands_with_an_out_option()), ids=" ".join)
def test_no_output_replaces_what_is_not_its_own(command, quick_exported_run, tmp_path, capsys):
    assert command in WRITERS, f"`pocketbert {' '.join(command)}` writes an --out folder: add its arguments to WRITERS"
    area = tmp_path / "area"
    run = area / "run"
    shutil.copytree(quick_exported_run, run)
    other_command = "compare" if command != ("compare",) else "bench kit"
    takes_overwrite = any("--overwrite" in p.opts for p in commands_with_an_out_option()[command].params)
    for what, target in forbidden_targets(area, run, other_command).items():
        for overwrite in ([False, True] if takes_overwrite else [False]):
            before = tree(area)
            args = [a.format(run=run, target=target) for a in WRITERS[command]]
            result = run_cli(capsys, *command, *args, *(["--overwrite"] if overwrite else []))
            said = f"{' '.join(command)} --out {what}{' --overwrite' if overwrite else ''}"
            line = error_line(result)
            assert result.exit_code == USAGE_ERROR, f"{said}: exit {result.exit_code}, {result.err[-800:]}"
            assert line.startswith("error: ") and "Traceback" not in result.err, f"{said}: {result.err}"
            assert str(target) in line or target.name in line, f"{said}: the refusal names another cause: {line}"
            assert tree(area) == before, f"{said}: the refused command changed files"
            assert not (run / "export" / "inside").exists()


def test_overwrite_replaces_a_kits_own_files_only(quick_exported_run, tmp_path, capsys):
    """The command's own output stays replaceable: an earlier kit is replaced, a file added to it is not lost."""
    run = tmp_path / "run"
    shutil.copytree(quick_exported_run, run)
    out = tmp_path / "kit"
    first = run_cli(capsys, "bench", "kit", "--run", run, "--out", out)
    if first.exit_code == USAGE_ERROR and "holds no Core ML" in error_line(first):
        pytest.skip("this machine's export made no Core ML program, which a kit needs")
    assert first.exit_code == 0, first.err
    assert json.loads((out / MARKER).read_text())["made_by"] == "bench kit"
    assert run_cli(capsys, "bench", "kit", "--run", run, "--out", out, "--overwrite").exit_code == 0
    (out / "mine.txt").write_text("added by the user\n")
    refused = run_cli(capsys, "bench", "kit", "--run", run, "--out", out, "--overwrite")
    assert refused.exit_code == USAGE_ERROR and "mine.txt" in error_line(refused)
    assert (out / "mine.txt").read_text() == "added by the user\n"
