"""`pocketbert train vocabulary`: the run's finished student with its vocabulary fitted to the recipe's own training
and transfer text, written as <run>/student_fitted/ (the weights, the fitted tokenizer, each kept row's share of the
counted text, and a manifest whose metrics.vocabulary the export's manifest carries on).

A training stage like the others (train/stage.py): it counts the recipe's training and transfer text, never its
evaluation text (counted_text.py), and chooses the rows before anything is written (a setting that keeps nothing
ends it with no files), gathers them into a copy of the student, runs the recovery distillation
(vocabulary.recovery_steps) through the training loop, and measures the fitted student against the full one on the
evaluation examples and each cross-domain dataset: text it was not fitted to. Its settings are the recipe's
vocabulary section: the recipe the student was trained with, and the command's options over it.
"""

from __future__ import annotations

from pathlib import Path

from pocketbert.core.students.fitted_vocabulary import FITTED_FROM, SETTINGS, fitting_settings, student_identity
from pocketbert.core.config.recipe import Recipe, TrainingSection
from pocketbert.core.run.run_files import FITTED_STUDENT_DIR, PIECE_SHARES, STUDENT_DIR
from pocketbert.core.run.stage_records import StudentsCompared, VocabularyRecord, VocabularyRecovery
from pocketbert.train import registry
from pocketbert.train.stage import StageRun, TrainingRecipe, as_record

STAGE_MADE_BY = "pocketbert train distill"
# The recipe sections the fit reads: its settings, the export's parity examples and length it measures the fitted
# student at, and the app text it counts.
FIT_READS = ("vocabulary", "export", "transfer")


