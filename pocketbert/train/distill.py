"""`pocketbert train distill`: the DistilBERT recipe, task-specific.

Student: half the teacher's layers, initialised from every other teacher layer, embeddings and head copied.
Loss: kl_weight * T² * KL(teacher/T || student/T) + ce_weight * CE(labels) + cos_weight * (1 - cos(hidden states)).
Rows without a gold label (transfer data, rewrites when distill.augment is on) take the soft losses alone.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from pocketbert.core.errors import ConfigError
from pocketbert.core.tasks import losses
from pocketbert.core.students import models, stage_folder
from pocketbert.train import registry, teacher_cache, trainer
from pocketbert.train.distillation import (PREDICTION_LOSS_ABLATIONS, TeacherDistillation, aligned_teacher_layers,
                                            loss_weights, prediction_losses)
from pocketbert.train.stage import StageRun, as_record
from pocketbert.train.student import build_student


def leaves_parameters_unused(task, weights: dict) -> bool:
    """Whether some student parameters get no gradient: QA's pooler always; the pooler and classifier when no
    loss reads the logits (a cosine-only distillation). DDP must then look for them every step."""
    return task.head_skips_pooler or not (weights["kl"] or weights["ce"])


def pretrained_student(source: str, teacher, teacher_tokenizer, task, aligns_hidden: bool):
    """A student loaded from a checkpoint (a fresh task head) rather than cut from the teacher; it must read the
    teacher's token ids, and align hidden states only when its width is the teacher's."""
    resolved = models.resolve_model_source(source)
    student_tokenizer = models.load_tokenizer(resolved)
    if student_tokenizer.get_vocab() != teacher_tokenizer.get_vocab():
        raise ConfigError(f"student '{source}' has another vocabulary than the teacher ({len(student_tokenizer)} vs "
                          f"{len(teacher_tokenizer)} tokens): pick a student that shares the teacher's tokenizer, "
                          "or leave student.model unset to cut one from the teacher")
    student = models.load_for_task(resolved, task)
    if aligns_hidden and student.config.hidden_size != teacher.config.hidden_size:
        raise ConfigError(f"student hidden size {student.config.hidden_size} differs from the teacher's "
                          f"{teacher.config.hidden_size}, so hidden states cannot be aligned: set --cos-weight 0")
    return student, None


def distillation_loss(task, teacher, cached, weights: dict, temperature: float, targets: list[int], hard_loss, dev):
    """(step_loss(forward_model, batch), batch_extras) of the DistilBERT recipe: teacher outputs from `cached`
    (put into each batch by batch_extras) when given, else from the teacher inside every step."""
    need_hidden = weights["cos"] > 0

    def teacher_step(inputs, batch):
        if cached is not None:
            return teacher_cache.teacher_targets(batch)
        with torch.no_grad():
            out = teacher(**inputs, output_hidden_states=need_hidden)
        return task.logits(out), [out.hidden_states[k] for k in targets] if need_hidden else None

    def step_loss(forward_model, batch):
        inputs = trainer.model_inputs(task, batch)
        t_logits, t_hidden = teacher_step(inputs, batch)
        s_out = forward_model(**inputs, output_hidden_states=need_hidden)
        s_logits = task.logits(s_out)
        parts = prediction_losses(task, s_logits, t_logits, batch, weights, temperature, hard_loss)
        if weights["cos"]:
            parts["cos"] = losses.hidden_cosine_loss(list(s_out.hidden_states[1:]), t_hidden, batch["attention_mask"])
        loss = sum(weights[k] * v for k, v in parts.items())
        return loss, parts

    extras = None if cached is None else (lambda idx, length: cached.as_batch(idx, length, dev))
    return step_loss, extras


class DistilBertRecipe(TeacherDistillation):
    """Half the teacher's layers (or a checkpoint), soft-target KL, hard-label loss and hidden-state cosine."""

    name = registry.DISTILBERT
    title = "DistilBERT"
    progress = "distill"
    # variant -> (what the ablation table calls it, the recipe keys it changes): Table 4 of Sanh et al. 2019
    ablation_variants: ClassVar[dict] = {
        "full": ("KL + CE + cosine, teacher init", {}),
        **PREDICTION_LOSS_ABLATIONS,
        "random_init": ("random student init", {"student.init": "random"}),
    }

    def check(self, run: StageRun) -> None:
        super().check(run)
        if run.recipe.student.shape_given():
            raise ConfigError("the distilbert recipe keeps the teacher's width and takes whole layers (--layer-map); "
                              f"a student of another shape (student.layers, hidden_size, heads, intermediate_size) "
                              f"is cut by --recipe {registry.LAYERWISE}")

    def build_model(self, run: StageRun):
        self.weights = loss_weights(run.recipe.distill)
        student_cfg = run.recipe.student
        if student_cfg.model:
            student, self.layer_map = pretrained_student(student_cfg.model, self.teacher, self.tokenizer,
                                                         self.task, self.weights["cos"] > 0)
        else:
            student, self.layer_map = build_student(self.teacher, student_cfg.layer_map)
            if student_cfg.init == "random":  # the ablation's control: no teacher weights
                student.apply(student._init_weights)
        self.targets = aligned_teacher_layers(models.layer_count(student.config),
                                              models.layer_count(self.teacher.config))
        return student

    def hidden_targets(self) -> list[int] | None:
        return self.targets if self.weights["cos"] > 0 else None

    def step_loss(self, run: StageRun, dev):
        return distillation_loss(self.task, self.teacher, self.cached, self.weights, float(run.recipe.distill.temperature),
                                 self.targets, self.hard_loss, dev)

    def unused_parameters(self) -> bool:
        return leaves_parameters_unused(self.task, self.weights)

    def checkpoint_identity(self, run: StageRun) -> dict:
        return {"cfg": as_record(run.section), "seed": run.seed, "layer_map": self.layer_map,
                "student": as_record(run.recipe.student), "teacher": self.teacher_sha}

    def save(self, run: StageRun, model, out) -> None:
        cfg = run.recipe.distill
        stage_folder.save_stage_model(model, self.tokenizer, out, self.task, int(cfg.max_length),
                                {"doc_stride": cfg.doc_stride, "layer_map": self.layer_map})

    def student_config(self, run: StageRun) -> dict:
        return {"layer_map": self.layer_map, "aligned_teacher_layers": self.targets}
