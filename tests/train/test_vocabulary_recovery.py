"""The short distillation after fitting (vocabulary.recovery_steps): what it trains on (texts a half vocabulary
cuts differently, in the fitted student's ids, with the full student's answers as targets), and the cost measured on each
cross-domain dataset. tests/train/test_vocabulary.py runs it through the training loop."""

from __future__ import annotations

import pytest

from pocketbert.core.errors import ConfigError

MIN_COUNT = 2
TEXTS = 4000        # SST-2 training sentences: enough that the second half meets pieces the first half lacks
SEED = 13
STEPS = 40


@pytest.fixture(scope="module")
def fitted(shared_data, wordpiece_tokenizer):
    """A tiny BERT student (random, the real 30,522-piece vocabulary) fitted to 4,000 SST-2 sentences."""
    import torch
    from helpers import TINY_CONFIG
    from transformers import BertConfig, BertForSequenceClassification

    from pocketbert.core.tasks.task_data import load_task_data
    from pocketbert.core.tasks.registry import make_task
    from pocketbert.core.students import piece_counts as counting
    from pocketbert.train.vocabulary import choice
    from pocketbert.train.vocabulary.rows import fitted_student
    from pocketbert.train.vocabulary.tokenizer import fitted_tokenizer, wordpiece_vocabulary

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


@pytest.mark.slow
def test_the_first_half_vocabulary_is_within_the_kept_rows_and_cuts_some_of_the_second_half(fitted,
                                                                                          wordpiece_tokenizer):
    from pocketbert.train.vocabulary.recovery import held_out_cut, split_by_cut
    from pocketbert.train.vocabulary.tokenizer import fitted_tokenizer

    task, texts, _, kept, forced, _, _ = fitted
    second, half_ids = held_out_cut(wordpiece_tokenizer, texts, kept, forced, MIN_COUNT, SEED)
    assert set(half_ids) <= set(kept) and forced <= set(half_ids) and len(half_ids) < len(kept)
    assert len(second) == len(texts) - len(texts) // 2 and set(second) <= set(texts)
    changed, alike = split_by_cut(wordpiece_tokenizer, fitted_tokenizer(wordpiece_tokenizer, half_ids), second, 64)
    assert changed and alike and len(changed) + len(alike) == len(second)


@pytest.mark.slow
def test_the_recovery_rows_are_the_fitted_students_cuts_with_the_full_students_answers(fitted, wordpiece_tokenizer):
    import numpy as np

    from pocketbert.core.students.inference import batched_logits, torch_forward
    from pocketbert.train.vocabulary.recovery import held_out_cut, recovery_rows, split_by_cut
    from pocketbert.train.vocabulary.tokenizer import fitted_tokenizer

    task, texts, full, kept, forced, _, tokenizer = fitted
    found = recovery_rows(full, wordpiece_tokenizer, task, texts, kept, forced, MIN_COUNT, 64, 64, SEED)
    second, half_ids = held_out_cut(wordpiece_tokenizer, texts, kept, forced, MIN_COUNT, SEED)
    half = fitted_tokenizer(wordpiece_tokenizer, half_ids)
    changed, alike = split_by_cut(wordpiece_tokenizer, half, second, 64)
    drawn = len(changed) + min(len(alike), len(changed))  # as many cut as before, where there are as many
    assert found.record["texts_cut_differently"] == len(changed) and found.record["texts_drawn_from"] == drawn
    assert len(found.features) == len(found.targets) == drawn
    # every row is the half vocabulary's cut, in the fitted student's ids: its tokenizer names them as the half's
    assert all(0 <= i < len(kept) for f in found.features for i in f.input_ids)
    half_cut = half(changed[0], truncation=True, max_length=64)["input_ids"]
    assert tokenizer.convert_ids_to_tokens(found.features[0].input_ids) == half.convert_ids_to_tokens(half_cut)
    # the targets are the full student's answers on the full tokenizer's cuts of the same text
    full_features = task.features(wordpiece_tokenizer, task.unlabeled_examples(changed[:1]), 64)
    expected = batched_logits(task, full_features, wordpiece_tokenizer.pad_token_id, 8, torch_forward(full, task))
    assert np.allclose(found.targets[0], expected[0], atol=1e-5)


