"""`pocketbert train distill --recipe layerwise`: a student of any depth and width cut from the teacher
(train/narrow.py), or of the same shape from random weights, distilled layer by layer (TinyBERT, MiniLM).

Student layer i learns from teacher layer layer_map[i], the one it was cut from:
  hidden     MSE of the layer's output against the teacher's, through the kept hidden channels (a random
             student: through a learned projection of its own states to the teacher's width, TinyBERT's W_h)
  embedding  the same for the embedding layer's output
  attention  KL of every student head's attention distribution from the teacher head it was cut from
  relation   MiniLM v2's query-query, key-key and value-value relations, split into relation heads that both
             widths divide, so heads need not correspond
then, as in the DistilBERT recipe, the soft-target KL at temperature T, the hard-label loss and the hidden
cosine (distill.kl_weight, ce_weight, cos_weight). Each weight 0 turns its loss off. The teacher's hidden
states are cached with its logits (the inputs of the mapped layers too: their queries, keys and values are the
teacher's own projections of them, computed in the step), so an epoch runs the teacher once.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import ClassVar

import torch
from pydantic import Field

from pocketbert.core.tasks import losses
from pocketbert.core.students import stage_folder, student_shape
from pocketbert.core.config.recipe import Section
from pocketbert.core.errors import ConfigError
from pocketbert.train import bert_layout, importance, narrow, registry, teacher_cache, trainer
from pocketbert.train.distill import leaves_parameters_unused
from pocketbert.train.distillation import (PREDICTION_LOSS_ABLATIONS, TeacherDistillation, loss_weights,
                                            prediction_losses)
from pocketbert.train.stage import StageRun, as_record

LAYERWISE_PARTS = ("hidden", "embedding", "attention", "relation")


class LayerwiseSection(Section):
    """Layer-wise distillation (TinyBERT, MiniLM), the recipe's `layerwise:` section: the weight of each loss
    between mapped layers (0 turns it off), beside distill:'s soft-target KL, hard-label loss and cosine. Student
    layer i learns from the teacher layer it was cut from (student.layer_map)."""

    hidden_weight: float = Field(1.0, ge=0)     # MSE of each layer's output: through the kept channels, or a
                                                # learned projection when the student starts random
    embedding_weight: float = Field(1.0, ge=0)  # MSE of the embedding layer's output, mapped the same way
    attention_weight: float = Field(1.0, ge=0)  # KL of every student head's attention to its teacher head's
    relation_weight: float = Field(1.0, ge=0)   # MiniLM v2: KL of the query-query, key-key and value-value relations
    relation_heads: int = Field(16, gt=0)       # relation heads both sides' query/key/value widths are split into
    importance_examples: int = Field(256, gt=0)  # training examples the teacher's channels, heads and neurons are
                                                 # ranked on before the cut


def layerwise_weights(recipe) -> dict[str, float]:
    """Every loss weight the recipe trains with: distill:'s kl, ce, cos and layerwise:'s four."""
    section = recipe.layerwise
    return {**loss_weights(recipe.distill), **{k: float(getattr(section, f"{k}_weight")) for k in LAYERWISE_PARTS}}


def teacher_states(layer_map: list[int], weights: dict) -> list[int]:
    """The teacher hidden states (0: the embedding layer's output, k: layer k-1's output) the losses read."""
    states = set()
    if weights["embedding"]:
        states.add(0)
    if weights["hidden"] or weights["cos"]:
        states.update(j + 1 for j in layer_map)
    if weights["attention"] or weights["relation"]:
        states.update(layer_map)  # a layer's input: its queries, keys and values are computed from it
    return sorted(states)


class StudentWithProjections(torch.nn.Module):
    """The student while it trains, with the learned projections its hidden states are compared through when it
    starts random (one per compared state, student width -> teacher width). Only the student is saved."""

    def __init__(self, student, projections: dict[int, torch.nn.Linear] | None = None):
        super().__init__()
        self.student = student
        self.projections = torch.nn.ModuleDict({str(k): p for k, p in (projections or {}).items()})

    @property
    def config(self):
        return self.student.config

    def set_attn_implementation(self, kernel: str) -> None:
        self.student.set_attn_implementation(kernel)

    def forward(self, **inputs):
        return self.student(**inputs)

    def to_teacher_width(self, state: int, hidden: torch.Tensor) -> torch.Tensor:
        """A student hidden state as it is compared with the teacher's: projected, or as it is (kept channels)."""
        key = str(state)
        return self.projections[key](hidden) if key in self.projections else hidden


