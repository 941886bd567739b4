"""`pocketbert train distill --recipe static`: the static-embedding rung, a Model2Vec-style table and a classifier.

Student: one vector per vocabulary id, distilled from the teacher's encoder with no data (train/static_table.py),
averaged over the sentence's word pieces, then a small classifier (core/students/static_embedding.py).
Loss: kl_weight * T² * KL(teacher/T || student/T) + ce_weight * CE(labels), as in the DistilBERT recipe; rows
without a gold label (transfer data, rewrites when distill.augment is on) take the soft loss alone. The table is
trained with the classifier unless static.freeze_embeddings.
Sentence classification only: a static student gives every token the same vector wherever it stands, so it has
no per-token output for an extractive-QA answer span.
"""

from __future__ import annotations

import time
from typing import Optional

import torch
from pydantic import Field

from pocketbert.core.errors import ConfigError
from pocketbert.core.students import stage_folder
from pocketbert.core.students.architectures import STATIC
from pocketbert.core.config.recipe import Section
from pocketbert.core.students.static_embedding import StaticEmbeddingClassifier, StaticEmbeddingConfig
from pocketbert.core.tasks.registry import TASK_CLASSES
from pocketbert.train import registry, static_table, teacher_cache, trainer
from pocketbert.train.distillation import (TeacherDistillation, loss_weights, prediction_losses,
                                            transfer_set_report)
from pocketbert.train.stage import StageRun, as_record


class StaticSection(Section):
    """The static-embedding student (the recipe's `static:` section): a table distilled from the teacher's encoder
    (train/static_table.py), averaged over the sentence, and a small classifier trained on the teacher's labels."""

    pca_dims: int = Field(256, gt=0)  # the table's width, at most the teacher's hidden size
    sif_coefficient: Optional[float] = Field(1.0e-4, gt=0.0, lt=1.0)  # SIF weighting's a; null: no weighting
    hidden_size: int = Field(512, ge=0)  # the classifier's ReLU layer; 0: a linear classifier
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    normalize: bool = True  # the sentence vector scaled to unit length
    freeze_embeddings: bool = False  # train the classifier alone, the table as distilled


class StaticRecipe(TeacherDistillation):
    """A token table from the teacher's encoder, then a classifier on its sentence means learning the teacher's
    soft labels (and the gold labels)."""

    name = registry.STATIC
    progress = "distill (static)"
    sections = {"static": StaticSection}

    def check(self, run: StageRun) -> None:
        if TASK_CLASSES[run.recipe.task].per_token_outputs:
            raise ConfigError(f"a static-embedding student has one vector per token wherever it stands, so no "
                              f"answer span: for {run.recipe.task} use --recipe {registry.DISTILBERT}")
        if run.recipe.distill.cos_weight:
            raise ConfigError("a static-embedding student has no hidden states for distill.cos_weight to align: "
                              "pass --cos-weight 0 (the static preset does: --preset static)")
        super().check(run)

    def build_model(self, run: StageRun):
        self.weights = loss_weights(run.recipe.distill)
        cfg = run.recipe.static
        vocab_size = len(self.tokenizer)
        config = StaticEmbeddingConfig(
            vocab_size=vocab_size, num_labels=len(self.task.label_names), embedding_dim=cfg.pca_dims,
            hidden_size=cfg.hidden_size, dropout=cfg.dropout, normalize=cfg.normalize,
            pad_token_id=int(self.tokenizer.pad_token_id or 0),
            ignored_token_ids=sorted(set(self.tokenizer.all_special_ids)), freeze_embeddings=cfg.freeze_embeddings)
        model = StaticEmbeddingClassifier(config)
        started = time.perf_counter()
        # on the device the stage trains on: the whole vocabulary goes through the teacher's encoder once
        table, self.table_report = static_table.distill_table(self.teacher.base_model, self.tokenizer, cfg.pca_dims,
                                                              cfg.sif_coefficient, trainer.pick_device(run.device))
        self.table_report["seconds"] = round(time.perf_counter() - started, 1)
        with torch.no_grad():
            model.embeddings.weight.copy_(table)
        return model

    def step_loss(self, run: StageRun, dev):
        weights, task, hard_loss, teacher = self.weights, self.task, self.hard_loss, self.teacher
        temperature, cached = float(run.recipe.distill.temperature), self.cached

        def teacher_logits(batch):
            if cached is not None:
                return teacher_cache.teacher_targets(batch)[0]
            with torch.no_grad():
                return task.logits(teacher(**trainer.model_inputs(task, batch)))

        def step_loss(forward_model, batch):
            s_logits = forward_model(batch["input_ids"], batch["attention_mask"]).logits.float()
            t_logits = teacher_logits(batch) if weights["kl"] else None
            parts = prediction_losses(task, s_logits, t_logits, batch, weights, temperature, hard_loss)
            return sum(weights[k] * v for k, v in parts.items()), parts

        return step_loss, self.batch_extras(dev)

    def unused_parameters(self) -> bool:
        return False  # every parameter reads the sentence vector the logits come from

    def checkpoint_identity(self, run: StageRun) -> dict:
        return {"cfg": as_record(run.section), "seed": run.seed, "recipe": self.name,
                "static": as_record(run.recipe.static), "teacher": self.teacher_sha}

    def save(self, run: StageRun, model, out) -> None:
        stage_folder.save_stage_model(model, self.tokenizer, out, self.task, run.section.max_length,
                                      {"recipe": self.name}, architecture=STATIC)

    def student_metrics(self, model) -> dict:
        return {"transfer_set": transfer_set_report(self.n_labelled, self.n_extra, self.rows_report),
                "static_table": self.table_report,
                "parameters": model.parameter_count(include_embeddings=True),
                "parameters_without_embeddings": model.parameter_count()}