class VocabularyFit(TrainingRecipe):
    """The student's word-piece table cut to the rows of the recipe's text; the table alone then learns, for
    vocabulary.recovery_steps steps, the full student's answers on words the cut vocabulary spells in smaller
    pieces."""

    name = registry.FITTED_VOCABULARY
    title = "fitted vocabulary"
    stage_dir = FITTED_STUDENT_DIR
    manifest_stage = FITTED_STUDENT_DIR
    section = "vocabulary"                # the recipe section that holds the fit's settings
    progress = "vocabulary recovery"
    dropout = False  # the fitted student learns the full student's answers, not a noisy version of them

    def load_inputs(self, run: StageRun) -> None:
        from pocketbert.core.run.manifest import verified_stage
        from pocketbert.core.students.stage_folder import load_stage_model
        from pocketbert.core.tasks.task_data import load_task_data
        from pocketbert.core.run.user_paths import recorded_dataset
        from pocketbert.train.vocabulary import recovery

        self.student_dir, _ = verified_stage(run.run_dir, STUDENT_DIR, STAGE_MADE_BY)
        self.full_model, self.full_tokenizer, self.task, self.info = load_stage_model(self.student_dir)
        self.student_sha = student_identity(run.run_dir)
        if run.recipe.vocabulary.recovery_steps:
            recovery.check_task(self.task)
        dataset = recorded_dataset(run.run_dir, run.recipe.dataset)
        self.data = load_task_data(dataset, self.task.name, run.data_dir, None, self.task.label_names or None,
                                   run.seed)

    def build_model(self, run: StageRun):
        """The fitted copy of the student, its rows chosen on the counted text; only its word-piece table trains."""
        from pocketbert.train.vocabulary import choice, counted_text, recovery, rows
        from pocketbert.train.vocabulary.tokenizer import fitted_tokenizer, wordpiece_vocabulary

        settings, tokenizer = run.recipe.vocabulary, self.full_tokenizer
        vocab, prefix = wordpiece_vocabulary(tokenizer)
        # the training and transfer text, counted; the evaluation text, measured
        text = counted_text.fit_texts(self.task, self.data, run.recipe, run.data_dir, run.seed)
        self.texts = text.counted
        special = set(tokenizer.all_special_ids) | set(getattr(tokenizer, "added_tokens_decoder", {}) or {})
        self.forced = choice.forced_ids(vocab, sorted(special), prefix)
        self.kept, counted = counted_text.fit_rows(tokenizer, text, self.forced, settings.min_count,
                                                   settings.max_rows)
        self.record = VocabularyRecord.model_validate(counted)
        self.tokenizer = fitted_tokenizer(tokenizer, self.kept.ids)
        self.fitted = recovery.table_alone(rows.fitted_student(self.full_model, self.kept.ids))
        return self.fitted

    def place(self, run: StageRun, dev) -> None:
        self.full_model.to(dev).eval()
        self.fitted.to(dev)

    def training_rows(self, run: StageRun, dev) -> list:
        from pocketbert.train.teacher_cache import TeacherOutputs
        from pocketbert.train.vocabulary import recovery

        settings, self.cached = run.recipe.vocabulary, None
        self.steps = settings.recovery_steps
        if not self.steps:
            return []
        found = recovery.recovery_rows(
            self.full_model, self.full_tokenizer, self.task, recovery.training_texts(self.texts), self.kept.ids,
            self.forced, settings.min_count, run.recipe.distill.max_length, run.recipe.eval.batch_size,
            run.seed, dev)
        self.recovery = VocabularyRecovery.model_validate({
            **found.record, "learning_rate": settings.recovery_learning_rate, "batch_size": recovery.RECOVERY_BATCH,
            "max_length": run.recipe.distill.max_length, "temperature": run.recipe.distill.temperature})
        if not found.features:
            self.steps = 0
            return []
        self.cached = TeacherOutputs.of_logits(found.targets)
        self.rows = found.features
        self.recovery.loss_before = self.soft_loss_on_rows(run, self.fitted, dev)
        return found.features

    def soft_loss(self, run: StageRun, model, batch):
        from pocketbert.train.vocabulary import recovery

        return recovery.soft_loss(self.task, float(run.recipe.distill.temperature))(model, batch)

    def step_loss(self, run: StageRun, dev):
        from pocketbert.train.vocabulary import recovery

        cached, loss = self.cached, recovery.soft_loss(self.task, float(run.recipe.distill.temperature))

        def step_loss(forward_model, batch):
            return loss(forward_model, batch), {}

        extras = None if cached is None else (lambda idx, length: cached.as_batch(idx, length, dev))
        return step_loss, extras

    def loop_settings(self, run: StageRun) -> TrainingSection:
        from pocketbert.train.vocabulary.recovery import loop_section

        return loop_section(run.recipe.distill, run.recipe.vocabulary.recovery_learning_rate)

    def loop_steps(self, run: StageRun) -> int:
        return self.steps

    def unused_parameters(self) -> bool:
        return False

    def checkpoint_identity(self, run: StageRun) -> dict:
        return {"settings": fitting_settings(run.recipe.vocabulary), "seed": run.seed, "student": self.student_sha,
                "temperature": run.recipe.distill.temperature, "loop": as_record(self.loop_settings(run))}

    def soft_loss_on_rows(self, run: StageRun, model, dev) -> float:
        """The mean soft-target loss of `model` over every recovery row, as the steps compute it."""
        import torch

        from pocketbert.train.trainer import collate_padded, to_device

        loss, total = 0.0, 0
        size = run.recipe.eval.batch_size
        model.eval()
        with torch.no_grad():
            for start in range(0, len(self.rows), size):
                idx = list(range(start, min(start + size, len(self.rows))))
                arrays = collate_padded(self.task, [self.rows[i] for i in idx], self.tokenizer.pad_token_id, 1, None)
                batch = {**to_device(arrays, dev), **self.cached.as_batch(idx, arrays["input_ids"].shape[1], dev)}
                loss += float(self.soft_loss(run, model, batch)) * len(idx)
                total += len(idx)
        return round(loss / total, 6)

    def evaluate(self, run: StageRun, model, dev) -> StudentsCompared:
        """The fitted student against the full one: on the export's parity examples of the evaluation split and on
        each cross-domain dataset."""
        from pocketbert.core.tasks.data import subsample
        from pocketbert.train.vocabulary import cost

        recipe = run.recipe
        if self.steps:
            self.recovery.loss_after = self.soft_loss_on_rows(run, model, dev)
        if recipe.vocabulary.recovery_steps:
            self.recovery.steps = self.steps
            self.record.recovery = self.recovery
        compared = cost.Compared(self.task, self.full_model, self.full_tokenizer, model, self.tokenizer,
                                 recipe.export.max_length or self.info["max_length"], self.info.get("doc_stride"),
                                 recipe.eval.batch_size, recipe.eval, dev)
        examples = subsample(self.data.eval, recipe.export.parity_examples, run.seed)
        self.record.against_full_student = cost.against_full(compared, examples)
        self.record.against_full_student_across_domains = cost.across_domains(compared, recipe, run.data_dir, run.seed)
        return self.record.against_full_student

    def save(self, run: StageRun, model, out: Path) -> None:
        """The fitted student as a stage folder, and each kept row's share of the counted text as its tokenizer cuts
        it (what the export ranks rows for 4 bits by, so that it reads no training text)."""
        import numpy as np

        from pocketbert.core.students import piece_counts
        from pocketbert.core.students.architectures import architecture_of
        from pocketbert.core.students.stage_folder import save_stage_model

        extra = {k: v for k, v in self.info.items() if k not in ("task", "label_names", "max_length", "architecture")}
        save_stage_model(model, self.tokenizer, out, self.task, self.info["max_length"], extra,
                         architecture_of(self.info))
        # as the fitted tokenizer cuts the text: its small pieces also spell the words whose own piece it dropped
        np.save(out / PIECE_SHARES, piece_counts.count_pieces(self.tokenizer, self.texts).shares, allow_pickle=False)

    def manifest(self, run: StageRun, model, dev, stats: dict) -> tuple[dict, dict, dict]:
        from pocketbert.train import transfer

        config = {SETTINGS: fitting_settings(run.recipe.vocabulary), FITTED_FROM: self.student_sha, "seed": run.seed,
                  "device": str(dev), "dataset": self.data.name}
        inputs = {"student": self.student_dir, **{f"data_{k}": v for k, v in self.data.sources.items()},
                  **transfer.file_inputs(run.recipe)}
        if self.steps:
            self.record.recovery.train = stats
        return config, inputs, {"vocabulary": self.record}

    def result(self) -> VocabularyRecord:
        return self.record


def fit_recipe(run_dir: Path, recipe: Recipe, data_dir: Path | None = None, device: str | None = None,
               overwrite: bool = False, resume: bool = False) -> tuple[Path, VocabularyRecord]:
    """Fit the run's student's vocabulary with `recipe` (its recorded recipe, the fit's settings over it); returns
    the fitted student's folder and its record."""
    from pocketbert.train.stage import run_stage

    return run_stage(registry.create(registry.FITTED_VOCABULARY, "vocabulary"), StageRun(
        Path(run_dir), recipe, data_dir, device=device, overwrite=overwrite, resume=resume))
