"""The int8 gate allows at most one point of the metric lost: exactly one point passes, whatever floats say."""

from __future__ import annotations

from pocketbert.core.tasks.registry import make_task
from pocketbert.export.checks import parity

EXAMPLES = 200  # a parity set where two answers are one point


def gate_on(student_right: int, exported_right: int) -> bool:
    task = make_task("sentiment", ["negative", "positive"])
    theirs = [1] * EXAMPLES
    ours = [1] * EXAMPLES
    flipped = student_right - exported_right
    for k in range(flipped):
        ours[k] = 0
    result = parity._result(task, ours, theirs, 0.1, {"accuracy": exported_right / EXAMPLES},
                            {"accuracy": student_right / EXAMPLES}, "model.int8.onnx", "onnxruntime", "int8",
                            parity.COMPRESSED_GATE)
    return result.passed


def test_exactly_one_point_lost_passes_and_more_fails():
    assert 157 / EXAMPLES - 155 / EXAMPLES > 0.01  # the float rounding the gate must not read as a lost answer
    assert gate_on(157, 155)
    assert not gate_on(157, 154)
    assert gate_on(157, 157)
