"""The parity gate: each exported model, on its own runtime, must give the student's answers on real examples."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

# Named tolerances. Agreement is the share of examples whose answer (label, or QA span) equals the student's.
FP32_MAX_ABS_DIFF = 1e-3     # ONNX fp32 against PyTorch: only float reordering separates them
FP32_MIN_AGREEMENT = 0.999
FP16_MAX_ABS_DIFF = 0.1      # Core ML computes in fp16
FP16_MIN_AGREEMENT = 0.99
# QA answers are spans chosen among near-equal scores, so a tiny logit change can move a span by one word
# without any loss of quality: QA is gated on the metric (F1 points) instead of exact span agreement.
QA_MAX_F1_DROP = 1.0
# Every int8 model (dynamic, static) and compressed Core ML weights (int8, palettes, int4 blocks) trade a few
# answers for size by design: they are gated on the task metric, at most one point lost; agreement is reported.
SENTIMENT_MAX_ACCURACY_DROP = 0.01
COMPRESSED = ("int8-static", "int8-weights", "6bit", "4bit", "int4-block")


@dataclass(frozen=True)
class Tolerance:
    min_agreement: float | None    # None: agreement reported, not gated
    max_abs_diff: float | None     # None: reported, not gated (int8 logits move by design)
    max_metric_drop: float | None = None  # in the task metric's own points


TOLERANCES = {
    ("sentiment", "fp32"): Tolerance(FP32_MIN_AGREEMENT, FP32_MAX_ABS_DIFF),
    ("sentiment", "fp16"): Tolerance(FP16_MIN_AGREEMENT, FP16_MAX_ABS_DIFF),
    ("sentiment", "int8"): Tolerance(None, None, SENTIMENT_MAX_ACCURACY_DROP),
    ("qa", "fp32"): Tolerance(None, FP32_MAX_ABS_DIFF, QA_MAX_F1_DROP),
    ("qa", "fp16"): Tolerance(None, FP16_MAX_ABS_DIFF, QA_MAX_F1_DROP),
    ("qa", "int8"): Tolerance(None, None, QA_MAX_F1_DROP),
    # classifier outputs are probabilities: their logs differ from logits by a per-row constant
    ("sentiment", "probabilities"): Tolerance(FP16_MIN_AGREEMENT, None),
    **{("sentiment", p): Tolerance(None, None, SENTIMENT_MAX_ACCURACY_DROP) for p in COMPRESSED},
    **{("qa", p): Tolerance(None, None, QA_MAX_F1_DROP) for p in COMPRESSED},
}


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

    def to_dict(self) -> dict:
        return asdict(self)

    def failure(self) -> str:
        needs = f" (needs >= {self.min_agreement})" if self.min_agreement is not None else ""
        allowed = f" (allowed {self.max_abs_diff_allowed})" if self.max_abs_diff_allowed is not None else ""
        metric = "; ".join(f"{k} {self.metrics[k]:.4f} vs student {v:.4f}" for k, v in self.student_metrics.items()
                           if isinstance(v, float))
        return (f"{self.artifact} on {self.runtime} no longer gives the student's answers: agreement "
                f"{self.agreement:.4f}{needs}, max |diff| {self.max_abs_diff:.4g}{allowed}, {metric}")


def compare(task, examples, features, student_logits: list[np.ndarray], artifact_logits: list[np.ndarray],
            eval_cfg: dict, artifact: str, runtime: str, precision: str) -> ParityResult:
    """Agreement, max |logit difference| and task metrics of one artifact against the student."""
    n_features = len(artifact_logits)
    feats, ref = features[:n_features], student_logits[:n_features]
    if task.name == "qa":
        used = sorted({f.example_index for f in feats})
        # Only examples all of whose windows were run can be scored.
        complete = [i for i in used if all(f.example_index != i for f in features[n_features:])]
        if not complete:
            raise ValueError(f"no complete QA example among the {n_features} windows run on {artifact}")
        index = {old: new for new, old in enumerate(complete)}
        keep = [k for k, f in enumerate(feats) if f.example_index in index]
        examples = [examples[i] for i in complete]
        feats = [_reindex(feats[k], index) for k in keep]
        ref, artifact_logits = [ref[k] for k in keep], [artifact_logits[k] for k in keep]
    max_diff = max(float(np.max(np.abs(a - r))) for a, r in zip(artifact_logits, ref))
    ours = task.answers(examples, feats, artifact_logits, eval_cfg)
    theirs = task.answers(examples, feats, ref, eval_cfg)
    agreement = float(np.mean([a == b for a, b in zip(ours, theirs)]))
    tolerance = TOLERANCES[(task.name, precision)]
    metrics = task.score(examples, feats, artifact_logits, eval_cfg)
    student_metrics = task.score(examples, feats, ref, eval_cfg)
    primary = task.primary_metric
    passed = (
        (tolerance.min_agreement is None or agreement >= tolerance.min_agreement)
        and (tolerance.max_abs_diff is None or max_diff <= tolerance.max_abs_diff)
        and (tolerance.max_metric_drop is None
             or student_metrics[primary] - metrics[primary] <= tolerance.max_metric_drop)
    )
    return ParityResult(
        artifact=artifact, runtime=runtime, precision=precision, n_examples=len(ours),
        max_abs_diff=max_diff, agreement=agreement,
        metrics=metrics, student_metrics=student_metrics,
        min_agreement=tolerance.min_agreement, max_abs_diff_allowed=tolerance.max_abs_diff,
        max_metric_drop=tolerance.max_metric_drop, passed=passed,
    )


def _reindex(feature, index):
    import copy

    clone = copy.copy(feature)
    clone.example_index = index[feature.example_index]
    return clone
