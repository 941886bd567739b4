"""Students of any depth and width cut from the teacher (Minitron's recipe, Muralidharan et al. 2024).

Depth: the student's layers are teacher layers (student.layer_map; by default spread evenly and ending on the
last, TinyBERT's uniform mapping). Width: the most important hidden channels, heads and FFN neurons
(train/importance.py) are kept and the rest removed with torch-pruning's dependency graph, which follows each
hidden channel through the whole residual stream (the embeddings, every LayerNorm, every projection that reads
or writes it, the pooler and the head) and each head through its query, key and value rows and the output
projection's columns. Heads keep their width, because transformers builds a BERT head hidden_size /
num_attention_heads wide: the shape is one config (hidden_size, num_attention_heads, intermediate_size,
num_hidden_layers) that describes every layer, so the student saves and reloads as an ordinary Hugging Face
folder. A shape that config cannot express, or that the teacher cannot give, is refused in one line.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass

import torch

from pocketbert.core.errors import ModelError, require
from pocketbert.core.students.student_shape import (  # noqa: F401  (the shape rules, shared with the ladder's check)
    StudentShape,
    check_layer_map,
    default_layer_map,
    resolve_shape,
    teacher_shape,
)
from pocketbert.train import bert_layout
from pocketbert.train.student import build_student


@dataclass
class CutPlan:
    """Which of the teacher's parts the student keeps, every list ascending: the layer-wise losses compare the
    student with the teacher through it, and inspect reads it from the student folder."""

    layer_map: list[int]         # student layer i is teacher layer layer_map[i]
    hidden: list[int]            # residual-stream channels
    heads: list[list[int]]       # per student layer, the heads of its teacher layer
    ffn: list[list[int]]         # per student layer, the FFN neurons of its teacher layer
    pooler: list[int] | None     # pooler channels (a classifier's), None without a pooler
    head_width: int

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "CutPlan":
        return cls(**data)


def _top(values: torch.Tensor, k: int) -> list[int]:
    """The k largest entries' indices, ascending (stable: ties go to the lower index)."""
    order = torch.argsort(values, descending=True, stable=True)
    return sorted(order[:k].tolist())


def plan_cut(importance, shape: StudentShape, layer_map: list[int], head_width: int) -> CutPlan:
    return CutPlan(
        layer_map=list(layer_map),
        hidden=_top(importance.hidden, shape.hidden_size),
        heads=[_top(importance.heads[j], shape.heads) for j in layer_map],
        ffn=[_top(importance.ffn[j], shape.intermediate_size) for j in layer_map],
        pooler=None if importance.pooler is None else _top(importance.pooler, shape.hidden_size),
        head_width=head_width,
    )


def _dropped(kept: list[int], size: int) -> list[int]:
    keep = set(kept)
    return [i for i in range(size) if i not in keep]


def cut_student(teacher, plan: CutPlan):
    """A new model of the plan's shape holding the teacher's kept weights; the teacher is left as it was."""
    tp = require("torch_pruning", "train")
    student, _ = build_student(teacher, plan.layer_map)  # depth: a copy with the chosen layers
    student.eval()
    config = student.config
    width = plan.head_width
    embeddings = student.get_input_embeddings()
    example = {"input_ids": torch.randint(5, embeddings.num_embeddings, (1, 12)),
               "attention_mask": torch.ones(1, 12, dtype=torch.long)}
    graph = tp.DependencyGraph().build_dependency(
        student, example_inputs=example,
        output_transform=lambda out: sum(v.float().sum() for v in out.values() if torch.is_tensor(v)))

    def prune(module, how, dropped: list[int]) -> None:
        if dropped:  # one group: every layer that reads or writes these channels loses them together
            graph.get_pruning_group(module, how, idxs=dropped).prune()

    prune(embeddings, tp.prune_embedding_out_channels, _dropped(plan.hidden, config.hidden_size))
    for layer, heads, neurons in zip(bert_layout.encoder_layers(student), plan.heads, plan.ffn):
        dropped_heads = _dropped(heads, config.num_attention_heads)
        query = bert_layout.attention_projections(layer)[0]
        prune(query, tp.prune_linear_out_channels, [h * width + c for h in dropped_heads for c in range(width)])
        prune(bert_layout.ffn_up(layer).dense, tp.prune_linear_out_channels,
              _dropped(neurons, config.intermediate_size))
    pooler = bert_layout.pooler(student)
    if pooler is not None and plan.pooler is not None:
        prune(pooler.dense, tp.prune_linear_out_channels, _dropped(plan.pooler, config.hidden_size))

    narrow = copy.deepcopy(config)
    narrow.hidden_size = len(plan.hidden)
    narrow.num_attention_heads = len(plan.heads[0]) if plan.heads else config.num_attention_heads
    narrow.intermediate_size = len(plan.ffn[0]) if plan.ffn else config.intermediate_size
    return rebuilt_from_config(student, narrow)


def rebuilt_from_config(model, config):
    """A fresh model built from `config` alone, holding `model`'s weights: proof that the config describes every
    layer (what from_pretrained will do), and no module keeps a size the pruner left behind."""
    fresh = type(model)(config)
    state = model.state_dict()
    expected = fresh.state_dict()
    wrong = [f"{k} {tuple(v.shape)} (config says {tuple(expected[k].shape)})"
             for k, v in state.items() if k in expected and v.shape != expected[k].shape]
    unmatched = sorted(set(expected) ^ set(state))
    if wrong or unmatched:
        raise ModelError(f"the cut student's weights do not match its config: {(wrong + unmatched)[0]}; this model "
                         "type cannot be cut to this shape, use --recipe distilbert")
    fresh.load_state_dict(state)
    return fresh.eval()


def random_like(model):
    """The same config with fresh random weights (transformers initialises a model built from a config): the
    control that shows what the teacher's weights bring."""
    return type(model)(copy.deepcopy(model.config)).eval()
