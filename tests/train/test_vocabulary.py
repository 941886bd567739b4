"""A fitted vocabulary (`pocketbert train vocabulary`, the recipe's vocabulary section): the text counted (training and
transfer, never evaluation), the rows kept, the tokenizer rebuilt for them, the fitted student, and the training step
that writes it as <run>/student_fitted/."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import error_line, linked_copy, run_cli

from pocketbert.core.run import run_files
from pocketbert.core.errors import ConfigError


MIN_COUNT = 2
# SST-2's training sentences hold a small part of the 30,522 pieces: a fitted table of fewer rows than this share
# would not be worth the option
MOST_ROWS_KEPT_ON_SST2 = 0.6
CAPPED_EXTRA_ROWS = 100
RECOVERY_STEPS = 20
RECOVERY_LEARNING_RATE = 3e-3  # a few steps that move the tiny student's table enough to measure
SEED = 13


@pytest.fixture(scope="module")
def sst2(shared_data):
    from pocketbert.core.tasks.task_data import load_task_data
    from pocketbert.core.tasks.registry import make_task

    data = load_task_data("sst2", "sentiment", shared_data)
    return make_task("sentiment", data.label_names), data


@pytest.fixture(scope="module")
def train_counts(sst2, wordpiece_tokenizer):
    """Pieces counted on SST-2's training sentences only, so that the dev sentences hold pieces the fit dropped."""
    from pocketbert.core.students import piece_counts as counting

    task, data = sst2
    return counting.count_pieces(wordpiece_tokenizer,
                                 {"train": (len(data.train), counting.example_texts(task, data.train))})


@pytest.fixture(scope="module")
def forced(wordpiece_tokenizer):
    from pocketbert.train.vocabulary.choice import forced_ids
    from pocketbert.train.vocabulary.tokenizer import wordpiece_vocabulary

    vocab, prefix = wordpiece_vocabulary(wordpiece_tokenizer)
    return forced_ids(vocab, wordpiece_tokenizer.all_special_ids, prefix)


@pytest.mark.slow
def test_fitting_keeps_every_forced_row_and_drops_unused_ones(train_counts, forced, wordpiece_tokenizer):
    from pocketbert.train.vocabulary.choice import choose_rows

    kept = choose_rows(train_counts.counts, forced, MIN_COUNT, None)
    ids = set(kept.ids)
    vocab = wordpiece_tokenizer.get_vocab()
    for token in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##a", "!", "##9", "中", "##ω"):
        assert vocab[token] in ids, token
    assert forced <= ids
    assert vocab["[unused0]"] not in ids  # never occurs in text
    assert all(train_counts.counts[i] >= MIN_COUNT for i in ids - forced)
    dropped = set(range(len(vocab))) - ids
    assert all(train_counts.counts[i] < MIN_COUNT for i in dropped)
    assert kept.ids == sorted(ids) and kept.rows_before == len(vocab)
    assert len(ids) < MOST_ROWS_KEPT_ON_SST2 * len(vocab)
    assert kept.record()["rows_after"] == len(ids) == kept.forced + kept.by_count


@pytest.mark.slow
def test_a_cap_keeps_the_most_frequent_pieces(train_counts, forced):
    from pocketbert.train.vocabulary.choice import choose_rows

    cap = len(forced) + CAPPED_EXTRA_ROWS
    kept = choose_rows(train_counts.counts, forced, MIN_COUNT, cap)
    assert len(kept.ids) == cap and forced <= set(kept.ids)
    extra = set(kept.ids) - forced
    least_kept = min(train_counts.counts[i] for i in extra)
    left_out = [i for i in np.flatnonzero(train_counts.counts >= MIN_COUNT) if i not in forced and i not in extra]
    assert left_out and all(train_counts.counts[i] <= least_kept for i in left_out)
    assert kept.over_cap == len(left_out)


@pytest.mark.slow
def test_settings_that_keep_nothing_beyond_the_forced_rows_are_refused(train_counts, forced):
    from pocketbert.train.vocabulary.choice import choose_rows

    with pytest.raises(ConfigError, match="vocabulary.min_count"):
        choose_rows(train_counts.counts, forced, int(train_counts.counts.sum()) + 1, None)
    with pytest.raises(ConfigError, match="vocabulary.max_rows"):
        choose_rows(train_counts.counts, forced, MIN_COUNT, len(forced) - 1)


