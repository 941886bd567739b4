"""Files that are damaged, cut short or edited by hand end in one `error:` line naming the file, exit 2, and
nothing written: weights, config.json's labels, pocketbert_task.json, manifest.json, data files (gzip, UTF-8,
JSON nesting, duplicate keys and columns, CSV quotes, SQuAD shapes) and bench's results and phone files."""

from __future__ import annotations

import gzip
import json
import os
import shutil

import pytest

from tests.helpers import error_line, run_cli

USAGE_ERROR = 2
DEEP = 200_000  # levels of JSON nesting: far past Python's recursion limit


def _refused(result, *words):
    line = error_line(result)
    assert result.exit_code == USAGE_ERROR, result.err
    assert line.startswith("error:") and all(w in line for w in words), line
    assert "Traceback" not in result.err
    assert len([ln for ln in result.err.splitlines() if ln.strip() and "it/s" not in ln]) == 1, result.err


# ---------------------------------------------------------------- stage folders


def _copy_run(teacher_run, tmp_path, as_student: bool = False):
    run = tmp_path / "run"
    shutil.copytree(teacher_run / "teacher", run / "teacher")
    if as_student:  # a teacher folder is a complete stage model: export reads it as it reads a student
        shutil.copytree(run / "teacher", run / "student")
    return run


def _distill(capsys, run):
    return run_cli(capsys, "train", "distill", "--run", run, "--preset", "tiny", "--device", "cpu")


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncated", "random"])
def test_damaged_safetensors(capsys, tmp_path, teacher_run, damage):
    run = _copy_run(teacher_run, tmp_path)
    weights = run / "teacher" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200] if damage == "truncated" else os.urandom(4096))
    _refused(_distill(capsys, run), "damaged")
    assert not (run / "student").exists()


def test_damaged_pytorch_bin(capsys, tmp_path, teacher_run):
    import torch
    from safetensors.torch import load_file

    run = _copy_run(teacher_run, tmp_path)
    weights = run / "teacher" / "model.safetensors"
    torch.save(load_file(weights), run / "teacher" / "pytorch_model.bin")
    weights.unlink()
    binary = run / "teacher" / "pytorch_model.bin"
    binary.write_bytes(binary.read_bytes()[:500])
    result = _distill(capsys, run)
    _refused(result, "damaged")
    assert "head that does not fit" not in result.err
    assert not (run / "student").exists()


def test_import_of_a_checkpoint_whose_id2label_disagrees_with_its_head(capsys, tmp_path, teacher_run, shared_data):
    source = tmp_path / "checkpoint"
    shutil.copytree(teacher_run / "teacher", source)
    config = json.loads((source / "config.json").read_text())
    config["id2label"] = {"0": "negative", "1": "positive", "2": "neutral"}
    config["label2id"] = {"negative": 0, "positive": 1, "neutral": 2}
    (source / "config.json").write_text(json.dumps(config))
    run = tmp_path / "run"
    _refused(run_cli(capsys, "import", "--run", run, "--model", source, "--dataset", "sst2", "--data-dir",
                     shared_data), "id2label")
    assert not run.exists()


TASK_DAMAGE = {
    "not JSON": lambda info: "{not json",
    "no task": lambda info: json.dumps({k: v for k, v in info.items() if k != "task"}),
    "no labels": lambda info: json.dumps({k: v for k, v in info.items() if k != "label_names"}),
    "labels not a list": lambda info: json.dumps({**info, "label_names": "negative,positive"}),
    "a list": lambda info: json.dumps([info]),
    "deep": lambda info: "[" * DEEP + "]" * DEEP,
    "duplicate key": lambda info: json.dumps(info)[:-1] + ', "task": "qa"}',
}


@pytest.mark.parametrize("damage", sorted(TASK_DAMAGE))
def test_damaged_task_file(capsys, tmp_path, teacher_run, damage):
    run = _copy_run(teacher_run, tmp_path)
    path = run / "teacher" / "pocketbert_task.json"
    path.write_text(TASK_DAMAGE[damage](json.loads(path.read_text())))
    _refused(_distill(capsys, run), "pocketbert_task.json")
    assert not (run / "student").exists()


MANIFEST_DAMAGE = {
    "not JSON": lambda m: '{"stage": "teacher",',
    "no config": lambda m: json.dumps({k: v for k, v in m.items() if k != "config"}),
    "no recipe": lambda m: json.dumps({**m, "config": {k: v for k, v in m["config"].items() if k != "recipe"}}),
    "recipe a string": lambda m: json.dumps({**m, "config": {**m["config"], "recipe": "sst2"}}),
    "deep": lambda m: '{"a": ' * DEEP + "1" + "}" * DEEP,
    "not UTF-8": lambda m: json.dumps(m).encode("utf-16"),
}


