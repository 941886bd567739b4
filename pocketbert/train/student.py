"""Students cut from their teacher: DistilBERT's choice of layers, embeddings and head copied."""

from __future__ import annotations

import copy
import re

from pocketbert.core.students.models import layer_count
from pocketbert.core.errors import ModelError

_LAYER_KEY = re.compile(r"^(.*\.layers?\.)(\d+)(\..*)$")


def default_layer_map(n_teacher_layers: int) -> list[int]:
    """DistilBERT's choice: every other teacher layer, starting with the first."""
    return list(range(0, n_teacher_layers, 2))


def build_student(teacher, layer_map: list[int] | None = None):
    """A student with len(layer_map) layers, embeddings and head copied, layer i initialised from teacher layer map[i]."""
    n_teacher = layer_count(teacher.config)
    layer_map = list(layer_map) if layer_map else default_layer_map(n_teacher)
    if any(not 0 <= i < n_teacher for i in layer_map):
        raise ModelError(f"layer map {layer_map} is out of range for a {n_teacher}-layer teacher (use 0..{n_teacher - 1})")
    config = copy.deepcopy(teacher.config)
    for attr in ("num_hidden_layers", "n_layers", "num_layers"):
        if hasattr(config, attr):
            setattr(config, attr, len(layer_map))
    student = type(teacher)(config)
    teacher_state = teacher.state_dict()
    student_state = {}
    for key in student.state_dict():
        match = _LAYER_KEY.match(key)
        source_key = f"{match[1]}{layer_map[int(match[2])]}{match[3]}" if match else key
        student_state[key] = teacher_state[source_key].clone()
    student.load_state_dict(student_state)
    student.config.pocketbert_layer_map = layer_map
    return student, layer_map