def layerwise_loss(task, teacher, model: StudentWithProjections, cached, plan: narrow.CutPlan, weights: dict,
                   temperature: float, relation_heads: int, hard_loss, compare_through_channels: bool, dev):
    """(step_loss(forward_model, batch), batch_extras) of the layer-wise recipe; teacher outputs from `cached`
    (logits and the hidden states teacher_states names) when given, else from the teacher in every step."""
    states = teacher_states(plan.layer_map, weights)
    need_attention = bool(weights["attention"] or weights["relation"])
    kept_channels = torch.tensor(plan.hidden, device=dev) if compare_through_channels else None
    kept_heads = [torch.tensor(heads, device=dev) for heads in plan.heads]
    width = plan.head_width
    teacher_layers = bert_layout.encoder_layers(teacher)
    student_layers = bert_layout.encoder_layers(model.student)

    def teacher_step(inputs, batch):
        if cached is not None:
            logits, hidden = teacher_cache.teacher_targets(batch)
            return logits, dict(zip(states, hidden or []))
        with torch.no_grad():
            out = teacher(**inputs, output_hidden_states=bool(states))
        return task.logits(out), {k: out.hidden_states[k] for k in states}

    def teacher_side(hidden: torch.Tensor) -> torch.Tensor:
        return hidden.index_select(-1, kept_channels) if kept_channels is not None else hidden

    def as_heads(states_: torch.Tensor, heads=None) -> torch.Tensor:
        """[batch, tokens, heads * width] as [batch, heads, tokens, width], optionally only some heads."""
        split = states_.view(*states_.shape[:2], -1, width).transpose(1, 2)
        return split if heads is None else split.index_select(1, heads)

    def step_loss(forward_model, batch):
        inputs = trainer.model_inputs(task, batch)
        mask = batch["attention_mask"]
        t_logits, t_hidden = teacher_step(inputs, batch)
        s_out = forward_model(**inputs, output_hidden_states=True)
        s_hidden = s_out.hidden_states
        s_logits = task.logits(s_out)
        parts = prediction_losses(task, s_logits, t_logits, batch, weights, temperature, hard_loss)
        pairs = [(i + 1, j + 1) for i, j in enumerate(plan.layer_map)]  # (student state, teacher state)
        if weights["embedding"]:
            parts["embedding"] = losses.hidden_mse(model.to_teacher_width(0, s_hidden[0]), teacher_side(t_hidden[0]),
                                                   mask)
        if weights["hidden"]:
            parts["hidden"] = torch.stack([losses.hidden_mse(model.to_teacher_width(s, s_hidden[s]),
                                                             teacher_side(t_hidden[t]), mask) for s, t in pairs]).mean()
        if weights["cos"]:
            parts["cos"] = losses.hidden_cosine_loss([model.to_teacher_width(s, s_hidden[s]) for s, _ in pairs],
                                                     [teacher_side(t_hidden[t]) for _, t in pairs], mask)
        if need_attention:
            s_qkv, t_qkv = [], []  # per mapped layer, (queries, keys, values) of each side
            for i, j in enumerate(plan.layer_map):
                s_qkv.append(bert_layout.query_key_value(student_layers[i], s_hidden[i]))
                with torch.no_grad():
                    t_qkv.append(bert_layout.query_key_value(teacher_layers[j], t_hidden[j].to(s_hidden[i].dtype)))
            # every layer (and for relations every kind of vector) as more rows of one batch: one loss call each
            # instead of one per layer, which on a CPU is most of these losses' cost
            if weights["attention"]:
                n = len(plan.layer_map)
                parts["attention"] = losses.attention_kl(
                    torch.cat([as_heads(q) for q, _, _ in s_qkv]), torch.cat([as_heads(k) for _, k, _ in s_qkv]),
                    torch.cat([as_heads(q, kept_heads[i]) for i, (q, _, _) in enumerate(t_qkv)]),
                    torch.cat([as_heads(k, kept_heads[i]) for i, (_, k, _) in enumerate(t_qkv)]), mask.repeat(n, 1))
            if weights["relation"]:
                n = 3 * len(plan.layer_map)
                parts["relation"] = losses.relation_kl(torch.cat([x for layer in s_qkv for x in layer]),
                                                       torch.cat([x for layer in t_qkv for x in layer]),
                                                       mask.repeat(n, 1), relation_heads)
        loss = sum(weights[k] * v for k, v in parts.items())
        return loss, parts

    extras = None if cached is None else (lambda idx, length: cached.as_batch(idx, length, dev))
    return step_loss, extras


def check_relation_heads(relation_heads: int, student_config, teacher_config) -> None:
    """Both sides' query/key/value widths must split into the relation heads evenly."""
    widths = {"student": student_config.hidden_size, "teacher": teacher_config.hidden_size}
    uneven = {side: w for side, w in widths.items() if w % relation_heads}
    if uneven:
        side, w = next(iter(uneven.items()))
        common = [r for r in range(1, min(widths.values()) + 1) if all(v % r == 0 for v in widths.values())]
        raise ConfigError(f"layerwise.relation_heads {relation_heads} does not divide the {side}'s {w}-wide queries, "
                          f"keys and values: use one that divides {widths['student']} and {widths['teacher']} "
                          f"({', '.join(map(str, common[-4:]))}), or relation_weight 0")


