"""A fitted export vocabulary (export.vocabulary: fitted): the rows kept, the tokenizer rebuilt for them, the fitted
student, and the export that ships it; a recipe that does not ask exports what it always did."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from helpers import QUICK_EXPORT, error_line, linked_copy, run_cli

from pocketbert.core import run_files
from pocketbert.core.errors import ConfigError

pytestmark = pytest.mark.minutes(4)

MIN_COUNT = 2
# SST-2's training sentences hold a small part of the 30,522 pieces: a fitted table of fewer rows than this share
# would not be worth the option
MOST_ROWS_KEPT_ON_SST2 = 0.6
CAPPED_EXTRA_ROWS = 100
RECOVERY_STEPS = 5
INT4_SHARE = 0.5
FULL_SIZE_SLACK = 1024  # bytes: the grown table's file and the full export's differ in names and lengths alone


@pytest.fixture(scope="module")
def sst2(shared_data):
    from pocketbert.core.task_data import load_task_data
    from pocketbert.core.tasks import make_task

    data = load_task_data("sst2", "sentiment", shared_data)
    return make_task("sentiment", data.label_names), data


@pytest.fixture(scope="module")
def train_counts(sst2, wordpiece_tokenizer):
    """Pieces counted on SST-2's training sentences only, so that the dev sentences hold pieces the fit dropped."""
    from pocketbert.export.vocabulary import counting

    task, data = sst2
    return counting.count_pieces(wordpiece_tokenizer,
                                 {"train": (len(data.train), counting.example_texts(task, data.train))})


@pytest.fixture(scope="module")
def forced(wordpiece_tokenizer):
    from pocketbert.export.vocabulary.choice import forced_ids
    from pocketbert.export.vocabulary.tokenizer import wordpiece_vocabulary

    vocab, prefix = wordpiece_vocabulary(wordpiece_tokenizer)
    return forced_ids(vocab, wordpiece_tokenizer.all_special_ids, prefix)


@pytest.mark.slow
def test_fitting_keeps_every_forced_row_and_drops_unused_ones(train_counts, forced, wordpiece_tokenizer):
    from pocketbert.export.vocabulary.choice import choose_rows

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
    from pocketbert.export.vocabulary.choice import choose_rows

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
    from pocketbert.export.vocabulary.choice import choose_rows

    with pytest.raises(ConfigError, match="vocabulary_min_count"):
        choose_rows(train_counts.counts, forced, int(train_counts.counts.sum()) + 1, None)
    with pytest.raises(ConfigError, match="vocabulary_max_rows"):
        choose_rows(train_counts.counts, forced, MIN_COUNT, len(forced) - 1)


@pytest.mark.slow
def test_the_fitted_tokenizer_cuts_dev_sentences_as_the_full_one_where_it_kept_the_pieces(
        sst2, train_counts, forced, wordpiece_tokenizer):
    from pocketbert.export.vocabulary.choice import choose_rows
    from pocketbert.export.vocabulary.tokenizer import fitted_tokenizer

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

    from pocketbert.export.vocabulary.rows import fitted_student

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
    from conftest import TINY_CONFIG

    torch.manual_seed(0)
    if architecture == "bilstm":
        from pocketbert.core.bilstm import BiLSTMClassifier, BiLSTMConfig

        model = BiLSTMClassifier(BiLSTMConfig(vocab_size, 2, embedding_dim=16, hidden_size=8, relu_size=8))
    elif architecture == "static":
        from pocketbert.core.static_embedding import StaticEmbeddingClassifier, StaticEmbeddingConfig

        model = StaticEmbeddingClassifier(StaticEmbeddingConfig(vocab_size, 2, embedding_dim=16, hidden_size=8,
                                                                ignored_token_ids=[0, 100, 101, 102, 103]))
    else:
        from transformers import BertConfig, BertForSequenceClassification

        model = BertForSequenceClassification(BertConfig(vocab_size=vocab_size, num_labels=2, **TINY_CONFIG))
    return model.eval()


# ---------------------------------------------------------------- through `pocketbert export`

# Written by every export from the same student and data, whatever else it builds: tokenizer, config and the fp32
# graph. (Timings, the int8 choice, measured on latency, and packages that stamp a date may differ.)


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_recipe_that_does_not_ask_exports_the_full_vocabulary_as_before(exported_run):
    """The session's shared export (the tiny recipe names no vocabulary): the student's own word pieces, every row,
    in every tokenizer file and in the model, and nothing fitted recorded."""
    student, export = exported_run / run_files.STUDENT_DIR, exported_run / run_files.EXPORT_DIR
    pieces = json.loads((student / run_files.TOKENIZER_JSON).read_text())["model"]["vocab"]
    assert json.loads((export / run_files.TOKENIZER_JSON).read_text())["model"]["vocab"] == pieces
    assert (export / run_files.VOCAB).read_text().splitlines() == sorted(pieces, key=pieces.get)
    assert _digest(export / run_files.MODEL_CONFIG) == _digest(student / run_files.MODEL_CONFIG)
    manifest = json.loads((export / run_files.MANIFEST).read_text())
    assert manifest["config"]["vocabulary"] == "full" and manifest["metrics"]["vocabulary"] is None


