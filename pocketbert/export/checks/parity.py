"""The parity gate: each exported model, on its own runtime, must give the student's answers on real examples."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from pocketbert.core.config.recipe import EvalSection

# Named tolerances. Agreement is the share of examples whose answer (label, or QA span) equals the student's.
FP32_MAX_ABS_DIFF = 1e-3     # ONNX fp32 against PyTorch: only float reordering separates them
FP32_MIN_AGREEMENT = 0.999
FP16_MAX_ABS_DIFF = 0.1      # Core ML computes in fp16
FP16_MIN_AGREEMENT = 0.99
# Tasks whose answers are not gated on agreement (QA spans: see QATask.gates_on_agreement) are gated on the
# task metric instead: at most this many points of it lost.
MAX_POINTS_LOST_WITHOUT_AGREEMENT = 1.0
# Every int8 model (dynamic, static) and compressed Core ML weights (int8, palettes, int4 blocks) trade a few
# answers for size by design: they are gated on the task metric, at most one point lost; agreement is reported.
COMPRESSED_MAX_POINTS_LOST = 1.0
# Metrics are shares of counts: a drop of exactly the bound (2 answers of 200 are 1 point) lands a hair above it in
# floats (157/200 - 155/200 = 0.010000000000000009). A difference this small is rounding, not a lost answer.
METRIC_ROUNDING = 1e-9


@dataclass(frozen=True)
class Tolerance:
    min_agreement: float | None    # None: agreement reported, not gated
    max_abs_diff: float | None     # None: reported, not gated (int8 logits move by design)
    max_metric_drop: float | None = None  # in the task metric's own units


@dataclass(frozen=True)
class Gate:
    """How one export variant is held to the student's answers, whatever the task."""

    max_abs_diff: float | None
    min_agreement: float | None = None     # where the task gates on agreement
    max_points_lost: float | None = None   # of the task's primary metric, for every task
    agree_for_every_task: bool = False     # gate on agreement also where the task gates on its metric (QA)
    max_points_apart: float | None = None  # every metric (QA: exact match and F1) at most this far from the student's

    def tolerance(self, task) -> Tolerance:
        if self.agree_for_every_task:
            return Tolerance(self.min_agreement, self.max_abs_diff)
        if self.max_points_lost is not None:
            return Tolerance(None, self.max_abs_diff, self.max_points_lost * task.metric_point)
        if task.gates_on_agreement:
            return Tolerance(self.min_agreement, self.max_abs_diff)
        return Tolerance(None, self.max_abs_diff, MAX_POINTS_LOST_WITHOUT_AGREEMENT * task.metric_point)


FP32_GATE = Gate(FP32_MAX_ABS_DIFF, FP32_MIN_AGREEMENT)
FP16_GATE = Gate(FP16_MAX_ABS_DIFF, FP16_MIN_AGREEMENT)
COMPRESSED_GATE = Gate(None, max_points_lost=COMPRESSED_MAX_POINTS_LOST)
# A text-in model in fp32 is the student fed by its own tokenizer: its answers (labels, QA answers' word pieces)
# must agree with the student's on at least this share of examples, whatever the task. A tokenization that
# differs anywhere shows as a lost answer, not as a |diff| (different token counts have none).
TEXT_IN_MIN_AGREEMENT = 0.99
TEXT_IN_GATE = Gate(None, TEXT_IN_MIN_AGREEMENT, agree_for_every_task=True)
# QA in one call (export/text_in/qa_graph.py) in fp32: its answers (windows, span search and text in the graph) must equal
# the Python pipeline's (core/tasks/qa.py on the student's logits) on this share of questions, and its exact match and
# F1 lie within this many points of the pipeline's.
QA_IN_GRAPH_MIN_AGREEMENT = 0.99
QA_IN_GRAPH_MAX_POINTS_APART = 0.2
# Classifier outputs are probabilities: their logs differ from logits by a per-row constant, so no |diff| gate.
PROBABILITY_GATE = Gate(None, FP16_MIN_AGREEMENT)
QA_IN_GRAPH_GATE = Gate(None, QA_IN_GRAPH_MIN_AGREEMENT, agree_for_every_task=True,
                        max_points_apart=QA_IN_GRAPH_MAX_POINTS_APART)