@pytest.mark.slow
def test_the_fitted_tokenizer_cuts_dev_sentences_as_the_full_one_where_it_kept_the_pieces(
        sst2, train_counts, forced, wordpiece_tokenizer):
    from pocketbert.train.vocabulary.choice import choose_rows
    from pocketbert.train.vocabulary.tokenizer import fitted_tokenizer

    kept = choose_rows(train_counts.counts, forced, MIN_COUNT, None)
    fitted = fitted_tokenizer(wordpiece_tokenizer, kept.ids)
    full_vocab, fitted_vocab = wordpiece_tokenizer.get_vocab(), fitted.get_vocab()
    assert len(fitted) == len(kept.ids)
    renumber = {old: new for new, old in enumerate(kept.ids)}
    assert all(fitted_vocab[token] == renumber[i] for token, i in full_vocab.items() if i in renumber)
    _, data = sst2
    same = recut = 0
    for example in data.eval:
        full_ids = wordpiece_tokenizer(example.text)["input_ids"]
        ids = fitted(example.text)["input_ids"]
        full_tokens = wordpiece_tokenizer.convert_ids_to_tokens(full_ids)
        tokens = fitted.convert_ids_to_tokens(ids)
        assert all(0 <= i < len(kept.ids) for i in ids)
        assert tokens.count("[UNK]") == full_tokens.count("[UNK]"), example.text
        if all(token in fitted_vocab for token in full_tokens):
            assert tokens == full_tokens, example.text
            # a pair (QA's question and context) takes the template's renumbered [CLS] and [SEP] and its types
            pair, full_pair = fitted(example.text, example.text), wordpiece_tokenizer(example.text, example.text)
            assert fitted.convert_ids_to_tokens(pair["input_ids"]) == wordpiece_tokenizer.convert_ids_to_tokens(
                full_pair["input_ids"]) and pair["token_type_ids"] == full_pair["token_type_ids"]
            same += 1
        else:  # a dropped piece is cut into kept ones: the same text, in as many pieces or more
            assert "".join(t.removeprefix("##") for t in tokens) == "".join(t.removeprefix("##") for t in full_tokens)
            assert len(tokens) >= len(full_tokens)
            recut += 1
    assert same and recut  # both cases occur on SST-2 dev


@pytest.mark.parametrize("architecture", ["bert-family", "bilstm", "static"])
def test_a_fitted_student_reads_kept_pieces_as_the_full_one_did(architecture, wordpiece_tokenizer):
    import torch

    from pocketbert.train.vocabulary.rows import fitted_student

    model = _tiny_student(architecture, len(wordpiece_tokenizer))
    kept = sorted({0, 100, 101, 102, 103} | set(range(1000, 3000, 7)))
    fitted = fitted_student(model, kept)
    assert fitted.config.vocab_size == len(kept) and fitted.get_input_embeddings().num_embeddings == len(kept)
    assert model.get_input_embeddings().num_embeddings == len(wordpiece_tokenizer)  # the student is left as it was
    full_ids = torch.tensor([[101, 1000, 1693, 2995, 102], [101, 1007, 102, 0, 0]])
    renumber = {old: new for new, old in enumerate(kept)}
    ids = full_ids.clone().apply_(lambda i: renumber[i])
    mask = (full_ids != 0).long()
    with torch.no_grad():
        assert torch.allclose(fitted(input_ids=ids, attention_mask=mask).logits,
                              model(input_ids=full_ids, attention_mask=mask).logits, atol=1e-6)


def _tiny_student(architecture: str, vocab_size: int):
    import torch
    from helpers import TINY_CONFIG

    torch.manual_seed(0)
    if architecture == "bilstm":
        from pocketbert.core.students.bilstm import BiLSTMClassifier, BiLSTMConfig

        model = BiLSTMClassifier(BiLSTMConfig(vocab_size, 2, embedding_dim=16, hidden_size=8, relu_size=8))
    elif architecture == "static":
        from pocketbert.core.students.static_embedding import StaticEmbeddingClassifier, StaticEmbeddingConfig

        model = StaticEmbeddingClassifier(StaticEmbeddingConfig(vocab_size, 2, embedding_dim=16, hidden_size=8,
                                                                ignored_token_ids=[0, 100, 101, 102, 103]))
    else:
        from transformers import BertConfig, BertForSequenceClassification

        model = BertForSequenceClassification(BertConfig(vocab_size=vocab_size, num_labels=2, **TINY_CONFIG))
    return model.eval()


