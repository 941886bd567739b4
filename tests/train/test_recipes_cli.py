"""The training recipes through the real CLI on a tiny teacher: Tang et al., ablation, masked-LM, cross-domain,
the training benchmark, and the errors a user can cause (DDP: test_distributed.py)."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers import error_line, linked_copy, run_cli, run_with_teacher

from pocketbert.core.run.run_files import (ABLATION_DIR, ABLATION_PLOT, ABLATION_RESULTS, ABLATION_TABLE,
                                           TRAIN_BENCH_RESULTS)

pytestmark = pytest.mark.slow
TINY = ["--preset", "tiny"]


def manifest(path):
    return json.loads((path / "manifest.json").read_text())


def test_tang_recipe_trains_a_bilstm_that_exports(capsys, teacher_run, tmp_path, shared_data, monkeypatch):
    from pocketbert.core.students.stage_folder import load_stage_model

    run = run_with_teacher(teacher_run, tmp_path / "run")
    working = tmp_path / "working"  # the export writes only into the run: nothing here afterwards
    working.mkdir()
    monkeypatch.chdir(working)
    result = run_cli(capsys, "train", "distill", "--run", run, *TINY, "--recipe", "tang", "--set", "augment.n_iter=3",
                     "--alpha", "0.5", "--data-dir", shared_data)
    assert result.exit_code == 0, result.err
    metrics = manifest(run / "student")["metrics"]
    assert metrics["transfer_set"]["augmented"] > 0
    assert set(metrics["train"]) >= {"final_mse", "final_ce"}  # alpha 0.5: both losses
    model, _, task, info = load_stage_model(run / "student")
    assert info["architecture"] == "bilstm" and type(model).__name__ == "BiLSTMClassifier"
    exported = run_cli(capsys, "export", "--run", run, "--data-dir", shared_data)
    assert exported.exit_code == 0, exported.err
    parity = json.loads((run / "export" / "parity.json").read_text())
    # 6 token-id ONNX Runtime models, 3 text-in ones, 3 Core ML (the tiny preset's fp16, 6bit, enumerated); no
    # ExecuTorch program (torch.export cannot keep a BiLSTM's length dynamic)
    assert len(parity) == 12 and all(p["passed"] for p in parity)
    assert list(working.iterdir()) == []  # ONNX Runtime's shape inference leaves its debugging copies elsewhere
    assert {p["runtime"] for p in parity if p["artifact"].startswith("model.text.")} == {"onnxruntime + extensions"}


def test_static_recipe_trains_a_table_student_that_exports_and_benches(capsys, teacher_run, tmp_path, shared_data,
                                                                       tiny_reference):
    from pocketbert.core.students.stage_folder import load_stage_model

    run = run_with_teacher(teacher_run, tmp_path / "run")
    result = run_cli(capsys, "train", "distill", "--run", run, *TINY, "--recipe", "static", "--cos-weight", "0",
                     "--set", "static.pca_dims=16", "--data-dir", shared_data)
    assert result.exit_code == 0, result.err
    metrics = manifest(run / "student")["metrics"]
    model, tokenizer, _, info = load_stage_model(run / "student")
    assert info["architecture"] == "static" and type(model).__name__ == "StaticEmbeddingClassifier"
    assert metrics["static_table"]["rows"] == len(tokenizer) == model.embeddings.weight.shape[0]
    assert set(metrics["train"]) >= {"final_kl", "final_ce"}
    exported = run_cli(capsys, "export", "--run", run, "--data-dir", shared_data)
    assert exported.exit_code == 0, exported.err
    parity = json.loads((run / "export" / "parity.json").read_text())
    # 6 token-id ONNX Runtime models, 3 text-in ones, 3 ExecuTorch programs, 3 Core ML (the tiny preset's fp16,
    # 6bit, enumerated) and the 2 Core AI programs (fp16, 6bit): every variant the BERT-family student gets
    assert len(parity) == 17 and all(p["passed"] for p in parity)
    assert json.loads((run / "export" / "config.json").read_text())["model_type"] == "pocketbert-static"
    assert not (run / "export" / "onnx").exists()  # no library of the hub layout knows the model type
    benched = run_cli(capsys, "bench", "--run", run, "--reference", tiny_reference)  # BERT-base: bench/test_reference.py
    assert benched.exit_code == 0, benched.err
    results = json.loads((run / "bench" / "results.json").read_text())
    assert {(m["runtime"], m["model_format"], m["precision"]) for m in results["measurements"]
            if m["model"] == "student"} >= {("onnxruntime", "onnx", "int8"), ("onnxruntime", "ort", "int8")}


def test_cross_domain_and_focal_distillation(capsys, teacher_run, tmp_path, shared_data):
    run = run_with_teacher(teacher_run, tmp_path / "run")
    result = run_cli(capsys, "train", "distill", "--run", run, *TINY, "--hard-loss", "focal", "--focal-gamma", "2",
                     "--cross-domain", "imdb", "--set", "eval.cross_domain_max_examples=16", "--data-dir", shared_data)
    assert result.exit_code == 0, result.err
    m = manifest(run / "student")
    assert m["config"]["recipe"]["distill"]["hard_loss"] == "focal"
    imdb = m["metrics"]["cross_domain"]["imdb"]
    assert imdb["student"]["n_examples"] == imdb["teacher"]["n_examples"] == 16
    assert "on imdb" in result.out


def test_ablation_table_from_real_runs(capsys, teacher_run, tmp_path, shared_data):
    run = run_with_teacher(teacher_run, tmp_path / "run")
    result = run_cli(capsys, "train", "ablate", "--run", run, *TINY, "--max-train-examples", "32",
                     "--data-dir", shared_data)
    assert result.exit_code == 0, result.err
    folder = run / ABLATION_DIR
    table = json.loads((folder / ABLATION_RESULTS).read_text())
    assert [r["variant"] for r in table["rows"]] == ["full", "no_kl", "no_ce", "no_cos", "random_init"]
    for row in table["rows"]:
        student = manifest(folder / row["variant"] / "student")
        assert row["eval"] == student["metrics"]["eval"]
        assert row["delta"] == pytest.approx(row["eval"]["accuracy"] - table["rows"][0]["eval"]["accuracy"])
    weights = manifest(folder / "no_kl" / "student")["config"]["recipe"]["distill"]
    assert weights["kl_weight"] == 0.0 and weights["ce_weight"] > 0
    assert (folder / ABLATION_PLOT).stat().st_size > 0
    assert "random student init" in (folder / ABLATION_TABLE).read_text()


UNTOUCHED_ROWS_KEPT = 0.5  # word pieces a 16-sentence epoch never sees keep the weights the student started with
RANDOM_ROWS_EQUAL_AT_MOST = 0.001  # a random student shares only the all-zero [PAD] row with its teacher


def test_random_init_student_does_not_start_from_the_teacher(capsys, teacher_run, tmp_path, shared_data):
    from safetensors.torch import load_file

    teacher = load_file(teacher_run / "teacher" / "model.safetensors")
    key = next(k for k in teacher if k.endswith("word_embeddings.weight"))

    def rows_equal_to_the_teachers(init: str) -> float:
        run = run_with_teacher(teacher_run, tmp_path / init / "run")
        result = run_cli(capsys, "train", "distill", "--run", run, *TINY, "--max-train-examples", "16",
                         "--set", f"student.init={init}", "--data-dir", shared_data)
        assert result.exit_code == 0, result.err
        student = load_file(run / "student" / "model.safetensors")
        return (student[key] == teacher[key]).all(dim=1).float().mean().item()

    assert rows_equal_to_the_teachers("teacher") > UNTOUCHED_ROWS_KEPT
    assert rows_equal_to_the_teachers("random") < RANDOM_ROWS_EQUAL_AT_MOST


def test_training_benchmark_writes_both_loops(capsys, teacher_run, tmp_path, shared_data):
    import numpy as np

    from pocketbert.train.train_bench import REPEATS, WARMUP_STEPS
    from pocketbert.train.trainer import pad_to

    widened = pad_to({"input_ids": np.ones((2, 3), np.int64), "attention_mask": np.ones((2, 3), np.int64)}, 8, 0)
    assert widened["input_ids"].shape == (2, 8) and widened["attention_mask"][:, 3:].sum() == 0
    run = run_with_teacher(teacher_run, tmp_path / "run")
    result = run_cli(capsys, "bench", "train", "--run", run, *TINY, "--examples", "32", "--data-dir", shared_data)
    assert result.exit_code == 0, result.err
    out = json.loads((run / TRAIN_BENCH_RESULTS).read_text())
    assert out["timings"]["pocketbert_warm_cache"]["cache_hit"] and not out["timings"]["pocketbert_cold_cache"]["cache_hit"]
    timings, examples = out["timings"], out["examples"]
    steps = -(-examples // out["batch_size"])
    for loop in timings.values():  # every loop trained on every example once, none skipped
        assert loop["examples"] == examples and loop["steps"] == steps and loop["seconds"] > 0
        # the median of REPEATS timed runs, each after its own warm-up, and their spread
        assert len(loop["seconds_each"]) == out["repeats"] == REPEATS and out["warmup_steps"] == WARMUP_STEPS
        assert round(loop["seconds"], 3) == sorted(loop["seconds_each"])[REPEATS // 2]
        assert loop["spread"] >= 0
    # the reference pads every batch to max_length, while the examples are much shorter on average
    assert timings["reference"]["padded_tokens"] == examples * out["max_length"]
    assert out["mean_length"] < out["max_length"]


def test_masked_lm_stage_feeds_task_distillation(capsys, tmp_path, wordpiece_tokenizer, tiny_base, shared_data):
    import torch
    from helpers import TINY_CONFIG
    from transformers import AutoModelForMaskedLM, BertConfig, BertForMaskedLM

    teacher = tmp_path / "mlm-teacher"
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig(vocab_size=wordpiece_tokenizer.vocab_size, **TINY_CONFIG)).save_pretrained(teacher)
    wordpiece_tokenizer.save_pretrained(teacher)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(line.split("\t")[0] for line in
                                (shared_data / "sst2" / "train.tsv").read_text().splitlines()[1:81]))
    run = tmp_path / "run"
    result = run_cli(capsys, "train", "mlm", "--run", run, "--teacher-model", teacher, "--corpus", corpus, *TINY,
                     "--set", "mlm.max_length=32")
    assert result.exit_code == 0, result.err
    student = AutoModelForMaskedLM.from_pretrained(run / "student_mlm")
    assert student.config.num_hidden_layers == 1
    assert manifest(run / "student_mlm")["metrics"]["held_out_texts"] == 4
    no_head = run_cli(capsys, "train", "mlm", "--run", tmp_path / "other", "--teacher-model", tiny_base,
                      "--corpus", corpus)
    assert no_head.exit_code == 2 and "has no masked-LM head" in error_line(no_head)
    shutil.copytree(teacher, run / "teacher-src")
    task_teacher = run_cli(capsys, "train", "teacher", "--run", run, "--model", teacher, *TINY, "--data-dir", shared_data)
    assert task_teacher.exit_code == 0, task_teacher.err
    distilled = run_cli(capsys, "train", "distill", "--run", run, *TINY, "--student-model", run / "student_mlm",
                        "--data-dir", shared_data)
    assert distilled.exit_code == 0, distilled.err


def make_other_vocabulary_model(folder, vocab_words):
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    vocab = folder / "vocab.txt"
    folder.mkdir()
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *vocab_words]) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(vocab))
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("args, fragments", [
    # option values are refused as they are parsed, naming the option; --set values by the recipe's key
    (["--temperature", "0"], ["--temperature", "positive number", "'0'"]),
    (["--temperature", "-2"], ["--temperature", "positive number", "'-2'"]),
    (["--layer-map", "0,7"], ["out of range", "0..1"]),
    (["--recipe", "tang", "--alpha", "1.5"], ["--alpha", ">= 0 and <= 1", "'1.5'"]),
    (["--hard-loss", "focal", "--focal-gamma", "-1"], ["--focal-gamma", "non-negative", "'-1'"]),
    (["--set", "distill.temperature=0"], ["distill.temperature", "greater than 0"]),
])
def test_bad_distillation_options_are_one_line_errors(capsys, teacher_run, tmp_path, shared_data, args, fragments):
    run = run_with_teacher(teacher_run, tmp_path / "run")
    result = run_cli(capsys, "train", "distill", "--run", run, *TINY, *args, "--data-dir", shared_data)
    assert result.exit_code == 2
    line = error_line(result)
    assert line.startswith("error:") and all(f in line for f in fragments)
    assert not (run / "student").exists()


def test_student_with_another_vocabulary_is_refused(capsys, teacher_run, tmp_path, shared_data):
    run = run_with_teacher(teacher_run, tmp_path / "run")
    other = make_other_vocabulary_model(tmp_path / "other-vocab", ["good", "bad", "film"])
    result = run_cli(capsys, "train", "distill", "--run", run, *TINY, "--student-model", other,
                     "--data-dir", shared_data)
    assert result.exit_code == 2
    line = error_line(result)
    assert "another vocabulary than the teacher" in line and "shares the teacher's tokenizer" in line
    assert not (run / "student").exists()


def test_pruned_student_recovers_reloads_and_exports(capsys, quick_exported_run, tmp_path, shared_data):
    from transformers import AutoModelForSequenceClassification

    run = linked_copy(quick_exported_run, tmp_path / "run", ["teacher", "student"])  # the session's tiny student
    result = run_cli(capsys, "train", "prune", "--run", run, *TINY, "--ffn-ratio", "0.5", "--data-dir", shared_data)
    assert result.exit_code == 0, result.err
    pruned = tmp_path / "run-pruned"
    student = manifest(pruned / "student")
    assert student["metrics"]["pruning"]["intermediate_size_after"] == 32  # tiny: 64 channels, halved
    assert "intermediate_size_after" not in student["config"]["recipe"]["prune"]  # the recipe is the recipe
    assert AutoModelForSequenceClassification.from_pretrained(pruned / "student").config.intermediate_size == 32
    # one program of each family: the cut width through every converter
    exported = run_cli(capsys, "export", "--run", pruned, "--data-dir", shared_data, "--coreml-variants", "fp16",
                       "--coreai-variants", "fp16", "--executorch-variants", "pte")
    assert exported.exit_code == 0, exported.err
    assert {"model.pte", "PocketBertSentiment.mlpackage", "PocketBertSentiment.aimodel"} <= {
        p["artifact"] for p in json.loads((pruned / "export" / "parity.json").read_text())}


def test_a_larger_batch_scales_the_learning_rate_and_records_the_global_batch(capsys, teacher_run, tmp_path,
                                                                              shared_data):
    import math

    from pocketbert.core.config.recipe import load_recipe

    tiny = load_recipe("sentiment", "tiny")["distill"]
    run = run_with_teacher(teacher_run, tmp_path / "run")
    result = run_cli(capsys, "train", "distill", "--run", run, *TINY, "--batch-size", str(2 * tiny["batch_size"]),
                     "--data-dir", shared_data)
    assert result.exit_code == 0, result.err
    student = json.loads((run / "student" / "manifest.json").read_text())
    train, distill = student["metrics"]["train"], student["config"]["recipe"]["distill"]
    assert train["global_batch_size"] == 2 * tiny["batch_size"] == distill["batch_size"]
    assert distill["base_batch_size"] == tiny["batch_size"] and distill["lr_scaling"] == "sqrt"
    assert math.isclose(train["learning_rate"], tiny["learning_rate"] * math.sqrt(2))
    refused = run_cli(capsys, "train", "distill", "--run", tmp_path / "other", *TINY, "--batch-size", "0",
                      "--data-dir", shared_data)
    assert refused.exit_code == 2 and not (tmp_path / "other").exists()
