"""Property-based tests of every file the CLI reads, through the real entry point: whatever a data file, a
recipe override, a task file, a manifest, a results file or a phone file holds, the command either does its
job or ends in exit 2 with one `error:` line, no traceback, and nothing written.

Each data file carries one defect drawn from a list (so no case trains a model); the JSON files are random
documents over the keys their readers look for. Few examples each, derandomized: the suite stays fast and CI
sees the same cases on every run (--hypothesis-seed=random explores further).
"""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.helpers import error_line, run_cli

USAGE_ERROR = 2
FEW = settings(max_examples=12, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _one_line_refusal(result):
    assert result.exit_code == USAGE_ERROR, result.err
    assert "Traceback" not in result.err
    lines = [ln for ln in result.err.splitlines() if ln.strip() and "it/s" not in ln]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.err
    assert error_line(result) == lines[0]


# ---------------------------------------------------------------- data files, each with one defect

texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc"), exclude_characters=',"\t;\\'),
                min_size=1, max_size=20).filter(lambda t: t.strip() == t and t)
ROW_LABELS = ["0", "1", "2"]


def _defective_labels(defect: str, labels: list[str]) -> list[str]:
    if defect == "gap":
        return [*labels, "7"]
    if defect == "mixed":
        return [*labels, "positive"]
    if defect == "one class":
        return ["1"] * len(labels)
    if defect == "leading zero":
        return [*labels, "01"]
    if defect == "huge":
        return [*labels, "1000"]  # one past MAX_CLASSES (a larger typo is refused the same way: see test_label_rule)
    return labels


LABEL_DEFECTS = ["gap", "mixed", "one class", "leading zero", "huge"]
BYTE_DEFECTS = ["not utf-8", "not gzip", "truncated gzip"]
FORMAT_DEFECTS = {"csv": ["duplicate column", "unterminated quote"], "tsv": ["duplicate column"],
                  "jsonl": ["duplicate key", "deep", "label a list"], "txt": []}


def _write_rows(fmt: str, rows: list[tuple[str, str]], defect: str) -> bytes:
    if fmt == "jsonl":
        lines = [json.dumps({"text": t, "label": int(lb) if lb.isdigit() and len(lb) < 10 else lb},
                            ensure_ascii=False) for t, lb in rows]
        if defect == "duplicate key":
            lines.append('{"text": "x", "label": 0, "label": 1}')
        if defect == "deep":
            lines.append("[" * 100_000 + "]" * 100_000)
        if defect == "label a list":
            lines.append('{"text": "x", "label": [0]}')
        return ("\n".join(lines) + "\n").encode()
    sep = {"csv": ",", "tsv": "\t", "txt": ";"}[fmt]
    header = [] if fmt == "txt" else [sep.join(["text", "label", "label"] if defect == "duplicate column"
                                               else ["text", "label"])]
    body = [sep.join([t, lb] + (["0"] if defect == "duplicate column" else [])) for t, lb in rows]
    if defect == "unterminated quote":
        body[0] = '"' + body[0]
    return ("\n".join(header + body) + "\n").encode()


@st.composite
def defective_files(draw):
    fmt = draw(st.sampled_from(sorted(FORMAT_DEFECTS)))
    defect = draw(st.sampled_from(LABEL_DEFECTS + BYTE_DEFECTS + FORMAT_DEFECTS[fmt]))
    rows = draw(st.lists(st.tuples(texts, st.sampled_from(ROW_LABELS)), min_size=4, max_size=10))
    labels = _defective_labels(defect, [lb for _, lb in rows])
    rows = [(f"row {i}" if i >= len(rows) else rows[i][0], lb) for i, lb in enumerate(labels)]
    content = _write_rows(fmt, rows, defect)
    gz = defect in ("not gzip", "truncated gzip") or draw(st.booleans())
    if defect == "not utf-8":
        content = content.replace(b"\n", b"\n\xff\xfe", 1)
    if gz and defect != "not gzip":
        content = gzip.compress(content)
        if defect == "truncated gzip":
            content = content[:-12]
    suffix = {"txt": ".txt"}.get(fmt, f".{fmt}") + (".gz" if gz else "")
    if fmt == "txt" and gz:  # .txt.gz is read as text;label lines too
        suffix = ".txt.gz"
    return suffix, content


@pytest.mark.slow
@FEW
@given(case=defective_files())
def test_a_defective_data_file_is_one_line(capsys, tmp_path_factory, tiny_base, case):
    suffix, content = case
    folder = tmp_path_factory.mktemp("data")
    data = folder / f"d{suffix}"
    data.write_bytes(content)
    run = folder / "run"
    result = run_cli(capsys, "train", "teacher", "--run", run, "--model", tiny_base, "--dataset", data,
                     "--preset", "tiny", "--device", "cpu")
    _one_line_refusal(result)
    assert not run.exists()


# ---------------------------------------------------------------- recipe overrides

