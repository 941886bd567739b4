"""The shape of a student cut from the teacher, and the rules a shape must keep: what the teacher can give, and
what one BERT config can describe. Checked against the teacher's config before any work, by the layer-wise recipe
(train/narrow.py) and, for every rung at once, by the ladder before its first rung trains.
"""

from __future__ import annotations

from dataclasses import dataclass

from pocketbert.core.students.models import layer_count
from pocketbert.core.errors import ConfigError


def head_width(config) -> int:
    return config.hidden_size // config.num_attention_heads


@dataclass(frozen=True)
class StudentShape:
    layers: int
    hidden_size: int
    heads: int
    intermediate_size: int

    def describe(self) -> str:
        return (f"{self.layers} layers x {self.hidden_size} hidden ({self.heads} heads), "
                f"FFN {self.intermediate_size}")


def teacher_shape(config) -> StudentShape:
    return StudentShape(layer_count(config), config.hidden_size, config.num_attention_heads, config.intermediate_size)


def resolve_shape(config, student) -> StudentShape:
    """The student's shape from the recipe's student section (typed, or plain data), its unset parts filled from
    the teacher's config; ConfigError when the teacher cannot give it or BERT's config cannot describe it."""
    get = (lambda key: student.get(key)) if isinstance(student, dict) else (lambda key: getattr(student, key))
    teacher = teacher_shape(config)
    width = head_width(config)
    layer_map = get("layer_map")
    layers = get("layers") or (len(layer_map) if layer_map else max(1, teacher.layers // 2))
    heads, hidden = get("heads"), get("hidden_size")
    if hidden is not None and hidden % width:
        raise ConfigError(f"student.hidden_size {hidden} is not a whole number of the teacher's {width}-wide heads "
                          f"(a BERT head is hidden_size / heads wide, and a cut keeps each head whole): use a multiple "
                          f"of {width}, such as {max(width, hidden // width * width)} or {(hidden // width + 1) * width}")
    if hidden is not None and heads is not None and hidden != heads * width:
        raise ConfigError(f"student.hidden_size {hidden} holds {hidden // width} of the teacher's {width}-wide heads, "
                          f"not {heads}: set heads to {hidden // width}, or hidden_size to {heads * width}, or only one "
                          "of the two")
    hidden = hidden or (heads * width if heads else teacher.hidden_size)
    heads = heads or hidden // width
    intermediate = get("intermediate_size") or max(1, round(teacher.intermediate_size * hidden / teacher.hidden_size))
    shape = StudentShape(layers, hidden, heads, intermediate)
    limits = [("layers", layers, teacher.layers), ("hidden_size", hidden, teacher.hidden_size),
              ("heads", heads, teacher.heads), ("intermediate_size", intermediate, teacher.intermediate_size)]
    for key, asked, most in sorted(limits, key=lambda limit: get(limit[0]) is None):  # what was asked for first
        if asked > most:
            raise ConfigError(f"student.{key} {asked} is more than the teacher's {most}: a student cut from it can "
                              f"keep at most that many; ask for {most} or fewer")
    return shape


def default_layer_map(n_student: int, n_teacher: int) -> list[int]:
    """Teacher layers spread evenly, ending on the last (TinyBERT's uniform mapping): 3 of 6 are 1, 3, 5."""
    return [round(k * n_teacher / n_student) - 1 for k in range(1, n_student + 1)]


def check_layer_map(layer_map: list[int], n_teacher: int) -> None:
    if any(not 0 <= i < n_teacher for i in layer_map):
        raise ConfigError(f"student.layer_map {layer_map} is out of range for a {n_teacher}-layer teacher "
                          f"(use 0..{n_teacher - 1})")