class LayerwiseRecipe(TeacherDistillation):
    """A student cut from the teacher to student.layers / hidden_size / heads / intermediate_size (or random of that
    shape), distilled layer by layer as well as on the teacher's predictions."""

    name = registry.LAYERWISE
    title = "layer-wise"
    progress = "layer-wise distill"
    sections = {"layerwise": LayerwiseSection}
    # the student's shape (student: section, shared with every recipe that cuts a student)
    flags = {"layers": "student.layers", "hidden_size": "student.hidden_size", "heads": "student.heads",
             "intermediate_size": "student.intermediate_size"}
    # variant -> (what the ablation table calls it, the recipe keys it changes)
    ablation_variants: ClassVar[dict] = {
        "full": ("every loss, cut from the teacher", {}),
        **PREDICTION_LOSS_ABLATIONS,
        "no_hidden": ("− hidden-state MSE", {"layerwise.hidden_weight": 0.0}),
        "no_embedding": ("− embedding MSE", {"layerwise.embedding_weight": 0.0}),
        "no_attention": ("− attention KL", {"layerwise.attention_weight": 0.0}),
        "no_relation": ("− Q/K/V relations", {"layerwise.relation_weight": 0.0}),
        "random_init": ("same shape, random start", {"student.init": "random"}),
    }

    def check(self, run: StageRun) -> None:
        super().check(run)
        if run.recipe.student.model:
            raise ConfigError("the layerwise recipe cuts its student from the teacher: leave student.model "
                              "(--student-model) unset, or use --recipe distilbert to start from a checkpoint")

    def build_model(self, run: StageRun):
        recipe = run.recipe
        self.weights = layerwise_weights(recipe)
        if not any(self.weights.values()):
            raise ConfigError("every loss weight of the layerwise recipe is 0: give at least one a weight")
        teacher_config = self.teacher.config
        self.shape = narrow.resolve_shape(teacher_config, recipe.student)
        n_teacher = narrow.teacher_shape(teacher_config).layers
        layer_map = list(recipe.student.layer_map or narrow.default_layer_map(self.shape.layers, n_teacher))
        narrow.check_layer_map(layer_map, n_teacher)
        relation_heads = int(recipe.layerwise.relation_heads)
        if self.weights["relation"]:
            check_relation_heads(relation_heads, self.shape, teacher_config)
        self.importance = self._importance(run)
        self.plan = narrow.plan_cut(self.importance, self.shape, layer_map, student_shape.head_width(teacher_config))
        student = narrow.cut_student(self.teacher, self.plan)
        self.random_start = recipe.student.init == "random"
        projections = None
        if self.random_start:  # no teacher weights: its channels correspond to none of the teacher's
            student = narrow.random_like(student)
            compared = [0] if self.weights["embedding"] else []
            if self.weights["hidden"] or self.weights["cos"]:
                compared += [i + 1 for i in range(len(layer_map))]
            projections = {k: torch.nn.Linear(self.shape.hidden_size, teacher_config.hidden_size, bias=False)
                           for k in compared}
        self.model = StudentWithProjections(student, projections)
        return self.model

    def _importance(self, run: StageRun):
        cfg = run.section
        examples = trainer.labelled_examples(self.data, cfg, run.seed)[:run.recipe.layerwise.importance_examples]
        features = self.task.features(self.tokenizer, examples, cfg.max_length, cfg.doc_stride)
        return importance.measure(self.teacher, self.task, features, self.tokenizer.pad_token_id,
                                  run.recipe.eval.batch_size)

    def hidden_targets(self) -> list[int] | None:
        return teacher_states(self.plan.layer_map, self.weights) or None

    def step_loss(self, run: StageRun, dev):
        return layerwise_loss(self.task, self.teacher, self.model, self.cached, self.plan, self.weights,
                              float(run.recipe.distill.temperature), int(run.recipe.layerwise.relation_heads),
                              self.hard_loss, not self.random_start, dev)

    def unused_parameters(self) -> bool:
        return leaves_parameters_unused(self.task, self.weights)

    def checkpoint_identity(self, run: StageRun) -> dict:
        return {"cfg": as_record(run.section), "seed": run.seed, "plan": self.plan.to_json(),
                "student": as_record(run.recipe.student), "layerwise": as_record(run.recipe.layerwise),
                "teacher": self.teacher_sha}

    def evaluate(self, run: StageRun, model, dev) -> dict:
        return super().evaluate(run, model.student, dev)

    def save(self, run: StageRun, model, out) -> None:
        cfg = run.recipe.distill
        stage_folder.save_stage_model(model.student, self.tokenizer, out, self.task, int(cfg.max_length),
                                      {"doc_stride": cfg.doc_stride, "layer_map": self.plan.layer_map,
                                       "cut": {**self.plan.to_json(), "init": run.recipe.student.init}})

    def student_config(self, run: StageRun) -> dict:
        return {"layer_map": self.plan.layer_map, "shape": asdict(self.shape), "init": run.recipe.student.init,
                "hidden_compared_through": "learned projection" if self.random_start else "kept channels"}

    def student_metrics(self, model) -> dict:
        return {"parameters": sum(p.numel() for p in model.student.parameters()),
                "importance_examples": self.importance.examples}