@pytest.mark.parametrize("damage", sorted(MANIFEST_DAMAGE))
def test_damaged_manifest_stops_export_at_once(capsys, tmp_path, teacher_run, shared_data, damage):
    run = _copy_run(teacher_run, tmp_path, as_student=True)
    path = run / "student" / "manifest.json"
    content = MANIFEST_DAMAGE[damage](json.loads(path.read_text()))
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    _refused(run_cli(capsys, "export", "--run", run, "--data-dir", shared_data), "manifest.json")
    assert not (run / "export").exists()


@pytest.mark.parametrize("command", [["export", "android"], ["export", "ios"], ["bench"]])
def test_damaged_export_manifest_stops_app_folders_and_bench(capsys, tmp_path, teacher_run, command):
    run = _copy_run(teacher_run, tmp_path, as_student=True)
    (run / "export").mkdir()
    manifest = json.loads((run / "student" / "manifest.json").read_text())
    (run / "export" / "manifest.json").write_text(json.dumps({**manifest, "stage": "export"}))  # no parity, no task
    _refused(run_cli(capsys, *command, "--run", run), "manifest.json")
    assert sorted(p.name for p in run.iterdir()) == ["export", "student", "teacher"]


# ---------------------------------------------------------------- data files


def _train(capsys, tmp_path, tiny_base, data):
    run = tmp_path / "run"
    result = run_cli(capsys, "train", "teacher", "--run", run, "--model", tiny_base, "--dataset", data,
                     "--preset", "tiny", "--device", "cpu")
    assert not run.exists()
    return result


ROWS = "".join(json.dumps({"text": f"row {i}", "label": i % 2}) + "\n" for i in range(8))

DATA_DAMAGE = {  # file name -> (bytes, words of the error)
    "not-gzip.jsonl.gz": (ROWS.encode(), ["not a complete gzip file"]),
    "truncated.jsonl.gz": (gzip.compress(ROWS.encode() * 50)[:-30], ["not a complete gzip file"]),
    "deep.jsonl": (("[" * DEEP + "]" * DEEP + "\n").encode(), ["nested too deeply"]),
    "duplicate-key.jsonl": (b'{"text": "a", "label": 0, "label": 1}\n' + ROWS.encode(), ["appears twice"]),
    "duplicate-column.csv": (b"text,label,label\na,0,1\nb,1,0\n", ["appears twice"]),
    "unterminated.csv": (b'text,label\n"first review,0\nsecond,1\nthird,0\n', ["quote"]),
    "merged.csv": (b'text,label\n"first review,0\nsecond",1\nthird,0\nfourth,1\n', ["reads as a row"]),
}


@pytest.mark.parametrize("name", sorted(DATA_DAMAGE))
def test_damaged_data_file(capsys, tmp_path, tiny_base, name):
    content, words = DATA_DAMAGE[name]
    data = tmp_path / name
    data.write_bytes(content)
    _refused(_train(capsys, tmp_path, tiny_base, data), str(data), *words)


@pytest.mark.parametrize("qas", [["what?"], "what?", [1]])
def test_squad_file_whose_questions_are_not_objects(capsys, tmp_path, tiny_base, qas):
    data = tmp_path / "squad.json"
    data.write_text(json.dumps({"data": [{"paragraphs": [{"context": "some context", "qas": qas}]}]}))
    run = tmp_path / "run"
    _refused(run_cli(capsys, "train", "teacher", "--run", run, "--model", tiny_base, "--dataset", data,
                     "--task", "qa", "--preset", "tiny", "--device", "cpu"), str(data), "SQuAD")
    assert not run.exists()


def _labelled(*labels) -> str:
    """JSON Lines whose row i (line i + 1) carries labels[i], then enough clean rows of 'pos' and 'neg'."""
    rows = [{"text": f"review {i}", "label": label} for i, label in enumerate(labels)]
    rows += [{"text": f"more {i}", "label": ("pos", "neg")[i % 2]} for i in range(8)]
    return "".join(json.dumps(row) + "\n" for row in rows)


