"""The layer-wise recipe through the real CLI on the tiny teacher (2 layers x 32, heads of 16): a narrow student
that reloads and exports through every parity gate, a random start of the same shape, transfer data and
augmentation, its ablation, and the shapes refused in one line."""

from __future__ import annotations

import json

import pytest
from helpers import error_line, run_cli, run_with_teacher

from pocketbert.core.run.run_files import ABLATION_DIR, ABLATION_RESULTS

pytestmark = pytest.mark.slow
TINY = ["--preset", "tiny", "--device", "cpu"]
NARROW = ["--recipe", "layerwise", "--layers", "1", "--hidden-size", "16", "--intermediate-size", "32"]


def manifest(path):
    return json.loads((path / "manifest.json").read_text())


def test_a_narrow_student_trains_reloads_and_passes_every_export_gate(capsys, teacher_run, tmp_path, shared_data):
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForSequenceClassification

    run = run_with_teacher(teacher_run, tmp_path / "run")
    result = run_cli(capsys, "train", "distill", "--run", run, *TINY, *NARROW, "--data-dir", shared_data)
    assert result.exit_code == 0, result.err
    student = manifest(run / "student")
    assert student["config"]["recipe_name"] == "layerwise"
    assert student["config"]["shape"] == {"layers": 1, "hidden_size": 16, "heads": 1, "intermediate_size": 32}
    assert student["config"]["layer_map"] == [1]  # ending on the teacher's last layer
    assert {"hidden", "embedding", "attention", "relation", "kl", "ce"} <= {
        k.removeprefix("final_") for k in student["metrics"]["train"]}
    config = AutoConfig.from_pretrained(run / "student")
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads, config.intermediate_size) == \
        (1, 16, 1, 32)
    saved = load_file(run / "student" / "model.safetensors")
    assert not any("projection" in k for k in saved)  # training-only parts stay out of the student
    AutoModelForSequenceClassification.from_pretrained(run / "student")
    info = json.loads((run / "student" / "pocketbert_task.json").read_text())
    assert info["cut"]["layer_map"] == [1] and len(info["cut"]["hidden"]) == 16
    exported = run_cli(capsys, "export", "--run", run, "--data-dir", shared_data)
    assert exported.exit_code == 0, exported.err
    parity = json.loads((run / "export" / "parity.json").read_text())
    assert parity and all(p["passed"] for p in parity)
    assert {"model.onnx", "model.int8.onnx", "model.ort"} <= {p["artifact"] for p in parity}


def test_a_random_start_of_the_same_shape_learns_through_projections(capsys, teacher_run, tmp_path, shared_data):
    from safetensors.torch import load_file

    run = run_with_teacher(teacher_run, tmp_path / "run")
    result = run_cli(capsys, "train", "distill", "--run", run, *TINY, *NARROW, "--student-init", "random",
                     "--max-train-examples", "16", "--data-dir", shared_data)
    assert result.exit_code == 0, result.err
    student = manifest(run / "student")
    assert student["config"]["recipe"]["student"]["init"] == "random"
    assert student["config"]["hidden_compared_through"] == "learned projection"
    teacher = load_file(teacher_run / "teacher" / "model.safetensors")
    saved = load_file(run / "student" / "model.safetensors")
    key = next(k for k in saved if k.endswith("word_embeddings.weight"))
    channels = json.loads((run / "student" / "pocketbert_task.json").read_text())["cut"]["hidden"]
    rows_like_the_teachers = (saved[key] == teacher[key][:, channels]).all(dim=1).float().mean().item()
    assert rows_like_the_teachers < 0.01  # only the all-zero [PAD] row, if any
    assert not any("projection" in k for k in saved)


def test_transfer_data_and_augmentation_feed_the_layerwise_recipe(capsys, teacher_run, tmp_path, shared_data):
    run = run_with_teacher(teacher_run, tmp_path / "run")
    result = run_cli(capsys, "train", "distill", "--run", run, *TINY, *NARROW, "--max-train-examples", "16",
                     "--transfer-data", "imdb", "--set", "transfer.max_examples=16", "--augment",
                     "--set", "augment.n_iter=2", "--data-dir", shared_data)
    assert result.exit_code == 0, result.err
    metrics = manifest(run / "student")["metrics"]
    assert metrics["transfer_data"]["rows"] > 0 and metrics["augmentation"]["augmented"] > 0
    assert metrics["train"]["train_examples"] > 16 + metrics["transfer_data"]["rows"]


def test_the_ablation_takes_the_layerwise_losses_and_skips_what_changes_nothing(capsys, teacher_run, tmp_path,
                                                                               shared_data):
    run = run_with_teacher(teacher_run, tmp_path / "run")
    result = run_cli(capsys, "train", "ablate", "--run", run, *TINY, *NARROW[:2], "--max-train-examples", "16",
                     "--set", "student.hidden_size=16", "--set", "student.layers=1",
                     "--set", "layerwise.relation_weight=0", "--variants", "no_attention,no_relation",
                     "--data-dir", shared_data)
    assert result.exit_code == 0, result.err
    table = json.loads((run / ABLATION_DIR / ABLATION_RESULTS).read_text())
    assert [r["variant"] for r in table["rows"]] == ["full", "no_attention"]  # relation already weighs 0
    assert table["recipe_name"] == "layerwise"
    off = manifest(run / ABLATION_DIR / "no_attention" / "student")["config"]["recipe"]["layerwise"]
    assert off["attention_weight"] == 0.0 and off["hidden_weight"] > 0
    assert "Ablation of the layer-wise recipe" in result.out


@pytest.mark.parametrize("args, fragments", [
    ([*NARROW[:2], "--hidden-size", "24"], ["student.hidden_size 24", "16-wide heads"]),
    ([*NARROW[:2], "--heads", "4"], ["student.heads 4", "teacher's 2"]),
    ([*NARROW[:2], "--layers", "2", "--layer-map", "0"], ["layer_map names 1", "student of 2"]),
    ([*NARROW, "--set", "layerwise.relation_heads=3"], ["relation_heads 3", "does not divide"]),
    (["--hidden-size", "16"], ["distilbert recipe keeps the teacher's width", "--recipe layerwise"]),
])
def test_a_shape_the_teacher_cannot_give_is_refused_before_any_work(capsys, teacher_run, tmp_path, shared_data,
                                                                    args, fragments):
    run = run_with_teacher(teacher_run, tmp_path / "run")
    result = run_cli(capsys, "train", "distill", "--run", run, *TINY, *args, "--data-dir", shared_data)
    assert result.exit_code == 2
    line = error_line(result)
    assert line.startswith("error:") and all(f in line for f in fragments), line
    assert not (run / "student").exists() and not (run / "checkpoints").exists()