yaml_text = st.one_of(st.text(max_size=12), st.sampled_from([".inf", "-.inf", ".nan", "[1", "{a: 1", "", "~",
                                                             "-1", "1e400", "[0.5, -1]", "true", "'x'"]))


@pytest.mark.slow
@FEW
@given(key=st.sampled_from(["teacher.learning_rate", "teacher.focal_alpha", "seed", "teacher.epochs",
                            "bench.time_cap_s", "distill.temperature", "teacher.warmup_ratio", "eval.cross_domain"]),
       value=yaml_text)
def test_any_override_is_checked_before_work(capsys, tmp_path_factory, key, value):
    folder = tmp_path_factory.mktemp("set")
    run = folder / "run"
    # The dataset does not exist: a valid override then fails on it, still as one line, still before any work.
    result = run_cli(capsys, "train", "teacher", "--run", run, "--dataset", folder / "missing.tsv",
                     "--set", f"{key}={value}")
    _one_line_refusal(result)
    assert not run.exists()


# ---------------------------------------------------------------- JSON files the stages read back

json_keys = st.sampled_from(["task", "label_names", "max_length", "architecture", "stage", "config", "metrics",
                             "recipe", "dataset", "eval", "parity", "measurements", "median_ms", "ci_low_ms",
                             "host", "predict", "samples", "load", "device", "compute_units", "os",
                             "xcode_performance_report", "prediction_median_ms", "iterations"])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10**20) | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["sentiment", "qa", "All", "iPhone", "negative", "bert-family", "student", "export"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(json_keys, inner, max_size=5),
    max_leaves=15)


@FEW
@given(doc=json_values)
def test_any_task_file_is_read_or_refused(capsys, tmp_path_factory, teacher_run, doc):
    run = tmp_path_factory.mktemp("task") / "run"
    shutil.copytree(teacher_run / "teacher", run / "teacher")
    (run / "teacher" / "model.safetensors").unlink()  # a task file that reads well then fails on the weights
    (run / "teacher" / "pocketbert_task.json").write_text(json.dumps(doc))
    result = run_cli(capsys, "train", "distill", "--run", run, "--preset", "tiny", "--device", "cpu")
    _one_line_refusal(result)
    assert sorted(p.name for p in run.iterdir()) == ["teacher"]


@FEW
@given(student=json_values, export=json_values)
def test_any_manifest_is_read_or_refused(capsys, tmp_path_factory, teacher_run, student, export):
    run = tmp_path_factory.mktemp("manifest") / "run"
    for stage, doc in (("student", student), ("export", export)):
        (run / stage).mkdir(parents=True)
        (run / stage / "manifest.json").write_text(json.dumps(doc))
    # export/ holds no config.json: manifests that read well still stop bench before it times anything
    result = run_cli(capsys, "bench", "--run", run)
    _one_line_refusal(result)
    assert sorted(p.name for p in run.iterdir()) == ["export", "student"]


# Documents shaped like the files they stand for, beside any JSON at all.
results_docs = json_values | st.fixed_dictionaries({"measurements": st.lists(json_values, max_size=3)},
                                                   optional={"host": json_values})
phone_docs = json_values | st.fixed_dictionaries(
    {"predict": json_values, "device": json_values, "compute_units": st.sampled_from(["All", "CPU_ONLY", "GPU"])},
    optional={"load": json_values, "os": json_values}) | st.fixed_dictionaries(
    {"xcode_performance_report": json_values})


@FEW
@given(before=results_docs, after=results_docs)
@example(before={"measurements": [1]}, after={"measurements": []})
@example(before={"measurements": [{"median_ms": "fast"}]}, after={"measurements": [{"median_ms": 2.0}]})
def test_any_results_file_compares_or_is_refused(capsys, tmp_path_factory, before, after):
    folder = tmp_path_factory.mktemp("results")
    (folder / "a.json").write_text(json.dumps(before))
    (folder / "b.json").write_text(json.dumps(after))
    result = run_cli(capsys, "bench", "compare", folder / "a.json", folder / "b.json")
    if result.exit_code in (0, 1):  # compared: 1 is a regression found, by design
        assert "Traceback" not in result.err
        return
    _one_line_refusal(result)


@FEW
@given(doc=phone_docs)
@example(doc={"predict": 5, "device": "iPhone", "compute_units": "All"})
@example(doc={"predict": {"samples": [2.0]}, "device": ["iPhone"], "compute_units": "All"})
def test_any_phone_file_imports_or_is_refused(capsys, tmp_path_factory, doc):
    folder = tmp_path_factory.mktemp("phone")
    (folder / "phone.json").write_text(json.dumps(doc))
    run = folder / "run"
    run.mkdir()
    result = run_cli(capsys, "bench", "import", folder / "phone.json", "--run", run, "--device", "iphone-15",
                     "--sequence-length", "128")
    if result.exit_code == 0:
        assert "Traceback" not in result.err
        return
    _one_line_refusal(result)
    assert list(run.iterdir()) == []