def test_under_a_cap_a_large_source_does_not_crowd_out_a_small_ones_pieces(wordpiece_tokenizer, forced):
    """Pieces ranked by their share of the source where they are most common: a small source's own words stay
    beside a source many times its size."""
    from pocketbert.core.students import piece_counts as counting
    from pocketbert.train.vocabulary.choice import choose_rows

    small = ["the espresso was fine"] * 5
    large = ["the movie was long and the plot was thin"] * 200
    counted = counting.count_pieces(wordpiece_tokenizer, {"small": (5, small), "large": (200, large)})
    vocab = wordpiece_tokenizer.get_vocab()
    espresso = wordpiece_tokenizer.convert_tokens_to_ids(wordpiece_tokenizer.tokenize("espresso"))
    cap = len(forced) + 5  # room for five pieces beyond the forced rows: the, was, es, ##press, fine
    by_share = choose_rows(counted.counts, forced, 1, cap, counted.shares).ids
    by_count = choose_rows(counted.counts, forced, 1, cap).ids
    assert all(i in by_share for i in espresso) and vocab["fine"] in by_share
    assert not all(i in by_count for i in espresso)  # by raw counts the large source's words take the room


def test_the_fit_counts_training_and_transfer_text_and_never_an_evaluation_text(wordpiece_tokenizer, forced,
                                                                               tmp_path):
    """A word piece that only the evaluation text holds is never kept, at the lowest count (1) and where a transfer
    file holds the evaluation sentence too; what the table lacks of the evaluation text is recorded."""
    from pocketbert.core.config.recipe import validate_recipe
    from pocketbert.core.tasks.data import TaskData, TextExample
    from pocketbert.core.tasks.registry import make_task
    from pocketbert.train.vocabulary.counted_text import fit_rows, fit_texts

    labels = ["negative", "positive"]
    task = make_task("sentiment", labels)
    train = [TextExample("the espresso was fine", 1), TextExample("the kettle was slow", 0)]
    evaluation = [TextExample("a zeppelin over the harbour", 1)]
    app_text = tmp_path / "app.txt"
    app_text.write_text("the kettle boils fast\nA  Zeppelin over the HARBOUR\n")  # the eval sentence, respelled
    recipe = validate_recipe({"task": "sentiment", "dataset": "sst2", "transfer": {"data": [str(app_text)]}})
    text = fit_texts(task, TaskData("hand-made", "sentiment", labels, train, evaluation), recipe, None, SEED)
    kept, record = fit_rows(wordpiece_tokenizer, text, forced, 1, None)

    def ids(texts: list[str]) -> set[int]:
        return {i for t in texts for i in wordpiece_tokenizer(t, add_special_tokens=False)["input_ids"]}

    counted = ids(["the espresso was fine", "the kettle was slow", "the kettle boils fast"])
    eval_pieces = wordpiece_tokenizer(evaluation[0].text, add_special_tokens=False)["input_ids"]
    eval_only = set(eval_pieces) - counted - forced
    assert eval_only  # a control: the evaluation sentence holds pieces of its own
    assert not eval_only & set(kept.ids)
    assert set(kept.ids) == forced | counted
    transfer = f"transfer: {app_text}"
    assert set(record["counted_on"]) == {"train", transfer}
    assert record["counted_on"][transfer]["examples"] == 1 and record["counted_on"][transfer][
        "dropped_as_eval_text"] == 1
    lacked = sum(i not in set(kept.ids) for i in eval_pieces)
    assert record["eval_text"] == {"examples": 1, "texts": 1, "pieces": len(eval_pieces), "pieces_lacked": lacked}
    assert record["eval_unknown_rate"] == round(lacked / len(eval_pieces), 6) > 0


# ---------------------------------------------------------------- through `pocketbert train vocabulary`


def _manifest(folder) -> dict:
    return json.loads((folder / run_files.MANIFEST).read_text())


