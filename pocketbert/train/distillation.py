"""What the distillation recipes share: the teacher and its data, the transfer set it labels, the frozen
teacher, the evaluation against it and the manifest. TeacherDistillation is the base of the task-specific
recipes (DistilBERT, the BiLSTM); the masked-LM recipe takes the layer alignment, loss weights and freezing."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from pocketbert.core.errors import ConfigError
from pocketbert.core.run.manifest import read_manifest, read_verified_stage, sha256_of
from pocketbert.core.run.stage_records import TeacherRecord
from pocketbert.core.run.atomic_folder import require_stage
from pocketbert.core.run.run_files import MANIFEST, STUDENT_DIR, TEACHER_DIR, stage_path
from pocketbert.core.run.user_paths import record_path, refuse_inputs
from pocketbert.core.tasks import losses
from pocketbert.core.students import stage_folder
from pocketbert.core.tasks.data import check_cross_domain, subsample
from pocketbert.core.tasks.task_data import load_task_data
from pocketbert.core.config.recipe import EvalSection, Recipe, check_class_weights, cross_domain_datasets
from pocketbert.train import teacher_cache, trainer, transfer
from pocketbert.train.stage import StageRun, TrainingRecipe

LOSS_PARTS = ("kl", "ce", "cos")  # soft-target KL, hard-label (or masked-LM) cross-entropy, hidden-state cosine


def loss_weights(section) -> dict[str, float]:
    """The weights of the loss parts, from a typed section (distill, mlm) with kl_weight, ce_weight, cos_weight."""
    return {k: float(getattr(section, f"{k}_weight")) for k in LOSS_PARTS}


def prediction_losses(task, s_logits, t_logits, batch, weights: dict, temperature: float, hard_loss) -> dict:
    """The prediction-layer parts every distillation shares: the soft loss against the teacher's logits (KL at the
    temperature) and the hard loss against the labels, each only when its weight is non-zero."""
    parts = {}
    if weights["kl"]:
        parts["kl"] = task.soft_loss(s_logits, t_logits, batch, temperature)
    if weights["ce"]:
        parts["ce"] = task.hard_loss(s_logits, batch, hard_loss)
    return parts


def aligned_teacher_layers(n_student: int, n_teacher: int) -> list[int]:
    """For student hidden state k (1..n_student), the teacher hidden state it is pulled towards, ending on the last."""
    return [round(k * n_teacher / n_student) for k in range(1, n_student + 1)]


def freeze(teacher, dev):
    teacher.to(dev).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)


def load_teacher_and_data(run_dir: Path, recipe: Recipe, teacher_dir: Path | None, data_dir: Path | None,
                          eval_file: Path | None, seed: int):
    """The run's (or the given) teacher with its tokenizer and task, and the recipe's data in its label order."""
    teacher_dir = Path(teacher_dir) if teacher_dir else require_stage(run_dir, TEACHER_DIR, "pocketbert train teacher")
    # the student folder this stage writes must not be, hold or lie in the teacher it reads (--teacher R/student)
    refuse_inputs(stage_path(run_dir, STUDENT_DIR), "train distill", [teacher_dir], "--run")
    if (teacher_dir / MANIFEST).is_file():  # a teacher's folder given by --teacher may be a bare stage model
        read_verified_stage(teacher_dir)
    teacher, tokenizer, task, info = stage_folder.load_stage_model(teacher_dir)
    if info["task"] != recipe.task:
        raise ConfigError(f"the teacher in {teacher_dir} is a {info['task']} model: pass --task {info['task']}")
    data = load_task_data(recipe.dataset, recipe.task, data_dir, eval_file, task.label_names or None, seed)
    task.check_label_names(data.label_names, f"dataset '{data.name}'")
    # Checks that need the classes, made before the student trains rather than after.
    check_class_weights(recipe.distill, task.label_names, "distill")
    check_cross_domain(cross_domain_datasets(recipe), task.name, task.label_names)
    return teacher, tokenizer, task, teacher_dir, data


def evaluate_against_teacher(student, teacher, teacher_dir: Path, task, eval_examples, eval_features, pad_id: int,
                             eval_cfg: EvalSection, dev) -> tuple[dict, dict, float | None]:
    """Student metrics, the teacher's on the same examples (from its manifest when it has them), and the kept fraction."""
    metrics = trainer.evaluate(student, task, eval_examples, eval_features, pad_id, eval_cfg, dev, "student eval")
    # a teacher's folder given by --teacher may be a bare stage model, with no manifest
    recorded = read_manifest(teacher_dir, TeacherRecord) if (teacher_dir / MANIFEST).is_file() else None
    teacher_metrics = recorded.metrics.eval if recorded is not None else None
    if teacher_metrics is None or teacher_metrics.get("n_examples") != metrics["n_examples"]:
        teacher_metrics = trainer.evaluate(teacher, task, eval_examples, eval_features, pad_id, eval_cfg, dev,
                                           "teacher eval")
    primary = task.primary_metric
    kept = metrics[primary] / teacher_metrics[primary] if teacher_metrics[primary] else None
    return metrics, teacher_metrics, kept


