"""The one-call QA gate (parity.compare_answers) fails on each kind of miss: an answer that differs from the
Python pipeline's beyond the agreement it allows, a span that is not the context's text, a window count that
differs, and scores further apart than it allows."""

from __future__ import annotations

import numpy as np
import pytest

from pocketbert.core.config.recipe import EvalSection
from pocketbert.core.tasks.task_data import load_task_data
from pocketbert.core.tasks.registry import QATask
from pocketbert.export.checks import parity

pytestmark = pytest.mark.slow  # SQuAD read and cut into windows

QUESTIONS = 40
EVAL = EvalSection(n_best=5, max_answer_length=30)


@pytest.fixture(scope="module")
def pipeline(shared_data, wordpiece_tokenizer):
    """SQuAD dev questions, their windows, oracle logits and the answers and window counts the pipeline gives."""
    task = QATask()
    examples = load_task_data("squad", "qa", shared_data).eval[:QUESTIONS]
    features = task.features(wordpiece_tokenizer, examples, 128, 48)
    logits = []
    for f in features:
        row = np.full((len(f.input_ids), 2), -5.0)
        if f.start_position:
            row[f.start_position, 0], row[f.end_position, 1] = 10.0, 10.0
        logits.append(row)
    answers = task.answers(examples, features, logits, EVAL)
    windows = np.bincount([f.example_index for f in features], minlength=len(examples))
    ours = [{"answer": a, "windows": int(n), "context_cut": False} for a, n in zip(answers, windows)]
    return task, examples, features, logits, ours


def gate(pipeline, answers, span_mismatches=0) -> parity.ParityResult:
    task, examples, features, logits, _ = pipeline
    return parity.compare_answers(task, examples, features, logits, answers, span_mismatches, EVAL,
                                  "model.qa.onnx", "onnxruntime + extensions", "fp32", parity.QA_IN_GRAPH_GATE)


def test_the_pipeline_s_own_answers_pass(pipeline):
    result = gate(pipeline, pipeline[-1])
    assert result.passed and result.agreement == 1.0
    assert result.by_windows["several_windows"]["questions"] > 0  # long contexts are counted apart


def test_one_answer_changed_in_forty_fails_the_agreement(pipeline):
    answers = [dict(a) for a in pipeline[-1]]
    answers[0]["answer"] = answers[0]["answer"] + " and more"
    assert not gate(pipeline, answers).passed


def test_a_span_that_is_not_the_context_s_text_fails(pipeline):
    assert not gate(pipeline, pipeline[-1], span_mismatches=1).passed


def test_a_window_count_that_differs_fails_unless_the_context_was_cut(pipeline):
    answers = [dict(a) for a in pipeline[-1]]
    answers[0]["windows"] += 1
    assert not gate(pipeline, answers).passed
    answers[0]["context_cut"] = True
    assert gate(pipeline, answers).passed


def test_scores_further_apart_than_the_gate_allows_fail(pipeline):
    # agreement alone would pass these (no minimum): the points-apart bound is what must catch them
    loose = parity.Gate(None, 0.0, agree_for_every_task=True, max_points_apart=parity.QA_IN_GRAPH_MAX_POINTS_APART)
    task, examples, features, logits, ours = pipeline
    answers = [dict(a) for a in ours]
    answers[0]["answer"] = ""
    result = parity.compare_answers(task, examples, features, logits, answers, 0, EVAL, "model.qa.onnx",
                                    "onnxruntime + extensions", "fp32", loose)
    assert not result.passed