@pytest.mark.slow
def test_the_training_step_writes_the_fitted_student_with_its_manifest(quick_exported_run, tmp_path, capsys,
                                                                      shared_data):
    import torch

    from pocketbert.core.students.fitted_vocabulary import FITTED_FROM, SETTINGS, student_identity
    from pocketbert.core.students.stage_folder import load_stage_model

    run = linked_copy(quick_exported_run, tmp_path / "run", ["teacher", "student"])
    result = run_cli(capsys, "train", "vocabulary", "--run", run, "--data-dir", shared_data, "--device", "cpu",
                     "--vocabulary-recovery-steps", str(RECOVERY_STEPS), "--vocabulary-recovery-learning-rate",
                     str(RECOVERY_LEARNING_RATE))
    assert result.exit_code == 0, error_line(result)
    folder = run / run_files.FITTED_STUDENT_DIR
    assert "vocabulary fitted: 30522 -> " in result.out and str(folder) in result.out
    manifest = _manifest(folder)
    assert manifest["stage"] == run_files.FITTED_STUDENT_DIR
    assert manifest["config"][FITTED_FROM] == student_identity(run)
    assert manifest["config"][SETTINGS] == {"min_count": MIN_COUNT, "max_rows": None, "recovery_steps": RECOVERY_STEPS,
                                            "recovery_learning_rate": RECOVERY_LEARNING_RATE}
    assert manifest["config"]["recipe"]["vocabulary"] == {"min_count": MIN_COUNT, "max_rows": None,
                                                          "recovery_steps": RECOVERY_STEPS,
                                                          "recovery_learning_rate": RECOVERY_LEARNING_RATE}
    record = manifest["metrics"]["vocabulary"]
    rows = record["rows_after"]
    assert record["rows_before"] == 30522 > rows and record["min_count"] == MIN_COUNT
    # counted on the training text alone (the tiny recipe has no transfer data); the eval text measured, not counted
    assert set(record["counted_on"]) == {"train"} and record["counted_on"]["train"]["examples"] > 0
    assert record["eval_text"]["examples"] > 0 and 0.0 <= record["eval_unknown_rate"] <= 1.0
    assert record["eval_unknown_rate"] == round(record["eval_text"]["pieces_lacked"] / record["eval_text"]["pieces"], 6)
    cost = record["against_full_student"]
    assert cost["examples"] == manifest["config"]["recipe"]["export"]["parity_examples"]
    assert 0.0 <= cost["agreement"] <= 1.0 and set(cost["fitted_student"]) == set(cost["full_student"]) >= {"accuracy"}
    assert record["against_full_student_across_domains"] == {}  # the tiny recipe names no cross-domain dataset

    # the recovery ran in the training loop, in steps, on the table alone, toward the full student's answers
    recovery = record["recovery"]
    assert recovery["steps"] == recovery["train"]["steps"] == RECOVERY_STEPS and recovery["texts_cut_differently"] > 0
    assert recovery["temperature"] == manifest["config"]["recipe"]["distill"]["temperature"]
    assert np.isfinite([recovery["loss_before"], recovery["loss_after"]]).all()
    student, _, _, _ = load_stage_model(run / run_files.STUDENT_DIR)
    fitted, tokenizer, _, _ = load_stage_model(folder)
    assert len(tokenizer) == rows == fitted.config.vocab_size == fitted.get_input_embeddings().num_embeddings
    table = "bert.embeddings.word_embeddings.weight"
    full = dict(student.named_parameters())
    changed = {name for name, p in fitted.named_parameters() if not torch.equal(p, full[name]) if name != table}
    assert changed == set()  # every layer as the full student's
    full_ids = json.loads((run / run_files.STUDENT_DIR / run_files.TOKENIZER_JSON).read_text())["model"]["vocab"]
    kept = [student.get_input_embeddings().weight[wordpiece_id] for wordpiece_id in
            sorted(full_ids[piece] for piece in tokenizer.get_vocab())]
    assert not torch.equal(torch.stack(kept), fitted.get_input_embeddings().weight)  # the table trained
    shares = np.load(folder / run_files.PIECE_SHARES)
    assert shares.shape == (rows,) and shares.max() <= 1.0 and shares.sum() > 0

    # a stage like the others: not replaced without --overwrite
    again = run_cli(capsys, "train", "vocabulary", "--run", run, "--data-dir", shared_data, "--device", "cpu")
    assert again.exit_code == 2 and "--overwrite" in error_line(again)


@pytest.mark.slow
def test_settings_that_cannot_apply_end_in_one_line_and_write_nothing(quick_exported_run, tmp_path, capsys,
                                                                     shared_data):
    from helpers import QUICK_EXPORT

    run = linked_copy(quick_exported_run, tmp_path / "run", ["teacher", "student"])
    result = run_cli(capsys, "train", "vocabulary", "--run", run, "--data-dir", shared_data, "--device", "cpu",
                     "--vocabulary-min-count", "1000000000")
    assert result.exit_code == 2 and "vocabulary.min_count 1000000000" in error_line(result)
    # through the export, which fits first: the same line, and neither folder written
    result = run_cli(capsys, "export", "--run", run, "--data-dir", shared_data, "--vocabulary", "fitted",
                     "--vocabulary-min-count", "1000000000", *QUICK_EXPORT)
    assert result.exit_code == 2 and "vocabulary.min_count 1000000000" in error_line(result)
    result = run_cli(capsys, "export", "--run", run, "--data-dir", shared_data, "--vocabulary-max-rows", "5000",
                     *QUICK_EXPORT)
    assert result.exit_code == 2 and "add --vocabulary fitted" in error_line(result)
    assert not (run / run_files.FITTED_STUDENT_DIR).exists() and not (run / run_files.EXPORT_DIR).exists()
