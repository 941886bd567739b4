"""`pocketbert inspect` and `pocketbert compare` through the real CLI on tiny runs."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from helpers import error_line, run_cli, run_with_teacher

from pocketbert.inspect import report
from pocketbert.inspect.run_comparison import pareto

pytestmark = pytest.mark.slow
TINY = ["--preset", "tiny", "--device", "cpu"]
INSPECT = ["--examples", "40", "--clusters", "3", "--perplexity", "5"]




@pytest.fixture(scope="module")
def runs(teacher_run, tmp_path_factory, shared_data):
    from pocketbert.cli import main

    root = tmp_path_factory.mktemp("inspect")
    made = {}
    for name, extra in (("distilbert", []), ("bilstm", ["--recipe", "tang", "--set", "augment.n_iter=2"]),
                        ("focal", ["--hard-loss", "focal"]),
                        ("static", ["--recipe", "static", "--cos-weight", "0", "--set", "static.pca_dims=16"])):
        run = run_with_teacher(teacher_run, root / name)
        try:
            main(["train", "distill", "--run", str(run), *TINY, *extra, "--data-dir", str(shared_data)])
        except SystemExit as exc:
            assert exc.code in (0, None)
        made[name] = run
    return made


def test_inspect_writes_the_json_then_a_report_drawn_from_it(capsys, runs, shared_data, tmp_path):
    run = runs["distilbert"]
    result = run_cli(capsys, "inspect", "--run", run, *INSPECT, "--datasets", "sst2,imdb", "--data-dir", shared_data)
    assert result.exit_code == 0, result.err
    folder = run / "inspect"
    data = json.loads((folder / "inspect.json").read_text())
    assert set(data["datasets"]) == {"sst2", "imdb"}
    sst2 = data["datasets"]["sst2"]
    assert sst2["n_examples"] == 40 and len(sst2["models"]["student"]["tsne"]) == 40
    assert len(sst2["models"]["teacher"]["attention_entropy"]) == 2  # the tiny teacher's layers
    for example in sst2["attention_examples"]:
        for layers in example["attention"].values():
            for layer in layers:  # head-averaged rows, rounded to 4 decimals in the JSON
                assert all(abs(sum(row) - 1) < 1e-3 for row in layer)
    markdown = (folder / "inspect.md").read_text()
    html = (folder / "inspect.html").read_text()
    assert "data:image/png;base64," in html and "<table>" in html
    # Every figure in the report's tables is the JSON's, as the report formats it.
    for role in ("teacher", "student"):
        m = sst2["models"][role]
        row = f"| {role} | {m['accuracy']:.4f} | {report.number(m['probe']['accuracy'], 4)} | {m['purity']:.4f} | "
        assert row in markdown
    # And the report needs nothing but the JSON: changed numbers in, changed numbers out.
    sst2["models"]["student"]["purity"] = 0.1234
    sst2["models"]["student"]["accuracy"] = 0.4321
    (tmp_path / "copy").mkdir()
    rendered, plots = report.render(data, tmp_path / "copy")
    assert "| student | 0.4321 |" in rendered and "| 0.1234 |" in rendered
    assert all(path.is_file() for _, path in plots)


def test_inspect_of_a_bilstm_says_it_has_no_attention(capsys, runs, shared_data):
    result = run_cli(capsys, "inspect", "--run", runs["bilstm"], *INSPECT, "--datasets", "sst2",
                     "--data-dir", shared_data)
    assert result.exit_code == 0, result.err
    data = json.loads((runs["bilstm"] / "inspect" / "inspect.json").read_text())
    assert data["datasets"]["sst2"]["models"]["student"]["attention_entropy"] is None
    assert all("student" not in e["attention"] for e in data["datasets"]["sst2"]["attention_examples"])
    assert "The student (BiLSTM) has no attention" in (runs["bilstm"] / "inspect" / "inspect.md").read_text()


def test_inspect_of_a_static_student_shows_its_sentence_means(capsys, runs, shared_data):
    result = run_cli(capsys, "inspect", "--run", runs["static"], *INSPECT, "--datasets", "sst2",
                     "--data-dir", shared_data)
    assert result.exit_code == 0, result.err
    data = json.loads((runs["static"] / "inspect" / "inspect.json").read_text())
    student = data["datasets"]["sst2"]["models"]["student"]
    assert student["attention_entropy"] is None and len(student["tsne"]) == 40
    assert "mean of the word pieces' static vectors" in (runs["static"] / "inspect" / "inspect.md").read_text()


def test_inspect_puts_a_narrow_student_beside_its_teacher_through_the_layer_it_was_cut_from(capsys, teacher_run,
                                                                                            tmp_path, shared_data):
    from pocketbert.cli import main

    run = run_with_teacher(teacher_run, tmp_path / "narrow")
    try:  # 1 layer x 16 (one head) cut from the tiny teacher's 2 layers x 32 (two heads)
        main(["train", "distill", "--run", str(run), *TINY, "--recipe", "layerwise", "--layers", "1",
              "--hidden-size", "16", "--intermediate-size", "32", "--data-dir", str(shared_data)])
    except SystemExit as exc:
        assert exc.code in (0, None)
    result = run_cli(capsys, "inspect", "--run", run, *INSPECT, "--datasets", "sst2", "--data-dir", shared_data)
    assert result.exit_code == 0, result.err
    data = json.loads((run / "inspect" / "inspect.json").read_text())
    assert (data["models"]["teacher"]["hidden_size"], data["models"]["student"]["hidden_size"]) == (32, 16)
    assert data["layer_map"] == [1]
    sst2 = data["datasets"]["sst2"]
    assert len(sst2["models"]["student"]["attention_entropy"]) == 1
    assert len(sst2["models"]["teacher"]["attention_entropy"]) == 2
    (mapped,) = sst2["mapped_attention"]
    assert (mapped["student_layer"], mapped["teacher_layer"]) == (1, 2) and 0.0 <= mapped["distance"] <= 1.0
    assert 0.0 <= sst2["embedding_cka"] <= 1.0
    for example in sst2["attention_examples"]:
        assert len(example["attention"]["student"]) == 1 and len(example["attention"]["teacher"]) == 2
        for layer in example["attention"]["student"]:
            assert all(abs(sum(row) - 1) < 1e-3 for row in layer)
    markdown = (run / "inspect" / "inspect.md").read_text()
    assert f"| 1 | 2 | {mapped['distance']:.3f} |" in markdown
    assert f"sentence embeddings: {sst2['embedding_cka']:.3f}" in markdown
    assert "1-layer, 16 wide" in markdown and "2-layer, 32 wide" in markdown


def test_inspect_refuses_too_few_examples_for_the_clusters(capsys, runs, shared_data):
    result = run_cli(capsys, "inspect", "--run", runs["focal"], "--examples", "10", "--clusters", "9",
                     "--data-dir", shared_data)
    assert result.exit_code == 2 and "too few for 9 clusters" in error_line(result)
    assert not (runs["focal"] / "inspect").exists()


def bench_results(run, student_ms, teacher_ms, cpu="Test CPU"):
    """A bench/results.json holding the fields compare reads, with latencies this test chooses."""
    def measured(model, ms):
        return {"model": model, "runtime": "onnxruntime", "model_format": "onnx", "precision": "int8", "threads": 1,
                "sweep": "headline", "median_ms": ms, "ci_low_ms": ms * 0.98, "ci_high_ms": ms * 1.02}

    (run / "bench").mkdir()
    (run / "bench" / "results.json").write_text(json.dumps({
        "host": {"cpu": cpu}, "measurements": [measured("student", student_ms), measured("teacher", teacher_ms)],
        "models": {"student": {"files": {"onnx-int8": {"size_bytes": int(student_ms * 1e6)}}},
                   "teacher": {"files": {"onnx-int8": {"size_bytes": 9_000_000}}}}}))


def test_compare_three_runs_reads_every_number_from_their_files(capsys, runs, tmp_path):
    latencies = {"distilbert": 2.0, "bilstm": 0.5, "focal": 2.5}
    for name, ms in latencies.items():
        bench_results(runs[name], ms, 4.0)
    out = tmp_path / "cmp"
    result = run_cli(capsys, "compare", *(runs[name] for name in latencies), "--out", out)
    assert result.exit_code == 0, result.err
    data = json.loads((out / "compare.json").read_text())
    rows = {r["name"]: r for r in data["rows"]}
    assert set(rows) == {"distilbert", "bilstm", "focal", "teacher of distilbert"}  # one teacher, copied thrice
    for name, ms in latencies.items():
        student = json.loads((runs[name] / "student" / "manifest.json").read_text())["metrics"]
        assert rows[name]["latency_ms"] == ms and rows[name]["size_bytes"] == int(ms * 1e6)
        assert rows[name]["accuracy"] == student["eval"]["accuracy"]
        assert rows[name]["cross_domain"] == {d: p["student"]["accuracy"] for d, p in student["cross_domain"].items()}
        assert rows[name]["training_seconds"] == json.loads(
            (runs[name] / "student" / "manifest.json").read_text())["wall_time_s"]
    assert rows["bilstm"]["kind"] == "student (tang)"
    assert data["pareto"] == pareto(data["rows"])
    table = (out / "compare.md").read_text()
    for name, ms in latencies.items():
        assert re.search(rf"\| {name} \| .* \| {ms:.2f} \|", table)
    assert (out / "compare.png").stat().st_size > 0


def test_pareto_keeps_only_rows_nothing_beats():
    rows = [{"name": n, "latency_ms": ms, "accuracy": acc} for n, ms, acc in
            (("fast", 1.0, 0.80), ("slow-better", 5.0, 0.90), ("dominated", 6.0, 0.85), ("tie", 1.0, 0.80),
             ("unbenched", None, 0.99))]
    assert pareto(rows) == ["fast", "slow-better", "tie"]


def test_compare_needs_two_runs(capsys, runs, tmp_path):
    result = run_cli(capsys, "compare", runs["distilbert"], "--out", tmp_path / "one")
    assert result.exit_code == 2 and "at least 2 finished runs" in error_line(result)


def test_compare_refuses_runs_of_different_datasets(capsys, runs, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(runs["focal"], other)
    manifest = json.loads((other / "student" / "manifest.json").read_text())
    manifest["config"]["dataset"] = "emotion"
    (other / "student" / "manifest.json").write_text(json.dumps(manifest))
    result = run_cli(capsys, "compare", runs["distilbert"], other, "--out", tmp_path / "mixed")
    assert result.exit_code == 2 and "not comparable" in error_line(result)
    assert not (tmp_path / "mixed").exists()