@pytest.mark.slow
def test_a_fitted_export_passes_every_gate_and_is_smaller(exported_run, tmp_path, capsys, shared_data):
    run = linked_copy(exported_run, tmp_path / "run", ["teacher", "student"])
    result = run_cli(capsys, "export", "--run", run, "--data-dir", shared_data, "--vocabulary", "fitted",
                     "--vocabulary-recovery-steps", str(RECOVERY_STEPS), "--embedding-int4-share", str(INT4_SHARE),
                     *QUICK_EXPORT)
    assert result.exit_code == 0, error_line(result)
    export = run / "export"
    assert all(r["passed"] for r in json.loads((export / run_files.PARITY).read_text()))
    for name in (run_files.ONNX_FP32, run_files.ONNX_INT8, run_files.ORT_MODEL, run_files.ONNX_TEXT_INT8):
        assert (export / name).stat().st_size < (exported_run / "export" / name).stat().st_size, name

    manifest = json.loads((export / run_files.MANIFEST).read_text())
    fitted = manifest["metrics"]["vocabulary"]
    rows = fitted["rows_after"]
    assert manifest["config"]["vocabulary"] == "fitted"
    assert fitted["rows_before"] == 30522 > rows and fitted["min_count"] == MIN_COUNT
    assert set(fitted["counted_on"]) == {"train", "eval"} and fitted["counted_on"]["train"]["examples"] > 0
    cost = fitted["against_full_student"]
    assert cost["examples"] == manifest["config"]["parity_examples"] and 0.0 <= cost["agreement"] <= 1.0
    assert set(cost["fitted_student"]) == set(cost["full_student"]) >= {"accuracy"}
    assert "vocabulary fitted: 30522 -> " in result.out
    assert fitted["against_full_student_across_domains"] == {}  # the tiny recipe names no cross-domain dataset
    recovery = fitted["recovery"]
    assert recovery["steps"] == RECOVERY_STEPS and recovery["texts_cut_differently"] > 0
    # the fp32 graph with the full table is the full-vocabulary export's, byte for byte but for the table's values
    full = exported_run / "export" / run_files.ONNX_FP32
    assert abs(fitted["full_vocabulary_sizes_bytes"][run_files.ONNX_FP32] - full.stat().st_size) < FULL_SIZE_SLACK
    assert fitted["full_vocabulary_sizes_bytes"][run_files.ONNX_INT8] > (export / run_files.ONNX_INT8).stat().st_size
    table = manifest["metrics"]["int8_word_table"]
    assert table["rows"] == rows and table["int4_rows"] == round(INT4_SHARE * rows)

    # tokenizer.json, vocab.txt, tokenizer_config.json, config.json and the golden file agree on the fitted ids
    tokenizer = json.loads((export / run_files.TOKENIZER_JSON).read_text())
    vocab_lines = (export / run_files.VOCAB).read_text(encoding="utf-8").splitlines()
    assert len(vocab_lines) == len(tokenizer["model"]["vocab"]) == rows
    assert all(tokenizer["model"]["vocab"][token] == i for i, token in enumerate(vocab_lines))
    assert json.loads((export / run_files.MODEL_CONFIG).read_text())["vocab_size"] == rows
    assert tokenizer["padding"] is None or tokenizer["padding"]["pad_id"] == vocab_lines.index("[PAD]")
    assert tokenizer["post_processor"]["special_tokens"]["[CLS]"]["ids"] == [vocab_lines.index("[CLS]")]
    golden = json.loads((export / run_files.TOKENIZER_GOLDEN).read_text())
    assert all(0 <= i < rows for row in golden["texts"] for i in row["ids"])
    from pocketbert.core.models import load_tokenizer

    assert len(load_tokenizer(str(export))) == rows
    # the exhaustive check ran against the fitted tokenizer.json
    exhaustive = manifest["metrics"]["text_in_tokenizer_exhaustive"]
    assert exhaustive["mismatch_count"] == 0 and exhaustive["probes"] > 0

    # an app folder carries the fitted files
    result = run_cli(capsys, "export", "ios", "--run", run)
    assert result.exit_code == 0, error_line(result)
    from pocketbert.export.app.app_folders import IOS_RESOURCES

    shipped = run / run_files.IOS_APP_DIR / IOS_RESOURCES / run_files.TOKENIZER_JSON
    assert shipped.read_bytes() == (export / run_files.TOKENIZER_JSON).read_bytes()


@pytest.mark.slow
def test_vocabulary_settings_that_cannot_apply_end_in_one_line_and_write_nothing(exported_run, tmp_path, capsys,
                                                                             shared_data):
    run = linked_copy(exported_run, tmp_path / "run", ["teacher", "student"])
    result = run_cli(capsys, "export", "--run", run, "--data-dir", shared_data, "--vocabulary", "fitted",
                     "--vocabulary-min-count", "1000000000", *QUICK_EXPORT)
    assert result.exit_code == 2
    assert "export.vocabulary_min_count 1000000000" in error_line(result)
    assert not (run / "export").exists()
    result = run_cli(capsys, "export", "--run", run, "--data-dir", shared_data, "--vocabulary-max-rows", "5000",
                     *QUICK_EXPORT)
    assert result.exit_code == 2 and "add --vocabulary fitted" in error_line(result)
    assert not (run / "export").exists()


def test_under_a_cap_a_large_source_does_not_crowd_out_a_small_ones_pieces(wordpiece_tokenizer, forced):
    """Pieces ranked by their share of the source where they are most common: a small source's own words stay
    beside a source many times its size."""
    from pocketbert.export.vocabulary import counting
    from pocketbert.export.vocabulary.choice import choose_rows

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
