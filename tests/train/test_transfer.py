"""Transfer data: unlabelled rows get the teacher's soft targets and no hard-label loss, evaluation texts never
enter them, the teacher cache serves them again, and bad transfer data ends in one line."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from helpers import error_line, run_cli, run_with_teacher
from transformers import BertConfig, BertForSequenceClassification

from pocketbert.core.tasks.data import TextExample, text_key
from pocketbert.core.tasks.task_data import load_task_data
from pocketbert.core.tasks.losses import IGNORE_LABEL, cross_entropy
from pocketbert.core.config.recipe import Recipe, validate_recipe
from pocketbert.core.tasks.registry import SentimentTask, make_task
from pocketbert.train import transfer
from pocketbert.train.distill import distillation_loss

TINY = ["--preset", "tiny"]
SEED = 13
LABELS = ["negative", "positive"]
LOSS_TOLERANCE = 1e-6
FRESH_PASSAGES = [
    "The battery died after two days and support never answered my emails.",
    "Setup took five minutes and the screen is bright enough to read outside.",
    "I would order this blender again; it crushes ice without complaint.",
    "The strap broke within a week, which is not what I expect at this price.",
]
LONG_PASSAGE = " ".join(["the delivery came late but the product itself works well for my family"] * 20)


def tiny_model(seed: int) -> BertForSequenceClassification:
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, num_labels=2)
    torch.manual_seed(seed)
    return BertForSequenceClassification(config).eval()


@pytest.mark.slow
def test_transfer_rows_get_the_soft_losses_and_no_hard_label_loss(wordpiece_tokenizer):
    task = SentimentTask(LABELS)
    labelled = task.features(wordpiece_tokenizer, [TextExample("a gripping film", 1), TextExample("dull and long", 0)],
                             32)
    unlabeled = task.features(wordpiece_tokenizer, task.unlabeled_examples(FRESH_PASSAGES[:2]), 32)
    assert all(f.label == IGNORE_LABEL for f in unlabeled)
    student, teacher = tiny_model(0), tiny_model(1)
    step_loss, _ = distillation_loss(task, teacher, None, {"kl": 1.0, "ce": 1.0, "cos": 0.0}, 2.0, [1, 2],
                                  cross_entropy, "cpu")

    def loss_of(features):
        collated = task.collate(features, wordpiece_tokenizer.pad_token_id)
        batch = {k: torch.from_numpy(v) for k, v in collated.items()}
        student.zero_grad()
        _, parts = step_loss(student, batch)
        return parts, batch

    parts, _ = loss_of(unlabeled)
    assert parts["ce"].item() == 0.0  # only transfer rows: nothing for the hard-label loss
    assert parts["kl"].item() > 0.0  # ... but the teacher's soft targets still teach
    parts["ce"].backward()
    assert all(p.grad is None or torch.count_nonzero(p.grad) == 0 for p in student.parameters())

    parts, batch = loss_of([labelled[0], unlabeled[0], labelled[1], unlabeled[1]])
    with torch.no_grad():
        logits = student(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    expected = F.cross_entropy(logits[[0, 2]], torch.tensor([1, 0]))
    assert abs(parts["ce"].item() - expected.item()) < LOSS_TOLERANCE  # the labelled rows' cross-entropy alone


def transfer_recipe(cross_domain: list[str] | None = None, **transfer_cfg) -> Recipe:
    return validate_recipe({"task": "sentiment", "dataset": "sst2", "distill": {"max_length": 32},
                            "eval": {"cross_domain": cross_domain or []}, "transfer": transfer_cfg})


@pytest.mark.slow
def test_evaluation_and_training_texts_never_enter_the_transfer_set(wordpiece_tokenizer, shared_data, tmp_path):
    task = make_task("sentiment", LABELS)
    data = load_task_data("sst2", "sentiment", shared_data, None, LABELS, SEED)
    recipe = transfer_recipe(data=[str(tmp_path / "reviews.txt")], cross_domain=["imdb"])
    imdb_eval = load_task_data("imdb", "sentiment", shared_data, None, LABELS, SEED).eval
    leaks = [data.eval[0].text.upper(), "  " + data.eval[5].text.replace(" ", "   "), data.train[3].text,
             imdb_eval[0].text]  # IMDb's held-out reviews are the cross-domain evaluation
    (tmp_path / "reviews.txt").write_text("\n".join([*leaks, *FRESH_PASSAGES, FRESH_PASSAGES[0]]) + "\n")
    rows, report = transfer.unlabeled_rows(task, wordpiece_tokenizer, recipe, data, data.train[:100], shared_data,
                                           SEED)
    evaluated = {text_key(ex.text) for ex in [*data.eval, *imdb_eval, *data.train]}
    assert not any(text_key(ex.text) in evaluated for ex in rows)
    assert sorted(ex.text for ex in rows) == sorted(FRESH_PASSAGES)
    source = report["transfer_data"]["sources"][0]
    assert source["dropped_as_training_or_eval_text"] == len(leaks) and source["dropped_as_repeats"] == 1
    assert all(ex.label == IGNORE_LABEL for ex in rows)


def test_long_passages_are_cut_or_windowed_to_what_the_student_reads(wordpiece_tokenizer, tmp_path):
    length = 32
    cut = transfer.passage_windows(wordpiece_tokenizer, [LONG_PASSAGE], length, "cut", "test")
    windows = transfer.passage_windows(wordpiece_tokenizer, [LONG_PASSAGE], length, "windows", "test")
    assert len(cut.texts) == 1 and LONG_PASSAGE.startswith(cut.texts[0])
    pieces = len(wordpiece_tokenizer(LONG_PASSAGE, add_special_tokens=False)["input_ids"])
    assert len(windows.texts) == -(-pieces // (length - 2))  # every word piece in exactly one window
    assert all(len(wordpiece_tokenizer(text)["input_ids"]) <= length for text in windows.texts)
    assert windows.texts[0] == cut.texts[0] and all(text in LONG_PASSAGE for text in windows.texts)


def test_a_share_sets_how_many_transfer_rows_join_the_labelled_ones(wordpiece_tokenizer, tmp_path):
    (tmp_path / "many.txt").write_text("\n".join(f"review number {i} of a kettle that boils fast" for i in range(50)))
    built = transfer.build_transfer_set([str(tmp_path / "many.txt")], wordpiece_tokenizer, "sentiment", 32, [], 30,
                                        transfer_recipe(share=0.25).transfer, None, SEED)
    assert len(built.texts) == 10 and built.report["share_of_rows"] == 0.25  # 10 of 40 rows


@pytest.mark.slow
def test_a_second_run_reuses_the_teacher_labels_of_the_transfer_data(capsys, teacher_run, tmp_path, shared_data):
    reviews = tmp_path / "reviews.csv"
    reviews.write_text("id,body\n" + "\n".join(f'{i},"{text}"' for i, text in enumerate(FRESH_PASSAGES * 3)))
    reports = []
    for attempt in ("first", "second"):
        run = run_with_teacher(teacher_run, tmp_path / attempt)
        result = run_cli(capsys, "train", "distill", "--run", run, *TINY, "--transfer-data", reviews,
                         "--transfer-column", "body", "--augment", "--set", "augment.n_iter=2",
                         "--data-dir", shared_data)
        assert result.exit_code == 0, result.err
        metrics = json.loads((run / "student" / "manifest.json").read_text())["metrics"]
        reports.append(metrics)
    first, second = reports
    assert first["transfer_data"]["rows"] == len(FRESH_PASSAGES)  # repeats dropped
    assert first["augmentation"]["augmented"] > 0
    assert not first["teacher_cache_unlabeled"]["hit"] and second["teacher_cache_unlabeled"]["hit"]
    assert second["teacher_cache"]["hit"]  # the labelled rows' entry too
    assert second["train"]["train_examples"] == first["train"]["train_examples"] > 64


@pytest.mark.slow
@pytest.mark.parametrize("content, extra, expected", [
    ("", [], "holds no text"),
    ("id,body\n1,fine\n", ["--transfer-column", "review"], "no 'review' column"),
    ("ሰላም ልዑል እንዴት ነህ\nᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ ᎠᏍᎦᏯ\n", [], "unknown word pieces"),
])
def test_bad_transfer_data_ends_in_one_line(capsys, teacher_run, tmp_path, shared_data, content, extra, expected):
    suffix = ".csv" if content.startswith("id,") else ".txt"
    path = tmp_path / f"transfer{suffix}"
    path.write_text(content)
    run = run_with_teacher(teacher_run, tmp_path / "run")
    result = run_cli(capsys, "train", "distill", "--run", run, *TINY, "--transfer-data", path, *extra,
                     "--data-dir", shared_data)
    assert result.exit_code != 0 and expected in error_line(result)
    assert not (run / "student").exists()


def test_qa_refuses_transfer_passages_in_one_line(capsys, tmp_path):
    result = run_cli(capsys, "train", "distill", "--run", tmp_path / "qa", "--task", "qa", "--preset", "tiny",
                     "--transfer-data", "sst2")
    assert result.exit_code != 0 and "extractive QA" in error_line(result)


@pytest.mark.slow
def test_the_tang_recipe_rewrites_transfer_text_too(capsys, teacher_run, tmp_path, shared_data):
    reviews = tmp_path / "reviews.txt"
    reviews.write_text("\n".join(FRESH_PASSAGES) + "\n")
    run = run_with_teacher(teacher_run, tmp_path / "tang")
    result = run_cli(capsys, "train", "distill", "--run", run, *TINY, "--recipe", "tang", "--transfer-data", reviews,
                     "--set", "augment.n_iter=2", "--data-dir", shared_data)
    assert result.exit_code == 0, result.err
    assert "transfer data: 4 unlabelled rows" in result.out
    metrics = json.loads((run / "student" / "manifest.json").read_text())["metrics"]
    made = metrics["transfer_set"]
    assert made["transfer_data"] == len(FRESH_PASSAGES) and made["augmented"] > 0
    assert made["rows"] == made["originals"] + made["transfer_data"] + made["augmented"]
    assert metrics["train"]["train_examples"] == made["rows"]
