"""`pocketbert train distill --recipe tang`: Tang et al. 2019, BERT into a BiLSTM.

Transfer set: the training examples, the recipe's transfer data (transfer.py), and augmented copies of both
(augment.py), every one labelled by the teacher.
Loss: alpha * hard-label loss (original examples only) + (1 - alpha) * MSE(student logits, teacher logits);
alpha = 0, pure distillation, was the paper's best.
"""

from __future__ import annotations

from typing import Literal

import torch.nn.functional as F
from pydantic import Field

from pocketbert.core.errors import ConfigError
from pocketbert.core.students import bilstm, stage_folder
from pocketbert.core.students.architectures import BILSTM
from pocketbert.core.config.recipe import Section
from pocketbert.train import registry, teacher_cache
from pocketbert.train.distillation import TeacherDistillation, transfer_set_report
from pocketbert.train.stage import StageRun, as_record


class BiLSTMSection(Section):
    """The BiLSTM student (the recipe's `bilstm:` section)."""

    embeddings: Literal["teacher", "random"] = "teacher"
    embedding_dim: int = Field(300, gt=0)
    freeze_embeddings: bool = False
    hidden_size: int = Field(150, gt=0)
    relu_size: int = Field(400, gt=0)
    dropout: float = Field(0.1, ge=0.0, lt=1.0)


class BiLSTMDistillKeys(Section):
    """What the BiLSTM recipe adds to the distill: section."""

    alpha: float = Field(0.0, ge=0.0, le=1.0,
                         description="BiLSTM recipe: weight of the hard-label loss against logit MSE.")


class BiLSTMRecipe(TeacherDistillation):
    """A BiLSTM student learning the teacher's logits (MSE) on the training rows, transfer data and rewrites."""

    name = registry.BILSTM
    progress = "distill (BiLSTM)"
    augments_by_default = True
    sections = {"bilstm": BiLSTMSection, "distill": BiLSTMDistillKeys}
    flags = {"alpha": "distill.alpha"}

    def load_inputs(self, run: StageRun) -> None:
        super().load_inputs(run)
        if self.task.per_token_outputs:
            raise ConfigError(f"the BiLSTM student classifies sentences: use --recipe {registry.DISTILBERT} for QA")

    def build_model(self, run: StageRun):
        return bilstm.build_bilstm(run.recipe.bilstm, self.teacher, self.tokenizer, len(self.task.label_names))

    def training_rows(self, run: StageRun, dev) -> list:
        features = super().training_rows(run, dev)
        if self.cached is None:
            reason = next(r["reason"] for r in (self.cache_report, self.extra_cache_report) if r and not r["used"])
            raise ConfigError(f"the BiLSTM recipe labels its transfer set once, through the teacher cache: "
                              f"{reason}; raise distill.teacher_cache_mb")
        return features

    def step_loss(self, run: StageRun, dev):
        alpha, task, hard_loss = float(run.recipe.distill.alpha), self.task, self.hard_loss

        def step_loss(forward_model, batch):
            t_logits, _ = teacher_cache.teacher_targets(batch)
            s_logits = forward_model(batch["input_ids"], batch["attention_mask"]).logits.float()
            parts = {"mse": F.mse_loss(s_logits, t_logits)}
            if alpha:
                parts["ce"] = task.hard_loss(s_logits, batch, hard_loss)
            loss = (1.0 - alpha) * parts["mse"] + alpha * parts.get("ce", 0.0)
            return loss, parts

        return step_loss, self.batch_extras(dev)

    def checkpoint_identity(self, run: StageRun) -> dict:
        return {"cfg": as_record(run.section), "seed": run.seed, "recipe": self.name,
                "bilstm": as_record(run.recipe.bilstm), "teacher": self.teacher_sha}

    def save(self, run: StageRun, model, out) -> None:
        stage_folder.save_stage_model(model, self.tokenizer, out, self.task, run.section.max_length,
                                {"recipe": self.name}, architecture=BILSTM)

    def student_metrics(self, model) -> dict:
        return {"transfer_set": transfer_set_report(self.n_labelled, self.n_extra, self.rows_report),
                "parameters": model.parameter_count(include_embeddings=True),
                "parameters_without_embeddings": model.parameter_count()}
