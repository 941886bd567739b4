"""SQuAD v1.1's official files: the reader's counts and offsets, the official scoring on hand-worked predictions with
several gold answers, the fixed dev sample, and that no dev question (by id or by passage) reaches training data."""

from __future__ import annotations

import json

import pytest

from pocketbert.core.errors import DataError
from pocketbert.core.tasks.data import EVAL_SAMPLE_SEED, OFFICIAL_MD5, QAExample, md5_of
from pocketbert.core.tasks.qa import squad_scores
from pocketbert.core.tasks.task_data import load_task_data

# The published sizes (Rajpurkar et al. 2016; the files' own counts)
TRAIN_QUESTIONS, TRAIN_ARTICLES = 87_599, 442
DEV_QUESTIONS, DEV_ARTICLES = 10_570, 48
CPU_DEV_SAMPLE = 2000  # qa-default's eval.max_examples


@pytest.fixture(scope="module")
def squad(shared_data):
    return load_task_data("squad", "qa", shared_data)


@pytest.mark.slow
def test_the_official_files_read_whole_with_every_answer_at_its_offset(shared_data, squad):
    for name, questions, articles, examples in (("squad/train-v1.1.json", TRAIN_QUESTIONS, TRAIN_ARTICLES, squad.train),
                                                ("squad/dev-v1.1.json", DEV_QUESTIONS, DEV_ARTICLES, squad.eval)):
        path = shared_data / name
        assert md5_of(path) == OFFICIAL_MD5[name]
        assert len(examples) == questions
        assert len(json.loads(path.read_text(encoding="utf-8"))["data"]) == articles
        assert len({ex.id for ex in examples}) == questions
        for ex in examples:
            assert ex.answers, ex.id  # v1.1: every question is answerable
            for text, start in ex.answers:
                assert ex.context[start:start + len(text)] == text
    # dev questions carry up to three gold answers (the crowd's), train one
    assert max(len(ex.answers) for ex in squad.eval) >= 3
    assert {len(ex.answers) for ex in squad.train} == {1}


def test_no_dev_question_reaches_training_data(shared_data, squad):
    dev_ids, dev_contexts = {ex.id for ex in squad.eval}, {ex.context for ex in squad.eval}
    assert not any(ex.id in dev_ids or ex.context in dev_contexts for ex in squad.train)


def test_a_training_file_cut_from_the_dev_set_is_refused(shared_data):
    # squad/train.json holds 36 articles of the official dev set: scored on dev-v1.1.json it would leak
    with pytest.raises(DataError, match="of .*dev-v1.1.json"):
        load_task_data(str(shared_data / "squad" / "train.json"), "qa", shared_data,
                       eval_file=shared_data / "squad" / "dev-v1.1.json")


def test_a_shared_passage_is_refused_even_under_another_id(tmp_path):
    context = "Ada Lovelace wrote the first published program in 1843."

    def write(name: str, qid: str) -> str:
        doc = {"data": [{"title": "t", "paragraphs": [{"context": context, "qas": [
            {"id": qid, "question": "Who wrote it?", "answers": [{"text": "Ada Lovelace", "answer_start": 0}]}]}]}]}
        (tmp_path / name).write_text(json.dumps(doc))
        return str(tmp_path / name)

    with pytest.raises(DataError, match="by its context"):
        load_task_data(write("train.json", "a"), "qa", None, eval_file=tmp_path / write("dev.json", "b"))


def test_a_file_held_out_of_itself_keeps_each_passage_on_one_side(shared_data):
    data = load_task_data(str(shared_data / "squad" / "train.json"), "qa", None)
    assert not {ex.context for ex in data.train} & {ex.context for ex in data.eval}


def test_the_validation_rows_keep_their_passages_out_of_training(squad):
    from pocketbert.train.epoch_stop import held_out_split

    pool, validation = held_out_split(squad.train[:5000], 500, 13)
    assert len(validation) == 500
    assert not {ex.context for ex in pool} & {ex.context for ex in validation}


def test_the_official_score_takes_the_best_gold_answer():
    def example(*golds: str) -> QAExample:
        context = " ".join(golds)
        return QAExample("q", "?", context, tuple((g, context.index(g)) for g in golds))

    examples = [
        example("Denver Broncos", "the Broncos"),   # "Broncos": exact against the second (its article dropped)
        example("Santa Clara, California", "Levi's Stadium"),  # "Levis Stadium": exact, punctuation dropped
        example("1879", "in 1879"),                  # "The year 1879": partial credit, the better of the two
        example("Nikola Tesla"),                     # a wrong answer: 0, 0
    ]
    predictions = ["Broncos", "Levis Stadium", "The year 1879", "Edison"]
    scores = squad_scores(examples, predictions)
    # EM: "Broncos" = normalize("the Broncos") ("the" is dropped) -> 1; "levis stadium" -> 1; 0; 0
    assert scores["exact_match"] == pytest.approx(100 * 2 / 4)
    # F1: 1, 1, max(F1 vs "1879" = 2*(1/2*1)/(1/2+1) = 2/3, vs "in 1879" = 2*(1/2*1/2)/(1/2+1/2) = 1/2), 0
    assert scores["f1"] == pytest.approx(100 * (1 + 1 + 2 / 3 + 0) / 4)


def test_the_dev_sample_is_the_same_whatever_the_recipes_seed(squad):
    from pocketbert.core.config.recipe import EvalSection, TrainingSection
    from pocketbert.train.trainer import prepare_features

    class Counting:  # the features are not what this test is about: an empty list per call
        def features(self, tokenizer, examples, length, stride):
            return []

    cfg, eval_cfg = TrainingSection(max_train_examples=10), EvalSection(max_examples=CPU_DEV_SAMPLE)
    first = prepare_features(Counting(), None, squad, cfg, eval_cfg, seed=13)[0]
    other = prepare_features(Counting(), None, squad, cfg, eval_cfg, seed=7)[0]
    assert [ex.id for ex in first] == [ex.id for ex in other] and len(first) == CPU_DEV_SAMPLE
    record = squad.eval_set(len(first))
    assert record.official and record.examples == DEV_QUESTIONS and record.scored == CPU_DEV_SAMPLE
    assert record.md5 == OFFICIAL_MD5["squad/dev-v1.1.json"]
    assert f"seed {EVAL_SAMPLE_SEED}" in record.describe() and "10,570" in record.describe()
