"""`pocketbert train teacher`: fine-tune a BERT-family checkpoint for the task."""

from __future__ import annotations

from dataclasses import asdict

from pocketbert.core.errors import ConfigError
from pocketbert.core.run.run_files import TEACHER_DIR
from pocketbert.core.tasks import losses
from pocketbert.core.students import models, stage_folder
from pocketbert.train import registry, trainer
from pocketbert.train.stage import StageRun, TrainingRecipe, as_record
from pocketbert.core.tasks.task_data import load_task_data
from pocketbert.core.config.recipe import check_class_weights
from pocketbert.core.tasks.registry import make_task


def check_max_length(model, max_length: int) -> None:
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit is not None and max_length > limit:
        raise ConfigError(f"max_length {max_length} exceeds the model's {limit} positions: lower it in the recipe")


class TeacherFineTuning(TrainingRecipe):
    """A BERT-family checkpoint (`source`) fine-tuned on the task's labels; writes <run>/teacher/."""

    name = registry.TEACHER
    stage_dir = TEACHER_DIR
    manifest_stage = "teacher"
    section = "teacher"
    progress = "teacher"

    def load_inputs(self, run: StageRun) -> None:
        recipe = run.recipe
        self.data = load_task_data(recipe.dataset, recipe.task, run.data_dir, run.eval_file, run.label_names, run.seed)
        self.task = make_task(recipe.task, self.data.label_names)
        check_class_weights(run.section, self.task.label_names, "teacher")
        self.source = models.resolve_model_source(run.source)
        self.tokenizer = models.load_tokenizer(self.source, run.trust_remote_code)

    def build_model(self, run: StageRun):
        model = models.load_for_task(self.source, self.task, trust_remote_code=run.trust_remote_code)
        check_max_length(model, int(run.recipe.teacher.max_length))
        return model

    def training_rows(self, run: StageRun, dev) -> list:
        self.eval_examples, features, self.eval_features = trainer.prepare_features(
            self.task, self.tokenizer, self.data, run.section, run.recipe.eval, run.seed)
        return features

    def step_loss(self, run: StageRun, dev):
        task, hard_loss = self.task, losses.hard_label_loss(run.section)

        def step_loss(forward_model, batch):
            loss = task.hard_loss(task.logits(forward_model(**trainer.model_inputs(task, batch))), batch, hard_loss)
            return loss, {}

        return step_loss, None

    def checkpoint_identity(self, run: StageRun) -> dict:
        return {"cfg": as_record(run.section), "seed": run.seed, "base_model": run.source, "labels": self.task.label_names}

    def evaluate(self, run: StageRun, model, dev) -> dict:
        self.eval_set = self.data.eval_set(len(self.eval_examples))
        self.metrics = {**trainer.evaluate(model, self.task, self.eval_examples, self.eval_features,
                                           self.tokenizer.pad_token_id, run.recipe.eval, dev, "teacher eval"),
                        "scored": self.eval_set.describe()}
        return self.metrics

    def save(self, run: StageRun, model, out) -> None:
        stage_folder.save_stage_model(model, self.tokenizer, out, self.task, run.section.max_length,
                                {"doc_stride": run.recipe.teacher.doc_stride, "base_model": run.source})

    def manifest(self, run: StageRun, model, dev, stats: dict) -> tuple[dict, dict, dict]:
        config = {"seed": run.seed, "base_model": run.source, "device": str(dev),
                  "dataset": self.data.name, "trust_remote_code": run.trust_remote_code}
        inputs = {f"data_{k}": v for k, v in self.data.sources.items()}
        metrics = {"eval": self.metrics, "eval_set": asdict(self.eval_set), "train": stats, "parameters": sum(p.numel() for p in model.parameters())}
        return config, inputs, metrics

    def result(self) -> dict:
        return self.metrics
