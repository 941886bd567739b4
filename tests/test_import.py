"""`pocketbert import`: a plain Hugging Face folder (no pocketbert files) becomes a run that export and bench take
unchanged; a checkpoint without the task's head or label names is refused in one line, with nothing written."""

from __future__ import annotations

import json

import pytest
from helpers import QUICK_EXPORT, error_line, run_cli, run_cli_steps

pytestmark = pytest.mark.slow

SST2_LABELS = {0: "negative", 1: "positive"}


def plain_folder(path, tokenizer, cls_name: str, id2label: dict | None):
    """A fine-tuned checkpoint as a user has it: save_pretrained's config, safetensors weights and tokenizer."""
    import torch
    import transformers

    from helpers import TINY_CONFIG

    config = transformers.BertConfig(vocab_size=tokenizer.vocab_size, **TINY_CONFIG,
                                     **({"id2label": id2label} if id2label else {}))
    torch.manual_seed(0)
    getattr(transformers, cls_name)(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def imported_run(tmp_path_factory, wordpiece_tokenizer, shared_data):
    folder = plain_folder(tmp_path_factory.mktemp("checkpoint"), wordpiece_tokenizer,
                          "BertForSequenceClassification", SST2_LABELS)
    assert not [p for p in folder.iterdir() if p.name.startswith("pocketbert")]
    run = tmp_path_factory.mktemp("runs") / "imported"
    run_cli_steps(["import", "--model", folder, "--task", "sentiment", "--run", run, "--dataset", "sst2",
                   "--preset", "tiny", "--data-dir", shared_data],
                  ["export", "--run", run, "--data-dir", shared_data, *QUICK_EXPORT])
    return run


def test_import_writes_a_student_the_export_gates(imported_run):
    manifest = json.loads((imported_run / "student" / "manifest.json").read_text())
    assert manifest["config"]["imported_from"] and manifest["metrics"]["teacher_eval"] is None
    assert manifest["metrics"]["eval"]["n_examples"] == 872  # the whole SST-2 dev set
    assert json.loads((imported_run / "student" / "labels.json").read_text()) == ["negative", "positive"]
    parity = json.loads((imported_run / "export" / "parity.json").read_text())
    assert parity and all(r["passed"] for r in parity)
    assert parity[0]["student_metrics"]["accuracy"] == pytest.approx(manifest["metrics"]["eval"]["accuracy"], abs=0.05)


def test_bench_runs_on_an_imported_student(imported_run, capsys, tiny_reference):
    # a tiny reference: BERT-base itself is timed by end_to_end/test_sentiment_bench_end_to_end.py
    result = run_cli(capsys, "bench", "--run", imported_run, "--reference", tiny_reference)
    assert result.exit_code == 0, result.err
    results = json.loads((imported_run / "bench" / "results.json").read_text())
    assert results["accuracy"]["teacher"] is None and results["accuracy"]["fraction_of_teacher_kept"] is None
    assert any(m["model"] == "student" for m in results["measurements"])


@pytest.mark.parametrize("cls_name, id2label, task, message", [
    ("BertForSequenceClassification", None, "sentiment", "names no labels"),
    ("BertForSequenceClassification", {0: "sad", 1: "happy"}, "sentiment", "the model knows labels"),
    ("BertModel", SST2_LABELS, "sentiment", "has no trained sentiment head"),
    ("BertForSequenceClassification", SST2_LABELS, "qa", "has no trained qa head"),
])
def test_a_checkpoint_that_does_not_fit_is_refused_in_one_line(tmp_path, capsys, wordpiece_tokenizer, shared_data,
                                                               cls_name, id2label, task, message):
    folder = plain_folder(tmp_path / "checkpoint", wordpiece_tokenizer, cls_name, id2label)
    result = run_cli(capsys, "import", "--model", folder, "--task", task, "--run", tmp_path / "run",
                     "--preset", "tiny", "--data-dir", shared_data)
    assert result.exit_code == 2 and message in error_line(result), result.err
    assert not (tmp_path / "run" / "student").exists()