LABEL_DAMAGE = {  # name -> (file text, words of the error): each used to become a class of its own
    "byte-order mark": (_labelled("pos", "\ufeffpos"), [":2:", "U+FEFF", "invisible"]),
    "zero-width space": (_labelled("neg", "neg\u200b"), [":2:", "U+200B", "invisible"]),
    "control character": (_labelled("po\x07s"), [":1:", "U+0007", "invisible"]),
    "case": (_labelled("pos", "neg", "Pos"), ["jsonl:3:", "'Pos' differs from 'pos'", "jsonl:1)", "only by case"]),
    # fullwidth letters in row 1, then the clean rows' 'pos' in row 2
    "unicode form": (_labelled("ｐｏｓ"), ["jsonl:2:", "'pos' differs from 'ｐｏｓ'", "Unicode form"]),
}


@pytest.mark.parametrize("name", sorted(LABEL_DAMAGE))
def test_labels_that_look_like_another_are_refused_with_the_row(capsys, tmp_path, tiny_base, name):
    text, words = LABEL_DAMAGE[name]
    data = tmp_path / "labels.jsonl"
    data.write_text(text)
    _refused(_train(capsys, tmp_path, tiny_base, data), str(data), *words)


def test_labels_option_that_differ_by_case_or_hide_a_character_are_refused(capsys, tmp_path, tiny_base):
    data = tmp_path / "labels.jsonl"
    data.write_text(_labelled())
    for labels, words in (("pos,neg,POS", ["--labels", "'POS' differs from 'pos'"]), ("pos,neg\u200b", ["U+200B"])):
        run = tmp_path / "run"
        _refused(run_cli(capsys, "train", "teacher", "--run", run, "--model", tiny_base, "--dataset", data,
                         "--labels", labels, "--preset", "tiny", "--device", "cpu"), *words)
        assert not run.exists()


@pytest.mark.parametrize("start", [-6, 3.5, "4", True, None])
def test_squad_answer_start_that_is_not_a_position_is_refused(capsys, tmp_path, tiny_base, start):
    """-6 was accepted: context[-6:-6 + 5] happened to read the answer."""
    context = "pocketbert ships small models"
    answer = {"text": "small", "answer_start": start}
    data = tmp_path / "squad.json"
    data.write_text(json.dumps({"data": [{"paragraphs": [{"context": context + " small", "qas": [
        {"id": "q7", "question": "what models?", "answers": [answer]}]}]}]}))
    run = tmp_path / "run"
    _refused(run_cli(capsys, "train", "teacher", "--run", run, "--model", tiny_base, "--dataset", data,
                     "--task", "qa", "--preset", "tiny", "--device", "cpu"), "question q7", "answer_start",
             "whole number >= 0")
    assert not run.exists()


# ---------------------------------------------------------------- bench's files


RESULTS_DAMAGE = {
    "measurement a number": {"measurements": [1]},
    "median a string": {"measurements": [{"median_ms": "fast"}]},
    "median missing": {"measurements": [{"model": "student"}]},
    "measurements an object": {"measurements": {"a": 1}},
    "host a list": {"measurements": [], "host": []},
}


@pytest.mark.parametrize("damage", sorted(RESULTS_DAMAGE))
def test_bench_compare_wrong_types_exit_2_not_1(capsys, tmp_path, damage):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"measurements": [{"model": "student", "median_ms": 4.0}]}))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(RESULTS_DAMAGE[damage]))
    _refused(run_cli(capsys, "bench", "compare", good, bad), str(bad))
    _refused(run_cli(capsys, "bench", "compare", bad, good), str(bad))


def test_bench_compare_deep_json(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[" * DEEP + "]" * DEEP)
    _refused(run_cli(capsys, "bench", "compare", bad, bad), "nested too deeply")


@pytest.mark.parametrize("payload", [
    {"predict": 5, "device": "iPhone", "compute_units": "All"},
    {"predict": {"samples": [True, 2.0]}, "device": "iPhone", "compute_units": "All"},
    {"predict": {"samples": [2.0]}, "device": ["iPhone"], "compute_units": "All"},
    {"xcode_performance_report": "fast"},
    {"xcode_performance_report": {"prediction_median_ms": 3, "device": "iPhone", "compute_units": "All",
                                  "os": {"name": "iOS"}}},
])
def test_bench_import_wrong_types(capsys, tmp_path, payload):
    phone = tmp_path / "phone.json"
    phone.write_text(json.dumps(payload))
    run = tmp_path / "run"
    run.mkdir()
    _refused(run_cli(capsys, "bench", "import", phone, "--run", run, "--device", "iphone-15",
                     "--sequence-length", "128"), str(phone))
    assert list(run.iterdir()) == []
