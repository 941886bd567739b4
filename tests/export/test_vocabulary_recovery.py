"""The short distillation after fitting (export.vocabulary_recovery_steps): what it trains on, what it trains, and
that it brings the fitted student's answers toward the full student's on text cut differently."""

from __future__ import annotations

import pytest

from pocketbert.core.errors import ConfigError

MIN_COUNT = 2
TEXTS = 4000        # SST-2 training sentences: enough that the second half meets pieces the first half lacks
STEPS = 40
SEED = 13


@pytest.fixture(scope="module")
def fitted(shared_data, wordpiece_tokenizer):
    """A tiny BERT student (random, the real 30,522-piece vocabulary) fitted to 4,000 SST-2 sentences."""
    import torch
    from conftest import TINY_CONFIG
    from transformers import BertConfig, BertForSequenceClassification

    from pocketbert.core.task_data import load_task_data
    from pocketbert.core.tasks import make_task
    from pocketbert.export.vocabulary import choice, counting
    from pocketbert.export.vocabulary.rows import fitted_student
    from pocketbert.export.vocabulary.tokenizer import fitted_tokenizer, wordpiece_vocabulary

    data = load_task_data("sst2", "sentiment", shared_data)
    task = make_task("sentiment", data.label_names)
    texts = counting.example_texts(task, data.train[:TEXTS])
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(vocab_size=len(wordpiece_tokenizer), num_labels=2,
                                                     **TINY_CONFIG)).eval()
    vocab, prefix = wordpiece_vocabulary(wordpiece_tokenizer)
    forced = choice.forced_ids(vocab, wordpiece_tokenizer.all_special_ids, prefix)
    counts = counting.count_pieces(wordpiece_tokenizer, {"train": (len(texts), texts)}).counts
    kept = choice.choose_rows(counts, forced, MIN_COUNT, None)
    return task, texts, model, kept.ids, forced, fitted_student(model, kept.ids), fitted_tokenizer(
        wordpiece_tokenizer, kept.ids)


def _kl_on(task, texts, full_model, full_tokenizer, model, tokenizer) -> float:
    import torch

    from pocketbert.core.losses import soft_target_kl

    def logits(m, tok):
        features = task.features(tok, task.unlabeled_examples(texts), 64)
        arrays = task.collate(features, tok.pad_token_id)
        with torch.no_grad():
            return task.logits(m(**{k: torch.from_numpy(arrays[k]) for k in task.input_names}))

    return float(soft_target_kl(logits(model, tokenizer), logits(full_model, full_tokenizer), 2.0))


@pytest.mark.slow
def test_the_first_half_vocabulary_is_within_the_kept_rows_and_cuts_some_of_the_second_half(fitted,
                                                                                          wordpiece_tokenizer):
    from pocketbert.export.vocabulary.recovery import held_out_cut, split_by_cut
    from pocketbert.export.vocabulary.tokenizer import fitted_tokenizer

    task, texts, _, kept, forced, _, _ = fitted
    second, half_ids = held_out_cut(wordpiece_tokenizer, texts, kept, forced, MIN_COUNT, SEED)
    assert set(half_ids) <= set(kept) and forced <= set(half_ids) and len(half_ids) < len(kept)
    assert len(second) == len(texts) - len(texts) // 2 and set(second) <= set(texts)
    changed, alike = split_by_cut(wordpiece_tokenizer, fitted_tokenizer(wordpiece_tokenizer, half_ids), second, 64)
    assert changed and alike and len(changed) + len(alike) == len(second)


@pytest.mark.slow  # 40 training steps
def test_recovery_trains_the_table_alone_toward_the_full_students_answers(fitted, wordpiece_tokenizer):
    import copy

    import numpy as np
    import torch

    from pocketbert.export.vocabulary.recovery import held_out_cut, recover, split_by_cut
    from pocketbert.export.vocabulary.tokenizer import fitted_tokenizer

    task, texts, full, kept, forced, student, tokenizer = fitted
    student = copy.deepcopy(student)
    before = {name: p.clone() for name, p in student.named_parameters()}
    record = recover(student, full, wordpiece_tokenizer, task, texts, kept, forced, MIN_COUNT, STEPS, 1e-3, 64, SEED)
    assert record["steps"] == STEPS and record["texts_cut_differently"] > 0
    assert record["loss_last"] < record["loss_first"]
    changed = {name for name, p in student.named_parameters() if not torch.equal(p, before[name])}
    assert changed == {"bert.embeddings.word_embeddings.weight"}
    assert not any(p.requires_grad != before[n].requires_grad for n, p in student.named_parameters())

    # on the second half's texts that the first half's vocabulary cuts differently, the answers moved toward the
    # full student's
    second, half_ids = held_out_cut(wordpiece_tokenizer, texts, kept, forced, MIN_COUNT, SEED)
    half = fitted_tokenizer(wordpiece_tokenizer, half_ids)
    recut, _ = split_by_cut(wordpiece_tokenizer, half, second, 64)
    untrained = fitted[5]
    ids = np.searchsorted(np.asarray(kept), np.asarray(half_ids))

    class Renumbered(torch.nn.Module):  # the fitted student read through the half vocabulary's ids
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            return self.model(input_ids=torch.from_numpy(ids)[input_ids], attention_mask=attention_mask)

    assert (_kl_on(task, recut[:200], full, wordpiece_tokenizer, Renumbered(student), half)
            < _kl_on(task, recut[:200], full, wordpiece_tokenizer, Renumbered(untrained), half))


def test_a_task_answering_per_word_piece_is_refused_recovery():
    from pocketbert.core.tasks import make_task
    from pocketbert.export.vocabulary.recovery import check_task

    check_task(make_task("sentiment", ["negative", "positive"]))
    with pytest.raises(ConfigError, match="vocabulary_recovery_steps.*set it to 0"):
        check_task(make_task("qa"))


CROSS_DOMAIN_EXAMPLES = 20


@pytest.mark.slow  # reads IMDb
def test_the_cost_is_measured_on_each_cross_domain_dataset_too(fitted, wordpiece_tokenizer, shared_data):
    from pocketbert.export.vocabulary.cost import across_domains
    from pocketbert.export.vocabulary.rows import fitted_student

    task, _, full, kept, _, student, tokenizer = fitted
    recipe = {"dataset": "sst2", "eval": {"cross_domain": ["imdb"], "cross_domain_max_examples": CROSS_DOMAIN_EXAMPLES}}
    measured = across_domains(task, recipe, shared_data, SEED, full, wordpiece_tokenizer, student, tokenizer, 64, None,
                              8, {})
    assert set(measured) == {"imdb"} and measured["imdb"]["examples"] == CROSS_DOMAIN_EXAMPLES
    assert set(measured["imdb"]["fitted_student"]) == set(measured["imdb"]["full_student"]) >= {"accuracy"}
    # every row kept: the same answers
    same = fitted_student(full, list(range(len(wordpiece_tokenizer))))
    assert across_domains(task, recipe, shared_data, SEED, full, wordpiece_tokenizer, same, wordpiece_tokenizer, 64,
                          None, 8, {})["imdb"]["agreement"] == 1.0
    assert across_domains(task, {"dataset": "sst2", "eval": {}}, shared_data, SEED, full, wordpiece_tokenizer, student,
                          tokenizer, 64, None, 8, {}) == {}
