"""The ladder's table and plot on a small ladder.json of hand-made rows: what each rung kept of the teacher in
domain and on each cross-domain set side by side, and what it trained on (labelled rows + transfer rows)."""

from __future__ import annotations

import re

import pytest

from pocketbert.ladder.table import IN_DOMAIN, kept_across, plot_ladder, render_table

TEACHER = {"name": "teacher of sst2-transfer", "accuracy": 0.8819, "cross_domain": {"imdb": 0.7595},
           "latency_ms": 7.68, "size_bytes": 23.1e6, "parameters": 22.7e6}
NO_COST = {"latency_interval_ms": None, "speedup_vs_reference": 1.0, "size_vs_reference": 1.0,
           "parity": {"models": 14, "passed": 14, "worst_agreement": 0.99}}


def rung(name, accuracy, imdb, ms, mb, train, labelled=None, transfer=None):
    row = {"rung": name, "label": name, "ship": True, "accuracy": accuracy, "kept": accuracy / TEACHER["accuracy"],
           "cross_domain": {"imdb": imdb}, "latency_ms": ms, "size_bytes": mb * 1e6, "parameters": mb * 1e6,
           "train_examples": train, "labelled_examples": labelled, "transfer_examples": transfer, **NO_COST}
    return {**row, "kept_cross_domain": kept_across(row, TEACHER)}


# the 2 x 192 rung with the transfer preset's 20,000 IMDb rows; a BiLSTM whose rewrites come on top; a
# rung without transfer data
ROWS = [rung("narrow-2x192", 0.8635, 0.7216, 0.93, 7.0, 87_349, 67_349, 20_000),
        rung("bilstm", 0.8222, 0.6810, 0.66, 12.5, 33_636, 8_000, 20_000),
        rung("static", 0.8039, 0.6960, 0.02, 8.0, 8_000)]
RESULT = {
    "ladder": {"description": "small"}, "primary_metric": "accuracy", "dataset": "sst2",
    "setting": {"runtime": "onnxruntime", "model_format": "onnx", "precision": "int8", "threads": 1},
    "views": [IN_DOMAIN, "imdb"], "within_points": 1.0, "reference_rung": "narrow-2x192",
    "run_transfer": {"transfer.data": ["imdb"], "transfer.max_examples": 20_000, "transfer.long_text": "cut"},
    "run_transfer_source": "runs/sst2-transfer/student/manifest.json", "teacher": TEACHER, "rungs": ROWS,
    "cheapest": {cost: {IN_DOMAIN: "narrow-2x192", "imdb": None} for cost in ("latency_ms", "size_bytes")},
    "hosts": ["x86_64"], "comparable_latency": True,
}


def cells(table: str, first: str) -> list[str]:
    line = next(line for line in table.splitlines() if line.startswith(f"| {first} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_the_table_puts_kept_in_domain_and_across_domains_side_by_side_with_what_each_rung_trained_on():
    table = render_table(RESULT)
    head = cells(table, "rung")
    assert head[2:6] == ["accuracy in domain", "kept", "on imdb", "kept on imdb"]
    narrow, bilstm, static = (dict(zip(head, cells(table, r["rung"]))) for r in ROWS)
    # 0.8635 / 0.8819 and 0.7216 / 0.7595: the bar of 95 % of the teacher on IMDb, met
    assert (narrow["kept"], narrow["on imdb"], narrow["kept on imdb"]) == ("97.9 %", "0.7216", "95.0 %")
    assert (static["kept"], static["kept on imdb"]) == ("91.2 %", "91.6 %")
    assert narrow["trained on"] == "67,349 + 20,000 unlabelled"
    assert bilstm["trained on"] == "8,000 + 20,000 unlabelled + 5,636 rewrites"
    assert static["trained on"] == "8,000"
    teacher = dict(zip(head, cells(table, "teacher")))
    assert (teacher["kept"], teacher["on imdb"], teacher["kept on imdb"]) == ("100 %", "0.7595", "100 %")
    assert re.search(r"transfer data \(imdb, at most 20,000 rows; from runs/sst2-transfer/student/manifest\.json\)",
                     table)


def test_without_inherited_transfer_data_the_table_says_nothing_of_it():
    table = render_table({**RESULT, "run_transfer": {}})
    assert "transfer data" not in table


@pytest.mark.slow
def test_the_plot_reads_each_panels_accuracy_as_the_share_of_the_teacher_kept(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pocketbert.ladder.table import kept_axis

    fig, ax = plt.subplots()
    ax.set_ylim(0.6, 0.8)
    axis = kept_axis(ax, TEACHER["cross_domain"]["imdb"])
    fig.canvas.draw()
    low, high = axis.get_ylim()
    plt.close(fig)
    assert abs(low - 100 * 0.6 / 0.7595) < 1e-6 and abs(high - 100 * 0.8 / 0.7595) < 1e-6
    assert axis.get_ylabel() == "kept of the teacher (%)"
    assert plot_ladder(RESULT, tmp_path / "ladder.png").stat().st_size > 10_000


def test_a_rung_exported_with_a_fitted_vocabulary_shows_its_file_with_the_full_one_beside_it():
    from pocketbert.core.run.stage_records import ExportRecord
    from pocketbert.ladder.table import full_vocabulary_size

    manifest = {"stage": "export", "config": {"task": "sentiment", "max_length": 128, "variants": {
                    "onnx-int8": {"file": "model.int8.onnx", "runtime": "onnxruntime", "precision": "int8"}}},
                "metrics": {"parity": {},
                            "vocabulary": {"full_vocabulary_sizes_bytes": {"model.int8.onnx": 7_000_000}}}}
    assert full_vocabulary_size(ExportRecord.model_validate(manifest)) == 7_000_000
    manifest["metrics"]["vocabulary"] = None  # exported with the full vocabulary
    assert full_vocabulary_size(ExportRecord.model_validate(manifest)) is None
    assert full_vocabulary_size(None) is None  # not exported (a control)

    fitted = {**ROWS[0], "size_bytes": 3.1e6, "size_full_vocabulary_bytes": 7.0e6}
    table = render_table({**RESULT, "rungs": [fitted, *ROWS[1:]]})
    head = cells(table, "rung")
    row = dict(zip(head, cells(table, "narrow-2x192")))
    assert (row["file (MB)"], row["with full vocabulary (MB)"]) == ("3.1", "7.0")
    assert dict(zip(head, cells(table, "static")))["with full vocabulary (MB)"] == "8.0"  # full: the same file