def cross_domain_eval(student, teacher, task, tokenizer, recipe: Recipe, data_dir: Path | None, dev) -> dict:
    """Student and teacher on the eval split of every dataset in `eval.cross_domain` (train on one, test on others).

    eval.cross_domain is a list of dataset names, or a mapping from the training dataset to such a list.
    """
    eval_cfg = recipe.eval
    names = cross_domain_datasets(recipe)
    if not names:
        return {}
    seed = recipe.seed
    n = eval_cfg.cross_domain_max_examples
    length = recipe.distill.max_length
    results = {}
    for name in names:
        other = load_task_data(name, task.name, data_dir, None, task.label_names or None, seed)
        task.check_label_names(other.label_names, f"eval.cross_domain dataset '{name}'")
        examples = subsample(other.eval, n, seed)
        features = task.features(tokenizer, examples, length, recipe.distill.doc_stride)
        results[name] = {
            "student": trainer.evaluate(student, task, examples, features, tokenizer.pad_token_id, eval_cfg, dev,
                                        f"student on {name}"),
            "teacher": trainer.evaluate(teacher, task, examples, features, tokenizer.pad_token_id, eval_cfg, dev,
                                        f"teacher on {name}"),
        }
    return results


def transfer_set_report(n_labelled: int, n_extra: int, rows_report: dict) -> dict:
    """The transfer set's make-up: labelled originals, transfer data, and rewrites of both."""
    augmentation = rows_report.get("augmentation") or {}
    return {"originals": n_labelled, "transfer_data": (rows_report.get("transfer_data") or {}).get("rows", 0),
            "augmented": augmentation.get("augmented", 0), "rows": n_labelled + n_extra,
            "duplicates_dropped": augmentation.get("duplicates_dropped", 0), "tagger": augmentation.get("tagger")}


# The prediction-layer losses every transformer distillation has, as ablation rows:
# variant -> (what the ablation table calls it, the recipe keys it changes)
PREDICTION_LOSS_ABLATIONS = {
    "no_kl": ("− soft-target KL", {"distill.kl_weight": 0.0}),
    "no_ce": ("− hard-label CE", {"distill.ce_weight": 0.0}),
    "no_cos": ("− cosine alignment", {"distill.cos_weight": 0.0}),
}


