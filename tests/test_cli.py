"""The CLI: instant help, and one-line errors for every bad input a user can cause."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import cli_process, error_line, run_cli


def test_help_imports_no_torch():
    code = "import sys; from pocketbert.cli import cli; import click; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def listed_commands(help_text: str) -> dict[str, str]:
    """The rows of a --help's Commands section: command name -> its help line."""
    section = help_text.split("Commands:", 1)[1]
    import re

    rows = [re.match(r"^  (\S+)\s*(.*)$", line) for line in section.splitlines()]  # wrapped lines indent further
    return {row[1]: row[2] for row in rows if row}


def test_help_lists_stages(capsys):
    result = run_cli(capsys, "--help")
    assert result.exit_code == 0
    commands = listed_commands(result.out)
    assert set(commands) == {"train", "import", "export", "bench", "inspect", "compare", "ladder"}
    assert all(commands.values())  # each with its help line
    train = run_cli(capsys, "train", "--help")
    assert set(listed_commands(train.out)) == {"teacher", "distill", "ablate", "mlm", "prune", "vocabulary"}
    bench = run_cli(capsys, "bench", "--help")
    assert set(listed_commands(bench.out)) == {"import", "compare", "train", "calibration", "kit"}


def assert_one_line_error(result, *fragments):
    assert result.exit_code != 0
    assert "Traceback" not in result.err
    line = error_line(result)
    assert line.startswith("error: "), result.err
    for fragment in fragments:
        assert fragment in line, line


def assert_no_stage_written(run_dir: Path):
    if run_dir.exists():
        leftovers = [p.name for p in run_dir.iterdir()]
        assert leftovers == [], f"half-written artifacts left: {leftovers}"


def test_unknown_task(capsys, tmp_path):
    result = run_cli(capsys, "train", "teacher", "--run", tmp_path / "run", "--task", "translation")
    assert_one_line_error(result, "unknown task 'translation'", "sentiment, qa")


def test_unknown_dataset(capsys, tmp_path):
    result = run_cli(capsys, "train", "teacher", "--run", tmp_path / "run", "--dataset", "mnli")
    assert_one_line_error(result, "unknown dataset 'mnli'", "sst2")
    assert_no_stage_written(tmp_path / "run")


def test_missing_named_dataset_in_data_dir(capsys, tmp_path):
    result = run_cli(capsys, "train", "teacher", "--run", tmp_path / "run", "--data-dir", tmp_path / "nothing-here")
    assert_one_line_error(result, "sst2/train.tsv does not exist", "--data-dir")


@pytest.mark.parametrize("name, content, fragments", [
    ("reviews.csv", "review,stars\ngreat film,1\n", ("reviews.csv:1", "'label' column")),
    ("reviews.jsonl", '{"text": "fine", "label": 1}\n{"text": "oops", "label": \n', ("reviews.jsonl:2", "not valid JSON")),
    ("reviews.tsv", "text\tlabel\ngood\t1\n   \t0\n", ("reviews.tsv:3", "empty text")),
])
def test_malformed_data_file(capsys, tmp_path, tiny_base, name, content, fragments):
    bad = tmp_path / name
    bad.write_text(content)
    result = run_cli(capsys, "train", "teacher", "--run", tmp_path / "run", "--dataset", bad, "--model", tiny_base)
    assert_one_line_error(result, *fragments)
    assert_no_stage_written(tmp_path / "run")


def test_label_outside_label_set(capsys, tmp_path, tiny_base):
    data = tmp_path / "data" / "sst2"
    data.mkdir(parents=True)
    (data / "train.tsv").write_text("sentence\tlabel\na moving film\t1\na dull film\t2\n")
    (data / "dev.tsv").write_text("sentence\tlabel\ngood\t1\n")
    result = run_cli(capsys, "train", "teacher", "--run", tmp_path / "run", "--model", tiny_base,
                     "--data-dir", tmp_path / "data")
    assert_one_line_error(result, "train.tsv:3", "label '2' is not in the label set (negative, positive)")
    assert_no_stage_written(tmp_path / "run")


def test_eval_label_unseen_in_train(capsys, tmp_path, tiny_base):
    train = tmp_path / "train.jsonl"
    train.write_text('{"text": "happy day", "label": "joy"}\n{"text": "gloomy", "label": "sadness"}\n')
    dev = tmp_path / "dev.jsonl"
    dev.write_text('{"text": "so angry", "label": "anger"}\n')
    result = run_cli(capsys, "train", "teacher", "--run", tmp_path / "run", "--dataset", train,
                     "--eval-file", dev, "--model", tiny_base)
    assert_one_line_error(result, "dev.jsonl:1", "label 'anger' is not in the label set (joy, sadness)")


@pytest.mark.slow
def test_teacher_path_without_model(capsys, tmp_path, shared_data):
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    result = run_cli(capsys, "train", "teacher", "--run", tmp_path / "run", "--model", empty, "--data-dir", shared_data)
    assert_one_line_error(result, "not-a-model holds no Hugging Face model", "config.json")
    assert_no_stage_written(tmp_path / "run")


def test_export_without_student(capsys, tmp_path):
    result = run_cli(capsys, "export", "--run", tmp_path / "run")
    assert_one_line_error(result, "no finished student", "pocketbert train distill")
    assert not (tmp_path / "run" / "export").exists()


def test_bench_without_export(capsys, tmp_path):
    result = run_cli(capsys, "bench", "--run", tmp_path / "run")
    assert_one_line_error(result, "no finished export", "pocketbert export")


@pytest.mark.parametrize("args, message", [
    (("--threads", "0"), "--threads must be positive"),
    (("--threads", "one"), "--threads must be comma-separated integers"),
    (("--time-cap", "-1"), "--time-cap must be a positive number"),
])
def test_bench_bad_options(capsys, tmp_path, args, message):
    result = run_cli(capsys, "bench", "--run", tmp_path / "run", *args)
    assert_one_line_error(result, message, message.split()[0])


def test_bench_without_run_and_bad_import(capsys, tmp_path):
    assert_one_line_error(run_cli(capsys, "bench"), "name the run to benchmark", "pocketbert bench --run")
    result = run_cli(capsys, "bench", "import", tmp_path / "x.json", "--run", tmp_path / "run", "--device", "iPhone 15")
    assert_one_line_error(result, "--device must be a key like iphone-15-pro", "iphone-15-pro")


def test_distill_without_teacher(capsys, tmp_path):
    result = run_cli(capsys, "train", "distill", "--run", tmp_path / "run")
    assert_one_line_error(result, "no finished teacher", "pocketbert train teacher")


def test_unknown_preset(capsys, tmp_path):
    result = run_cli(capsys, "train", "teacher", "--run", tmp_path / "run", "--preset", "huge")
    assert_one_line_error(result, "no preset 'huge'", "default")


@pytest.mark.slow
def test_debug_env_shows_traceback(tmp_path):
    proc = cli_process("train", "teacher", "--run", tmp_path / "r", "--task", "nope", env={"POCKETBERT_DEBUG": "1"})
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr and "ConfigError" in proc.stderr


def test_recipes_all_load():
    from pocketbert.core.tasks.registry import TASKS
    from pocketbert.core.config.recipe import CONFIG_DIR, load_recipe

    files = sorted(CONFIG_DIR.glob("*.yaml"))
    assert files
    for path in files:
        task = path.stem.split("-", 1)[0]
        assert task in TASKS
        recipe = load_recipe(task, path.stem.split("-", 1)[1])
        for section in ("teacher", "distill", "eval", "export", "bench"):
            assert section in recipe, f"{path.name} lacks '{section}'"