@dataclass
class ParityResult:
    artifact: str
    runtime: str
    precision: str
    n_examples: int
    max_abs_diff: float
    agreement: float
    metrics: dict
    student_metrics: dict
    min_agreement: float | None
    max_abs_diff_allowed: float | None
    max_metric_drop: float | None
    passed: bool
    seconds_per_sequence: float | None = None  # the runtime's time per model input (a QA example has several)
    by_length: dict | None = None  # a model of enumerated lengths: each length checked on its own (check_lengths)
    by_windows: dict | None = None  # QA in one call: questions of one window and of several, each on its own
    app_runtimes: dict | None = None  # an .ort: the gate on each ONNX Runtime version the app folders name
    # The standard error of the primary metric's drop (paired, over the examples gated): how far the drop measured
    # on these examples may lie from the drop on others. Answers near a tie (a QA span) move under int8 both ways.
    drop_standard_error: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def failure(self) -> str:
        older = [f"ONNX Runtime {v} ({r['platform']})" for v, r in (self.app_runtimes or {}).items()
                 if not r.get("passed", True)]
        if older and self.agreement >= (self.min_agreement or 0.0):
            return (f"{self.artifact} gives other answers on {', '.join(older)} than on the export's runtime: "
                    "ship the .onnx file instead, or export with that ONNX Runtime version")
        short = [f"length {n}: max |diff| {r['max_abs_diff']:.4g}" for n, r in (self.by_length or {}).items()
                 if not r["passed"]]
        if short and self.agreement >= (self.min_agreement or 0.0):
            return (f"{self.artifact} on {self.runtime} no longer gives the student's logits at one of its enumerated "
                    f"lengths ({'; '.join(short)}, allowed {self.max_abs_diff_allowed})")
        if self.by_windows and self.by_windows.get("span_mismatches"):
            return (f"{self.artifact}: {self.by_windows['span_mismatches']} answers are not the context's text at the "
                    "character spans the model gives")
        needs = f" (needs >= {self.min_agreement})" if self.min_agreement is not None else ""
        allowed = f" (allowed {self.max_abs_diff_allowed})" if self.max_abs_diff_allowed is not None else ""
        metric = "; ".join(f"{k} {self.metrics[k]:.4f} vs student {v:.4f}" for k, v in self.student_metrics.items()
                           if isinstance(v, float))
        if self.drop_standard_error is not None:
            metric += f" (the drop's standard error on these {self.n_examples}: {self.drop_standard_error:.4f})"
        return (f"{self.artifact} on {self.runtime} no longer gives the student's answers: agreement "
                f"{self.agreement:.4f}{needs}, max |diff| {self.max_abs_diff:.4g}{allowed}, {metric}")


def compare(task, examples, features, student_logits: list[np.ndarray], artifact_logits: list[np.ndarray],
            evaluation: EvalSection, artifact: str, runtime: str, precision: str, gate: Gate) -> ParityResult:
    """Agreement, max |logit difference| and task metrics of one artifact against the student."""
    examples, keep, feats = task.scorable(examples, features, len(artifact_logits))
    ref, artifact_logits = [student_logits[k] for k in keep], [artifact_logits[k] for k in keep]
    max_diff = max(float(np.max(np.abs(a - r))) for a, r in zip(artifact_logits, ref))
    ours = task.answers(examples, feats, artifact_logits, evaluation)
    theirs = task.answers(examples, feats, ref, evaluation)
    metrics = task.score(examples, feats, artifact_logits, evaluation)
    student_metrics = task.score(examples, feats, ref, evaluation)
    result = _result(task, ours, theirs, max_diff, metrics, student_metrics, artifact, runtime, precision, gate)
    return _with_standard_error(result, task, examples, feats, ours, theirs)


def compare_text_in(task, examples, features, student_logits: list[np.ndarray], own_features: list,
                    artifact_logits: list[np.ndarray], evaluation: EvalSection, artifact: str, runtime: str,
                    precision: str, gate: Gate) -> ParityResult:
    """A text-in model against the student: its answers read from its own tokenization (own_features; None where
    it returns only logits, as a sentence classifier does), compared as answers that mean the same whatever the
    tokenization (labels, or a QA answer's text cut out of the context). Logits of different tokenizations have no
    difference."""
    own = [o if o is not None else f for o, f in zip(own_features, features)]
    max_diff = max(float(np.max(np.abs(a - r))) if np.shape(a) == np.shape(r) else float("inf")
                   for a, r in zip(artifact_logits, student_logits))
    ours = task.answers(examples, own, artifact_logits, evaluation)
    theirs = task.answers(examples, features, student_logits, evaluation)
    metrics = task.score_answers(examples, features, ours)
    student_metrics = task.score_answers(examples, features, theirs)
    result = _result(task, ours, theirs, max_diff, metrics, student_metrics, artifact, runtime, precision, gate)
    return _with_standard_error(result, task, examples, features, ours, theirs)