class TeacherDistillation(TrainingRecipe):
    """A task-specific distillation from the run's fine-tuned teacher into <run>/student/: the teacher labels
    the training rows, the transfer data and (when the recipe augments) rewrites of both, through its cache."""

    section = "distill"
    manifest_stage = "student"

    def complete(self, recipe):
        """The recipe naming this one in distill.recipe, and distill.augment filled with its default when unset."""
        distill = recipe.distill
        augment = self.augments_by_default if distill.augment is None else distill.augment
        return recipe.model_copy(update={"distill": distill.model_copy(update={"recipe": self.name,
                                                                               "augment": augment})})

    def check(self, run: StageRun) -> None:
        transfer.check_recipe(run.recipe)

    def load_inputs(self, run: StageRun) -> None:
        self.teacher, self.tokenizer, self.task, self.teacher_dir, self.data = load_teacher_and_data(
            run.run_dir, run.recipe, run.teacher_dir, run.data_dir, run.eval_file, run.seed)
        self.hard_loss = losses.hard_label_loss(run.section)

    def place(self, run: StageRun, dev) -> None:
        freeze(self.teacher, dev)

    def hidden_targets(self) -> list[int] | None:
        """The teacher hidden states the loss reads (cached beside its logits), or None."""
        return None

    def training_rows(self, run: StageRun, dev) -> list:
        cfg, eval_cfg, tokenizer, task = run.section, run.recipe.eval, self.tokenizer, self.task
        self.eval_examples, features, self.eval_features = trainer.prepare_features(task, tokenizer, self.data, cfg,
                                                                                    eval_cfg, run.seed)
        self.n_labelled = len(features)
        extra, self.rows_report = transfer.unlabeled_rows(task, tokenizer, run.recipe, self.data,
                                                          trainer.labelled_examples(self.data, cfg, run.seed),
                                                          run.data_dir, run.seed)
        self.n_extra = len(extra)
        extra_features = task.features(tokenizer, extra, cfg.max_length, cfg.doc_stride) if extra else []
        self.teacher_sha = sha256_of(self.teacher_dir)
        self.cached, self.cache_report, self.extra_cache_report = teacher_cache.labelled_and_unlabeled(
            self.teacher, task, features, extra_features, tokenizer.pad_token_id, self.hidden_targets(),
            self.teacher_sha, dev, cfg.teacher_cache_mb, eval_cfg.batch_size)
        return features + extra_features

    def batch_extras(self, dev):
        """Cached teacher outputs put into each batch, or None when the teacher runs inside every step."""
        cached = self.cached
        return None if cached is None else (lambda idx, length: cached.as_batch(idx, length, dev))

    def evaluate(self, run: StageRun, model, dev) -> dict:
        self.eval_set = self.data.eval_set(len(self.eval_examples))
        metrics, teacher_metrics, self.kept = evaluate_against_teacher(
            model, self.teacher, self.teacher_dir, self.task, self.eval_examples, self.eval_features,
            self.tokenizer.pad_token_id, run.recipe.eval, dev)
        scored = {"scored": self.eval_set.describe()}
        self.metrics, self.teacher_metrics = {**metrics, **scored}, {**teacher_metrics, **scored}
        self.cross_domain = cross_domain_eval(model, self.teacher, self.task, self.tokenizer, run.recipe, run.data_dir,
                                              dev)
        return self.metrics

    def student_config(self, run: StageRun) -> dict:
        """What the manifest's config records of this recipe's student."""
        return {}

    def student_metrics(self, model) -> dict:
        """What the manifest's metrics record of this recipe's student and its training rows."""
        return {"parameters": sum(p.numel() for p in model.parameters())}

    def manifest(self, run: StageRun, model, dev, stats: dict) -> tuple[dict, dict, dict]:
        config = {"seed": run.seed, "teacher": record_path(run.run_dir, self.teacher_dir),
                  **self.student_config(run), "device": str(dev), "dataset": self.data.name}
        inputs = {"teacher": self.teacher_dir, **{f"data_{k}": v for k, v in self.data.sources.items()},
                  **transfer.file_inputs(run.recipe)}
        metrics = {
            "eval": self.metrics, "teacher_eval": self.teacher_metrics, "eval_set": asdict(self.eval_set),
            "primary_metric": self.task.primary_metric,
            "fraction_of_teacher_kept": self.kept, "cross_domain": self.cross_domain, "train": stats,
            "teacher_cache": self.cache_report, **self.rows_report,
            **({"teacher_cache_unlabeled": self.extra_cache_report} if self.extra_cache_report else {}),
            **self.student_metrics(model),
            "teacher_parameters": sum(p.numel() for p in self.teacher.parameters()),
        }
        return config, inputs, metrics

    def result(self) -> dict:
        return {"eval": self.metrics, "teacher_eval": self.teacher_metrics, "kept": self.kept,
                "cross_domain": self.cross_domain, "transfer_data": self.rows_report.get("transfer_data")}