def _kl_on(task, texts, full_model, full_tokenizer, model, tokenizer) -> float:
    import torch

    from pocketbert.core.tasks.losses import soft_target_kl

    def logits(m, tok):
        features = task.features(tok, task.unlabeled_examples(texts), 64)
        arrays = task.collate(features, tok.pad_token_id)
        with torch.no_grad():
            return task.logits(m(**{k: torch.from_numpy(arrays[k]) for k in task.input_names}))

    return float(soft_target_kl(logits(model, tokenizer), logits(full_model, full_tokenizer), 2.0))


@pytest.mark.slow  # 40 training steps
def test_the_training_loop_trains_the_table_alone_toward_the_full_students_answers(fitted, wordpiece_tokenizer):
    """The recovery as the training stage runs it: the rows, the loop's settings, the soft-target loss and the table
    alone, through train/trainer.py."""
    import copy

    import numpy as np
    import torch

    from pocketbert.core.config.recipe import DistillSection
    from pocketbert.train import trainer
    from pocketbert.train.teacher_cache import TeacherOutputs
    from pocketbert.train.vocabulary import recovery
    from pocketbert.train.vocabulary.tokenizer import fitted_tokenizer

    task, texts, full, kept, forced, untrained, tokenizer = fitted
    student = recovery.table_alone(copy.deepcopy(untrained))
    before = {name: p.clone() for name, p in student.named_parameters()}
    found = recovery.recovery_rows(full, wordpiece_tokenizer, task, texts, kept, forced, MIN_COUNT, 64, 64, SEED)
    targets = TeacherOutputs.of_logits(found.targets)
    loop = recovery.loop_section(DistillSection(max_length=64), 1e-3)
    stats = trainer.train(student, task, found.features, tokenizer.pad_token_id, loop, torch.device("cpu"),
                          lambda model, batch: (recovery.soft_loss(task, 2.0)(model, batch), {}), SEED, "test",
                          batch_extras=lambda idx, width: targets.as_batch(idx, width, "cpu"), max_steps=STEPS,
                          dropout=False)
    assert stats["steps"] == STEPS
    changed = {name for name, p in student.named_parameters() if not torch.equal(p, before[name])}
    assert changed == {"bert.embeddings.word_embeddings.weight"}

    # on the second half's texts that the first half's vocabulary cuts differently, the answers moved toward the
    # full student's
    second, half_ids = recovery.held_out_cut(wordpiece_tokenizer, texts, kept, forced, MIN_COUNT, SEED)
    half = fitted_tokenizer(wordpiece_tokenizer, half_ids)
    recut, _ = recovery.split_by_cut(wordpiece_tokenizer, half, second, 64)
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
    from pocketbert.core.tasks.registry import make_task
    from pocketbert.train.vocabulary.recovery import check_task

    check_task(make_task("sentiment", ["negative", "positive"]))
    with pytest.raises(ConfigError, match="vocabulary.recovery_steps.*set it to 0"):
        check_task(make_task("qa"))


CROSS_DOMAIN_EXAMPLES = 20


@pytest.mark.slow  # reads IMDb
def test_the_cost_is_measured_on_each_cross_domain_dataset_too(fitted, wordpiece_tokenizer, shared_data):
    from pocketbert.core.config.recipe import validate_recipe
    from pocketbert.train.vocabulary.cost import Compared, across_domains
    from pocketbert.train.vocabulary.rows import fitted_student

    task, _, full, kept, _, student, tokenizer = fitted
    recipe = validate_recipe({"task": "sentiment", "dataset": "sst2", "eval": {
        "cross_domain": ["imdb"], "cross_domain_max_examples": CROSS_DOMAIN_EXAMPLES}})
    compared = Compared(task, full, wordpiece_tokenizer, student, tokenizer, 64, None, 8, {})
    measured = across_domains(compared, recipe, shared_data, SEED)
    assert set(measured) == {"imdb"} and measured["imdb"].examples == CROSS_DOMAIN_EXAMPLES
    assert set(measured["imdb"].fitted_student) == set(measured["imdb"].full_student) >= {"accuracy"}
    # every row kept: the same answers
    same = fitted_student(full, list(range(len(wordpiece_tokenizer))))
    compared_same = Compared(task, full, wordpiece_tokenizer, same, wordpiece_tokenizer, 64, None, 8, {})
    assert across_domains(compared_same, recipe, shared_data, SEED)["imdb"].agreement == 1.0
    no_cross_domain = validate_recipe({"task": "sentiment", "dataset": "sst2"})
    assert across_domains(compared, no_cross_domain, shared_data, SEED) == {}
