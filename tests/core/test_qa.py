"""QA windows, span post-processing and SQuAD scoring on real SQuAD examples."""

from __future__ import annotations

import numpy as np
import pytest

from pocketbert.core.tasks.data import QAExample
from pocketbert.core.tasks.task_data import load_task_data
from pocketbert.core.tasks.qa import best_spans, build_qa_features, exact_match, f1_score, squad_scores

ORACLE_MIN_EXACT_MATCH = 95.0  # the training targets scored as answers: all but sub-word answers are exact


def test_answer_positions_map_back_to_the_answer(shared_data, wordpiece_tokenizer):
    examples = load_task_data("squad", "qa", shared_data).eval[:40]
    features = build_qa_features(wordpiece_tokenizer, examples, max_length=128, doc_stride=48)
    assert len(features) > len(examples)  # long contexts need several windows
    located = 0
    for f in features:
        if f.start_position == 0:
            continue
        ex = examples[f.example_index]
        span = ex.context[f.offsets[f.start_position][0]:f.offsets[f.end_position][1]]
        # the target is the tokens that cover the first gold answer: that answer, or the word holding it when the
        # answer ends inside a word ("gold" of "golden")
        assert exact_match(span, ex.answers[0][0]) == 1.0 or ex.answers[0][0] in span
        located += 1
    assert located >= len(examples) * 0.9


def test_best_spans_recovers_oracle_answers(shared_data, wordpiece_tokenizer):
    examples = load_task_data("squad", "qa", shared_data).eval[:30]
    features = build_qa_features(wordpiece_tokenizer, examples, max_length=128, doc_stride=48)
    starts, ends = [], []
    for f in features:
        s, e = np.full(len(f.input_ids), -5.0), np.full(len(f.input_ids), -5.0)
        if f.start_position:
            s[f.start_position], e[f.end_position] = 10.0, 10.0
        starts.append(s)
        ends.append(e)
    predictions = best_spans(examples, features, starts, ends)
    scores = squad_scores(examples, predictions)
    # the official score misses only answers that end inside a word ("gold" of "golden")
    assert scores["exact_match"] >= ORACLE_MIN_EXACT_MATCH


def test_span_never_crosses_into_the_question(wordpiece_tokenizer):
    ex = QAExample("q", "who wrote it", "it was written by ada lovelace in london", (("ada lovelace", 18),))
    features = build_qa_features(wordpiece_tokenizer, [ex], max_length=64, doc_stride=16)
    f = features[0]
    start = np.zeros(len(f.input_ids))
    start[1] = 100.0  # a question token: not a valid answer start
    end = np.zeros(len(f.input_ids))
    answer = best_spans([ex], features, [start], [end])[0]
    assert answer and answer in ex.context


def test_squad_metrics():
    assert exact_match("The Eiffel Tower!", "eiffel tower") == 1.0
    assert f1_score("in the city of Paris", "Paris") == pytest.approx(2 * (1 / 4) * 1 / (1 / 4 + 1))
    assert f1_score("London", "Paris") == 0.0


def test_equal_logits_pick_the_earlier_token_as_onnx_topk_does():
    from pocketbert.core.tasks.qa import _best_span

    starts = np.array([0.0, 5.0, 0.0, 5.0, 0.0])  # tokens 1 and 3 tie as the best start
    ends = np.array([0.0, 0.0, 0.0, 0.0, 9.0])
    score, start, end = _best_span(starts, ends, [True] * 5, n_best=1, max_answer_length=10)
    assert (start, end, score) == (1, 4, 14.0)
