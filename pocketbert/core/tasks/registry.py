"""The two tasks behind one interface: features, batching, model outputs, losses, metrics, and what the export
and its parity gate need to know about them (output layout, how answers are gated, which Core ML outputs apply).

Evaluation works on per-feature logits held as numpy arrays, so the same scoring serves the PyTorch
model in training and every exported runtime in the export parity check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

import numpy as np

from pocketbert.core.tasks import qa as qa_lib
from pocketbert.core.tasks import data as data_lib
from pocketbert.core.tasks.data import QAExample, TextExample
from pocketbert.core.errors import ConfigError, DataError, ModelError

if TYPE_CHECKING:  # torch loads when a loss or a logits stack is first asked for: naming the tasks needs none
    import torch

GENERIC_LABEL_PREFIX = "LABEL_"  # transformers' names for labels a config does not name


class SpanSearch(Protocol):
    """What scoring reads of the recipe's eval section (core/config/recipe.py's EvalSection, which imports this module):
    a QA answer's span search limits."""

    n_best: int
    max_answer_length: int


@dataclass
class TextFeature:
    input_ids: list[int]
    label: int


def valid_text(text: str, what: str = "text") -> str:
    """Text a runtime can take: valid Unicode (a lone surrogate has no UTF-8 form, so no tokenizer can read it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DataError(f"the {what} holds a lone surrogate (U+{ord(text[exc.start]):04X} at character {exc.start}), "
                        "which is not valid Unicode: replace it, e.g. text.encode('utf-8', 'replace').decode()"
                        ) from None
    return text


def text_in_string(text: str, what: str = "text") -> np.ndarray:
    """A text as a text-in model takes it: valid Unicode, without NUL characters (the model's byte reader stops at
    the first; tokenizer.json removes them all, so removing them first changes no token), as a [1] string tensor."""
    return np.array([valid_text(text, what).replace("\0", "")], dtype=object)


def _examples_subset(examples: list, features: list, chosen: list[int]) -> tuple[list, list[int], list]:
    """The chosen examples (indices, in order), the indices of their features, and those features renumbered to
    point into the chosen list."""
    import copy

    index = {old: new for new, old in enumerate(chosen)}
    keep = [k for k, f in enumerate(features) if f.example_index in index]
    renumbered = []
    for k in keep:
        clone = copy.copy(features[k])
        clone.example_index = index[features[k].example_index]
        renumbered.append(clone)
    return [examples[i] for i in chosen], keep, renumbered


def _losses():
    from pocketbert.core.tasks import losses

    return losses


def _pad(rows: list[list[int]], value: int) -> np.ndarray:
    width = max(len(r) for r in rows)
    out = np.full((len(rows), width), value, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


@runtime_checkable
class Task(Protocol):
    """What a task is to the rest of pocketbert: everything that differs between tasks is one of these, so adding a
    task means writing one class (and registering it in TASK_CLASSES), not editing every caller."""

    name: ClassVar[str]
    label_names: list[str]
    input_names: ClassVar[tuple[str, ...]]     # the exported graph's inputs, in order
    output_names: ClassVar[tuple[str, ...]]    # and its outputs
    per_token_outputs: ClassVar[bool]          # a score row per token (spans), not one per sequence
    has_classifier_outputs: ClassVar[bool]     # Core ML's classifier pair (label, probabilities) fits
    head_skips_pooler: ClassVar[bool]          # the pooler gets no gradient (DDP must know)
    gates_on_agreement: ClassVar[bool]         # exported models are gated on agreeing answers (else on the metric)
    metric_point: ClassVar[float]              # one point of the primary metric
    coreml_class_stem: ClassVar[str]           # the .mlpackage's name, so the Swift class Xcode generates
    text_in_inputs: ClassVar[tuple[str, ...]]  # the text-in model's string inputs
    text_in_extra_outputs: ClassVar[tuple[str, ...]]
    answers_in_graph: ClassVar[bool]           # a model in one call: windows, span search and answer text inside

    @property
    def primary_metric(self) -> str: ...

    # data: files, hub splits, features and batches
    @staticmethod
    def read_file(path: Path, label_names: list[str] | None) -> tuple[list, list[str]]: ...
    @staticmethod
    def hub_examples(split) -> list: ...
    @staticmethod
    def check_separation(train: list, eval_examples: list, train_source: str, eval_source: str) -> None: ...
    def features(self, tokenizer, examples: list, max_length: int, doc_stride: int | None = None) -> list: ...
    def collate(self, features: list, pad_id: int) -> dict[str, np.ndarray]: ...
    def eval_inputs(self, examples: list) -> list: ...
    def require_unlabeled(self, what: str) -> None: ...
    def unlabeled_examples(self, texts: list[str], what: str = "transfer data") -> list: ...

    # the model: head, outputs, losses
    def auto_model_class(self): ...
    def model_kwargs(self) -> dict[str, Any]: ...
    @staticmethod
    def checkpoint_labels(config) -> list[str]: ...
    def check_label_names(self, label_names: list[str], source: str) -> None: ...
    def logits(self, outputs) -> torch.Tensor: ...
    def output_tuple(self, outputs) -> tuple[torch.Tensor, ...]: ...
    def hard_loss(self, logits: torch.Tensor, batch: dict[str, torch.Tensor], loss_fn=None) -> torch.Tensor: ...
    def soft_loss(self, student: torch.Tensor, teacher: torch.Tensor, batch, temperature: float) -> torch.Tensor: ...

    # scoring, in training and for every exported runtime
    def stack_outputs(self, arrays: list[np.ndarray]) -> np.ndarray: ...
    def fit_row(self, row: np.ndarray, length: int, width: int) -> np.ndarray: ...
    def unbatch(self, logits: np.ndarray, batch: dict[str, np.ndarray]) -> list[np.ndarray]: ...
    def scorable(self, examples: list, features: list, n_run: int) -> tuple[list, list[int], list]: ...
    def features_for_examples(self, features: list, n_examples: int) -> int: ...
    def answers(self, examples, features, logits: list[np.ndarray], evaluation: SpanSearch) -> list: ...
    def score(self, examples, features, logits: list[np.ndarray], evaluation: SpanSearch) -> dict[str, float]: ...
    def score_answers(self, examples, features, answers: list) -> dict[str, float]: ...
    # each example's share of the primary metric, whose mean it is (in the metric's own units)
    def primary_scores(self, examples, features, answers: list) -> np.ndarray: ...

    # the text-in model (tokenizer in the graph)
    def text_in_feeds(self, example) -> dict[str, np.ndarray]: ...
    def text_in_result(self, index: int, outputs: dict[str, np.ndarray]): ...
    def within_one_window(self, examples: list, features: list, logits: list) -> tuple[list, list, list]: ...


class SentimentTask:
    name = "sentiment"
    input_names = ("input_ids", "attention_mask")
    output_names = ("logits",)
    per_token_outputs = False   # one row of class scores per sequence
    has_classifier_outputs = True  # Core ML's classifier pair (a label, a probability per label) fits this task
    head_skips_pooler = False   # the classifier reads the pooled [CLS] state: every parameter gets a gradient
    # An answer is a label: exported models are gated on agreeing with the student's labels. The primary metric,
    # accuracy, is a fraction, so one point of it is 0.01.
    gates_on_agreement = True
    metric_point = 0.01
    coreml_class_stem = "PocketBertSentiment"  # the Swift class Xcode generates from the .mlpackage

    def __init__(self, label_names: list[str]):
        self.label_names = list(label_names)

    @property
    def primary_metric(self) -> str:
        return "accuracy"

    def auto_model_class(self):
        from transformers import AutoModelForSequenceClassification
        return AutoModelForSequenceClassification

    def model_kwargs(self) -> dict[str, Any]:
        return {
            "num_labels": len(self.label_names),
            "id2label": dict(enumerate(self.label_names)),
            "label2id": {name: i for i, name in enumerate(self.label_names)},
        }

    @staticmethod
    def read_file(path: Path, label_names: list[str] | None) -> tuple[list[TextExample], list[str]]:
        """(examples, label names) of a sentence file: CSV/TSV, JSON Lines or `text;label` lines."""
        return data_lib.read_sentiment_file(path, label_names)

    @staticmethod
    def hub_examples(split) -> list[TextExample]:
        """The examples of a Hugging Face dataset split (a `sentence` or `text` column and a `label`)."""
        return data_lib.hub_sentiment(split)

    @staticmethod
    def check_separation(train: list, eval_examples: list, train_source: str, eval_source: str) -> None:
        """Sentence datasets legitimately repeat short phrases across their published splits (SST-2's train split
        holds its sentences' phrases): nothing to refuse."""

    def features(self, tokenizer, examples: list[TextExample], max_length: int, doc_stride: int | None = None):
        enc = tokenizer([ex.text for ex in examples], truncation=True, max_length=max_length)
        return [TextFeature(ids, ex.label) for ids, ex in zip(enc["input_ids"], examples)]

    def collate(self, features: list[TextFeature], pad_id: int) -> dict[str, np.ndarray]:
        input_ids = _pad([f.input_ids for f in features], pad_id)
        lengths = np.array([len(f.input_ids) for f in features])
        mask = (np.arange(input_ids.shape[1])[None, :] < lengths[:, None]).astype(np.int64)
        return {"input_ids": input_ids, "attention_mask": mask, "labels": np.array([f.label for f in features])}

    def logits(self, outputs) -> torch.Tensor:
        return outputs.logits

    def output_tuple(self, outputs) -> tuple[torch.Tensor, ...]:
        """The model's outputs in the order of output_names, as exported graphs return them."""
        return (outputs.logits,)

    def stack_outputs(self, arrays: list[np.ndarray]) -> np.ndarray:
        """Exported outputs (in output_names order) as one logits array, as `logits` gives it in PyTorch."""
        return np.asarray(arrays[0])

    def fit_row(self, row: np.ndarray, length: int, width: int) -> np.ndarray:
        """One sequence's logits run at its own length, laid out as in a batch padded to `width`."""
        return row

    def scorable(self, examples: list, features: list, n_run: int) -> tuple[list, list[int], list]:
        """Of the first n_run features, the examples that can be scored: (examples, feature indices, features)."""
        return examples, list(range(n_run)), features[:n_run]

    def features_for_examples(self, features: list, n_examples: int) -> int:
        """How many leading features make up the first n_examples whole examples."""
        return min(n_examples, len(features))

    @staticmethod
    def checkpoint_labels(config) -> list[str]:
        """A fine-tuned checkpoint's label names in logit order, from config.json's id2label."""
        id2label = {int(k): v for k, v in (getattr(config, "id2label", None) or {}).items()}
        names = [id2label[i] for i in sorted(id2label)]
        if not names or all(name.startswith(GENERIC_LABEL_PREFIX) for name in names):
            raise ModelError("the checkpoint's config.json names no labels (id2label is LABEL_0, LABEL_1, ...): set "
                             "id2label to the dataset's label names in logit order")
        return names

    def check_label_names(self, label_names: list[str], source: str) -> None:
        if label_names != self.label_names:
            raise ConfigError(f"the model knows labels {self.label_names}, {source} has {label_names}: "
                              "use data with the model's labels")

    def eval_inputs(self, examples: list) -> list:
        """What an app feeds its tokenizer for each example: the text."""
        return [ex.text for ex in examples]

    # The text-in model (tokenizer in the graph): a string in, the logits out.
    text_in_inputs = ("text",)
    text_in_extra_outputs: tuple[str, ...] = ()
    answers_in_graph = False  # a label needs no search after the model

    def text_in_feeds(self, example) -> dict[str, np.ndarray]:
        return {"text": text_in_string(example.text)}

    def text_in_result(self, index: int, outputs: dict[str, np.ndarray]):
        """(the feature the app's answer is read with, or None for the Python one; the logits row)."""
        return None, np.asarray(outputs["logits"])[0]

    def within_one_window(self, examples: list, features: list, logits: list) -> tuple[list, list, list]:
        """The examples a text-in model (one window per input) answers in full: every sentence."""
        return examples, features, logits

    def score_answers(self, examples, features, answers: list) -> dict[str, float]:
        """The task metrics of comparable answers."""
        return {"accuracy": float(self.primary_scores(examples, features, answers).mean()),
                "n_examples": len(features)}

    def primary_scores(self, examples, features, answers: list) -> np.ndarray:
        """1 where the answer is the gold label, else 0: accuracy is their mean."""
        return (np.array(answers) == np.array([f.label for f in features])).astype(float)

    def hard_loss(self, logits: torch.Tensor, batch: dict[str, torch.Tensor], loss_fn=None) -> torch.Tensor:
        loss_fn = loss_fn or _losses().cross_entropy
        return loss_fn(logits, batch["labels"])

    def require_unlabeled(self, what: str) -> None:
        """Sentences without a gold label (transfer data, rewrites) are rows the teacher labels: allowed."""

    def unlabeled_examples(self, texts: list[str], what: str = "transfer data") -> list[TextExample]:
        """Rows the teacher alone labels: no gold label, so no hard-label loss."""
        return [TextExample(text, _losses().IGNORE_LABEL) for text in texts]

    def soft_loss(self, student: torch.Tensor, teacher: torch.Tensor, batch, temperature: float) -> torch.Tensor:
        return _losses().soft_target_kl(student, teacher, temperature)

    def unbatch(self, logits: np.ndarray, batch: dict[str, np.ndarray]) -> list[np.ndarray]:
        return list(logits)

    def answers(self, examples, features, logits: list[np.ndarray], evaluation: SpanSearch) -> list[int]:
        return [int(np.argmax(row)) for row in logits]

    def score(self, examples, features, logits: list[np.ndarray], evaluation: SpanSearch) -> dict[str, float]:
        predicted = np.array(self.answers(examples, features, logits, evaluation))
        gold = np.array([f.label for f in features])
        metrics = {"accuracy": float((predicted == gold).mean()), "n_examples": int(len(gold))}
        if len(self.label_names) > 2:
            f1s = []
            for k in range(len(self.label_names)):
                tp = np.sum((predicted == k) & (gold == k))
                denom = np.sum(predicted == k) + np.sum(gold == k)
                f1s.append(2 * tp / denom if denom else 0.0)
            metrics["macro_f1"] = float(np.mean(f1s))
        return metrics


class QATask:
    name = "qa"
    input_names = ("input_ids", "attention_mask", "token_type_ids")
    output_names = ("start_logits", "end_logits")
    label_names: list[str] = []
    per_token_outputs = True    # a start and an end score for every token
    has_classifier_outputs = False
    head_skips_pooler = True    # the span head reads token states, so the pooler gets no gradient (DDP must know)
    # Answers are spans chosen among near-equal scores: a tiny logit change can move a span by one word without
    # any loss of quality, so QA is gated on the metric, not on exact span agreement. F1 runs 0..100.
    gates_on_agreement = False
    metric_point = 1.0
    coreml_class_stem = "PocketBertQA"

    def __init__(self, label_names: list[str] | None = None):
        """Extractive QA has no label set; the argument keeps one constructor for every task."""

    @property
    def primary_metric(self) -> str:
        return "f1"

    def auto_model_class(self):
        from transformers import AutoModelForQuestionAnswering
        return AutoModelForQuestionAnswering

    def model_kwargs(self) -> dict[str, Any]:
        return {}

    @staticmethod
    def read_file(path: Path, label_names: list[str] | None) -> tuple[list[QAExample], list[str]]:
        """(examples, no label names) of a SQuAD-format JSON file."""
        return data_lib.read_squad_file(path), []

    @staticmethod
    def hub_examples(split) -> list[QAExample]:
        """The examples of a SQuAD-format Hugging Face dataset split."""
        return data_lib.hub_squad(split)

    @staticmethod
    def check_separation(train: list, eval_examples: list, train_source: str, eval_source: str) -> None:
        """No eval question, by id or by its passage, among the training questions."""
        data_lib.check_qa_separation(train, eval_examples, train_source, eval_source)

    def features(self, tokenizer, examples: list[QAExample], max_length: int, doc_stride: int | None = None):
        return qa_lib.build_qa_features(tokenizer, examples, max_length, doc_stride or max_length // 3)

    def collate(self, features: list[qa_lib.QAFeature], pad_id: int) -> dict[str, np.ndarray]:
        input_ids = _pad([f.input_ids for f in features], pad_id)
        lengths = np.array([len(f.input_ids) for f in features])
        mask = (np.arange(input_ids.shape[1])[None, :] < lengths[:, None]).astype(np.int64)
        return {
            "input_ids": input_ids,
            "attention_mask": mask,
            "token_type_ids": _pad([f.token_type_ids for f in features], 0),
            "start_positions": np.array([f.start_position for f in features]),
            "end_positions": np.array([f.end_position for f in features]),
        }

    def logits(self, outputs) -> torch.Tensor:
        import torch

        return torch.stack([outputs.start_logits, outputs.end_logits], dim=-1)  # [batch, length, 2]

    def output_tuple(self, outputs) -> tuple[torch.Tensor, ...]:
        return outputs.start_logits, outputs.end_logits

    def stack_outputs(self, arrays: list[np.ndarray]) -> np.ndarray:
        return np.stack([np.asarray(a) for a in arrays[:2]], axis=-1)

    def fit_row(self, row: np.ndarray, length: int, width: int) -> np.ndarray:
        return np.pad(row[:length], ((0, width - length), (0, 0)))

    def scorable(self, examples: list, features: list, n_run: int) -> tuple[list, list[int], list]:
        """Only examples all of whose windows were run can be scored; they are renumbered from 0."""
        run = features[:n_run]
        used = sorted({f.example_index for f in run})
        complete = [i for i in used if all(f.example_index != i for f in features[n_run:])]
        if not complete:
            raise ValueError(f"no complete QA example among the {n_run} windows run")
        return _examples_subset(examples, run, complete)

    def features_for_examples(self, features: list, n_examples: int) -> int:
        return sum(1 for f in features if f.example_index < n_examples)

    @staticmethod
    def checkpoint_labels(config) -> list[str]:
        """A span head has no labels."""
        return []

    def check_label_names(self, label_names: list[str], source: str) -> None:
        """Spans have no label set to disagree on."""

    def eval_inputs(self, examples: list) -> list:
        """A (question, context) pair per example, as the tokenizer takes it."""
        return [(ex.question, ex.context) for ex in examples]

    # The text-in model: a question and a context in; start and end logits out, with the token ids, their types
    # (1: context) and their code-point offsets in their own text, with which an app cuts the answer out of the
    # context.
    text_in_inputs = ("question", "context")
    text_in_extra_outputs = ("input_ids", "token_type_ids", "offset_mapping")
    # The QA model in one call (export/text_in/qa_graph.py): question and context in, the answer out.
    answers_in_graph = True

    def text_in_feeds(self, example) -> dict[str, np.ndarray]:
        return {"question": text_in_string(example.question, "question"),
                "context": text_in_string(example.context, "context")}

    def text_in_result(self, index: int, outputs: dict[str, np.ndarray]):
        types = [int(t) for t in np.asarray(outputs["token_type_ids"]).reshape(-1)]
        ids = [int(i) for i in np.asarray(outputs["input_ids"]).reshape(-1)]
        spans = np.asarray(outputs["offset_mapping"]).reshape(-1, 2)
        # The context's tokens, not its closing [SEP], have offsets into the context.
        offsets = [(int(a), int(b)) if t == 1 and k < len(ids) - 1 else None
                   for k, (t, (a, b)) in enumerate(zip(types, spans))]
        feature = qa_lib.QAFeature(index, ids, types, offsets)
        row = np.stack([np.asarray(outputs["start_logits"])[0], np.asarray(outputs["end_logits"])[0]], axis=-1)
        return feature, row

    def within_one_window(self, examples: list, features: list, logits: list) -> tuple[list, list, list]:
        """The examples whose question and context fit one window, renumbered: a text-in model reads one window
        (a longer context is windowed by the app, as the Python pipeline does)."""
        counts = np.bincount([f.example_index for f in features], minlength=len(examples))
        chosen, keep, renumbered = _examples_subset(examples, features, [i for i, n in enumerate(counts) if n == 1])
        return chosen, renumbered, [logits[k] for k in keep]

    def score_answers(self, examples, features, answers: list) -> dict[str, float]:
        metrics = qa_lib.squad_scores(examples, answers)
        metrics["n_examples"] = len(examples)
        return metrics

    def primary_scores(self, examples, features, answers: list) -> np.ndarray:
        """Each question's F1 in percent (the best over its gold answers): F1 is their mean."""
        return qa_lib.example_scores(examples, answers)[1]

    def hard_loss(self, logits: torch.Tensor, batch: dict[str, torch.Tensor], loss_fn=None) -> torch.Tensor:
        loss_fn = loss_fn or _losses().cross_entropy
        masked = logits.float().masked_fill(batch["attention_mask"][..., None] == 0, -1e4)
        return 0.5 * (loss_fn(masked[..., 0], batch["start_positions"]) + loss_fn(masked[..., 1], batch["end_positions"]))

    def require_unlabeled(self, what: str) -> None:
        raise ConfigError(f"{what} adds passages without questions, and extractive QA learns from a question with "
                          "its context: leave transfer.data empty and distill.augment off for QA")

    def unlabeled_examples(self, texts: list[str], what: str = "transfer data") -> list:
        self.require_unlabeled(what)
        return []

    def soft_loss(self, student: torch.Tensor, teacher: torch.Tensor, batch, temperature: float) -> torch.Tensor:
        mask, soft_target_kl = batch["attention_mask"], _losses().soft_target_kl
        return 0.5 * (soft_target_kl(student[..., 0], teacher[..., 0], temperature, mask)
                      + soft_target_kl(student[..., 1], teacher[..., 1], temperature, mask))

    def unbatch(self, logits: np.ndarray, batch: dict[str, np.ndarray]) -> list[np.ndarray]:
        lengths = batch["attention_mask"].sum(axis=1)
        return [row[:n] for row, n in zip(logits, lengths)]

    def answers(self, examples, features, logits: list[np.ndarray], evaluation: SpanSearch) -> list[str]:
        return qa_lib.best_spans(
            examples, features, [row[:, 0] for row in logits], [row[:, 1] for row in logits],
            n_best=evaluation.n_best, max_answer_length=evaluation.max_answer_length,
        )

    def score(self, examples, features, logits: list[np.ndarray], evaluation: SpanSearch) -> dict[str, float]:
        metrics = qa_lib.squad_scores(examples, self.answers(examples, features, logits, evaluation))
        metrics["n_examples"] = len(examples)
        return metrics


def features_digest(features: list, with_targets: bool):
    """A sha256 over the token ids (and the training targets) of features, in order."""
    import hashlib

    digest = hashlib.sha256()
    for f in features:
        digest.update(np.asarray(f.input_ids, dtype=np.int64).tobytes())
        if with_targets:
            if isinstance(f, TextFeature):
                target = f.label
            elif hasattr(f, "start_position"):
                target = (f.start_position, f.end_position)
            else:  # masked-LM features: the masked tokens
                target = f.labels
            digest.update(repr(target).encode())
        digest.update(b"|")
    return digest


TASK_CLASSES: dict[str, type[Task]] = {cls.name: cls for cls in (SentimentTask, QATask)}  # the one list of tasks
TASKS = tuple(TASK_CLASSES)


def check_task(task: str) -> str:
    if task not in TASKS:
        raise ConfigError(f"unknown task '{task}': choose one of {', '.join(TASKS)}")
    return task


def make_task(task: str, label_names: list[str] | None = None) -> Task:
    check_task(task)
    return TASK_CLASSES[task](label_names or [])