def compare_answers(task, examples, features, student_logits: list[np.ndarray], answers: list[dict],
                    span_mismatches: int, evaluation: EvalSection, artifact: str, runtime: str, precision: str,
                    gate: Gate) -> ParityResult:
    """A QA model in one call against the Python pipeline (core/tasks/qa.py's windows and span search on the student's
    logits): answers compared as text, all questions and those of one window and of several counted apart."""
    ours = [a["answer"] for a in answers]
    theirs = task.answers(examples, features, student_logits, evaluation)
    metrics = task.score_answers(examples, features, ours)
    student_metrics = task.score_answers(examples, features, theirs)
    result = _with_standard_error(
        _result(task, ours, theirs, 0.0, metrics, student_metrics, artifact, runtime, precision, gate),
        task, examples, features, ours, theirs)
    windows = np.bincount([f.example_index for f in features], minlength=len(examples))
    by_windows = {"span_mismatches": span_mismatches,
                  # a cut context has fewer windows than the pipeline's, by design
                  "windows_differ": int(sum(a["windows"] != n and not a["context_cut"]
                                            for a, n in zip(answers, windows))),
                  "contexts_cut": int(sum(a["context_cut"] for a in answers))}
    for name, chosen in (("one_window", windows == 1), ("several_windows", windows > 1)):
        picked = [k for k in range(len(examples)) if chosen[k]]
        sub = [examples[k] for k in picked]
        by_windows[name] = {
            "questions": len(picked),
            "agreement": float(np.mean([ours[k] == theirs[k] for k in picked])) if picked else None,
            "metrics": task.score_answers(sub, [], [ours[k] for k in picked]) if picked else None,
            "pipeline_metrics": task.score_answers(sub, [], [theirs[k] for k in picked]) if picked else None}
    result.by_windows = by_windows
    apart = max(abs(metrics[k] - student_metrics[k]) for k in ("exact_match", "f1"))
    result.passed = (result.passed and span_mismatches == 0 and by_windows["windows_differ"] == 0
                     and (gate.max_points_apart is None or apart <= gate.max_points_apart))
    return result


def drop_standard_error(task, examples, features, ours: list, theirs: list) -> float:
    """The standard error of the primary metric's drop from the student's answers (theirs) to the artifact's (ours),
    paired over the examples: only the examples whose answers differ spread it."""
    drops = task.primary_scores(examples, features, theirs) - task.primary_scores(examples, features, ours)
    if len(drops) < 2:
        return float("nan")
    return float(drops.std(ddof=1) / np.sqrt(len(drops)))


def _with_standard_error(result: ParityResult, task, examples, features, ours: list, theirs: list) -> ParityResult:
    result.drop_standard_error = drop_standard_error(task, examples, features, ours, theirs)
    return result


def _result(task, ours: list, theirs: list, max_diff: float, metrics: dict, student_metrics: dict, artifact: str,
            runtime: str, precision: str, gate: Gate) -> ParityResult:
    agreement = float(np.mean([a == b for a, b in zip(ours, theirs)]))
    tolerance = gate.tolerance(task)
    primary = task.primary_metric
    passed = (
        (tolerance.min_agreement is None or agreement >= tolerance.min_agreement)
        and (tolerance.max_abs_diff is None or max_diff <= tolerance.max_abs_diff)
        and (tolerance.max_metric_drop is None
             or student_metrics[primary] - metrics[primary] <= tolerance.max_metric_drop + METRIC_ROUNDING)
    )
    return ParityResult(
        artifact=artifact, runtime=runtime, precision=precision, n_examples=len(ours),
        max_abs_diff=max_diff, agreement=agreement,
        metrics=metrics, student_metrics=student_metrics,
        min_agreement=tolerance.min_agreement, max_abs_diff_allowed=tolerance.max_abs_diff,
        max_metric_drop=tolerance.max_metric_drop, passed=passed,
    )


# Each enumerated length is checked on this many eval inputs that fit it, the longest first (its padding is real).
INPUTS_PER_LENGTH = 32


def check_lengths(task, features: list, student_logits: list[np.ndarray], lengths: tuple[int, ...], open_at_length,
                  pad_id: int, gate: Gate, batch_size: int = 1) -> dict:
    """For a model that takes only some lengths: its logits with every input padded to each length, against the
    student's, so that a length no eval input needs is proven too (batch_size inputs to a call of the forward)."""
    from pocketbert.core.students.inference import batched_logits

    checked = {}
    for length in lengths:
        fitting = sorted((k for k, f in enumerate(features) if len(f.input_ids) <= length),
                         key=lambda k: -len(features[k].input_ids))[:INPUTS_PER_LENGTH]
        if not fitting:
            continue
        logits = batched_logits(task, [features[k] for k in fitting], pad_id, batch_size, open_at_length(length))
        diff = max(float(np.max(np.abs(a - student_logits[k]))) for a, k in zip(logits, fitting))
        checked[str(length)] = {"inputs": len(fitting), "max_abs_diff": diff,
                                "passed": gate.max_abs_diff is None or diff <= gate.max_abs_diff}
    return checked
