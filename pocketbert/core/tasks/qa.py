"""Extractive QA: doc-stride windows, answer-span post-processing, SQuAD exact match and F1."""

from __future__ import annotations

import collections
import re
import string
from dataclasses import dataclass

import numpy as np

from pocketbert.core.tasks.data import QAExample


@dataclass
class QAFeature:
    example_index: int
    input_ids: list[int]
    token_type_ids: list[int]
    offsets: list[tuple[int, int] | None]  # character span in the context; None outside the context
    start_position: int = 0  # training target; 0 (the [CLS] token) when the answer is not in this window
    end_position: int = 0


def build_qa_features(tokenizer, examples: list[QAExample], max_length: int, doc_stride: int) -> list[QAFeature]:
    """Tokenize question + context into overlapping windows of the context."""
    if doc_stride >= max_length // 2:
        doc_stride = max_length // 4  # a stride near the window length would make no progress
    enc = tokenizer(
        [ex.question for ex in examples],
        [ex.context for ex in examples],
        truncation="only_second",
        max_length=max_length,
        stride=doc_stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        return_token_type_ids=True,
        padding=False,
    )
    features = []
    for i, input_ids in enumerate(enc["input_ids"]):
        example_index = enc["overflow_to_sample_mapping"][i]
        sequence_ids = enc.sequence_ids(i)
        offsets = [tuple(o) if sequence_ids[k] == 1 else None for k, o in enumerate(enc["offset_mapping"][i])]
        feature = QAFeature(example_index, list(input_ids), list(enc["token_type_ids"][i]), offsets)
        example = examples[example_index]
        if example.answers:
            text, start_char = example.answers[0]
            end_char = start_char + len(text)
            context_tokens = [k for k, o in enumerate(offsets) if o is not None]
            # Tokens that overlap the answer. None when the window does not hold the whole answer, or when
            # the tokenizer dropped every answer character (accents, format characters): then the
            # target is [CLS], never a span beside the answer.
            overlapping = [k for k in context_tokens if offsets[k][0] < end_char and offsets[k][1] > start_char]
            whole_answer_inside = (context_tokens and offsets[context_tokens[0]][0] <= start_char
                                   and offsets[context_tokens[-1]][1] >= end_char)
            if overlapping and whole_answer_inside:
                feature.start_position, feature.end_position = overlapping[0], overlapping[-1]
        features.append(feature)
    return features


def _best_span(starts: np.ndarray, ends: np.ndarray, in_context: list[bool], n_best: int,
               max_answer_length: int) -> tuple[float, int, int] | None:
    """(score, start, end) of the best valid span among the n_best starts and ends, or None."""
    best = None
    # Highest first, and on equal logits the earlier token first: ONNX TopK's order, so the one-call QA graph and
    # the app routines pick the same span as this pipeline when quantized logits tie.
    for s in np.argsort(-starts, kind="stable")[:n_best]:
        if s >= len(in_context) or not in_context[s]:
            continue
        for e in np.argsort(-ends, kind="stable")[:n_best]:
            if e >= len(in_context) or not in_context[e] or e < s or e - s + 1 > max_answer_length:
                continue
            score = starts[s] + ends[e]
            if best is None or score > best[0]:
                best = (score, s, e)
    return best


def _best_per_example(n_examples: int, features: list[QAFeature], start_logits: list[np.ndarray],
                      end_logits: list[np.ndarray], in_context, answer, empty, n_best: int,
                      max_answer_length: int) -> list:
    """For each example, answer(feature, start, end) of its best span over all its windows (empty if none)."""
    by_example = collections.defaultdict(list)
    for f_index, feature in enumerate(features):
        by_example[feature.example_index].append(f_index)
    answers = []
    for e_index in range(n_examples):
        best_score, best = -np.inf, empty
        for f_index in by_example.get(e_index, []):
            feature = features[f_index]
            span = _best_span(start_logits[f_index], end_logits[f_index], in_context(feature), n_best,
                              max_answer_length)
            if span is not None and span[0] > best_score:
                best_score, best = span[0], answer(feature, span[1], span[2])
        answers.append(best)
    return answers


def best_spans(
    examples: list[QAExample],
    features: list[QAFeature],
    start_logits: list[np.ndarray],
    end_logits: list[np.ndarray],
    n_best: int = 20,
    max_answer_length: int = 30,
) -> list[str]:
    """The highest-scoring valid answer text for each example, over all its windows."""
    return _best_per_example(
        len(examples), features, start_logits, end_logits, lambda f: [o is not None for o in f.offsets],
        lambda f, s, e: examples[f.example_index].context[f.offsets[s][0]:f.offsets[e][1]], "", n_best,
        max_answer_length)


def normalize_answer(text: str) -> str:
    """SQuAD v1.1's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction: str, truth: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(truth))


def f1_score(prediction: str, truth: str) -> float:
    pred_tokens, truth_tokens = normalize_answer(prediction).split(), normalize_answer(truth).split()
    common = collections.Counter(pred_tokens) & collections.Counter(truth_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(pred_tokens), overlap / len(truth_tokens)
    return 2 * precision * recall / (precision + recall)


def example_scores(examples: list[QAExample], predictions: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each example's exact match and F1 in percent, the best over its gold answers."""
    em, f1 = [], []
    for example, prediction in zip(examples, predictions):
        golds = [text for text, _ in example.answers] or [""]
        em.append(100.0 * max(exact_match(prediction, g) for g in golds))
        f1.append(100.0 * max(f1_score(prediction, g) for g in golds))
    return np.array(em), np.array(f1)


def squad_scores(examples: list[QAExample], predictions: list[str]) -> dict[str, float]:
    """Exact match and F1 in percent, each the mean over examples of the best over an example's gold answers."""
    em, f1 = example_scores(examples, predictions)
    return {"exact_match": float(em.mean()) if len(em) else 0.0, "f1": float(f1.mean()) if len(f1) else 0.0}
