"""One stage runner for every training recipe (torchtune's recipe pattern, scaled down).

What every training stage does is written here once: refuse a stage folder it may not replace, check the
recipe, load its inputs, seed, build the model, pick the device, write into a staged folder, fix the
checkpoint spec, train, evaluate, save, write the manifest, discard the checkpoints. What differs (which
model, which rows, which loss, what is saved and reported) is a method of a TrainingRecipe subclass, handed
the typed recipe. Recipes are named in one place, train/registry.py.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from pocketbert.core.config.recipe import Recipe, Section, TrainingSection, recipe_dict, with_recipe_sections
from pocketbert.core.run.manifest import RECIPE_NAME, write_manifest
from pocketbert.core.run.atomic_folder import check_writable, staged_output
from pocketbert.core.run.run_files import STUDENT_DIR


@dataclass
class StageRun:
    """What a stage is asked to do: the typed recipe, the run it writes into and the inputs it reads."""

    run_dir: Path
    recipe: Recipe
    data_dir: Path | None = None
    eval_file: Path | None = None
    teacher_dir: Path | None = None  # distillation: the fine-tuned teacher (default <run>/teacher)
    source: str | None = None        # a checkpoint to start from: the teacher's base model, the masked-LM teacher
    corpus: Path | None = None       # masked-LM: plain text
    label_names: list[str] | None = None
    trust_remote_code: bool = False
    device: str | None = None
    overwrite: bool = False
    resume: bool = False
    # What the manifest's metrics record beside the recipe's own (a pruned student's recovery: what was cut).
    metrics: dict[str, Any] = field(default_factory=dict)
    section_name: str = "distill"  # set by run_stage: the section the running recipe trains with

    @property
    def seed(self) -> int:
        return int(self.recipe.seed)

    @property
    def section(self) -> Section:
        """The recipe section the recipe trains with (teacher, distill: TrainingSection; mlm: its own)."""
        return getattr(self.recipe, self.section_name)


class TrainingRecipe:
    """A way of training one stage. Subclasses set the class attributes and fill in the steps; run_stage calls
    them in order, each once: check, load_inputs, (seed), build_model, place, (device, staged folder),
    training_rows, step_loss, checkpoint_identity, (train), evaluate, save and manifest (process 0), result.
    Attributes set on the way (self.task, self.tokenizer, ...) hold the run's state: one object per run."""

    name: ClassVar[str]
    title: ClassVar[str] = ""                # what a table calls it (the ablation's), default its name
    stage_dir: ClassVar[str] = STUDENT_DIR
    manifest_stage: ClassVar[str] = "student"
    section: ClassVar[str] = "distill"        # the recipe section that holds the training settings
    progress: ClassVar[str] = "distill"       # the progress bar's label
    dropout: ClassVar[bool] = True            # off: the model trains in eval mode (targets to match exactly)
    augments_by_default: ClassVar[bool] = False  # rewrites of the augment: section when distill.augment is unset
                                                 # (a distillation fills it in complete())
    # The recipe's own settings: section name -> its model (core/config/recipe.py reads every recipe with them). A new
    # name is a section of the recipe's own (bilstm:); a shared section's name adds the model's keys to it.
    sections: ClassVar[dict[str, type[Section]]] = {}
    # `train distill` options that set the recipe's own keys: option name -> dotted recipe key, or a
    # train/options.py Flag; each option is made from the key's field (its type, bounds and help)
    flags: ClassVar[dict[str, Any]] = {}

    task: Any
    tokenizer: Any

    def complete(self, recipe: Recipe) -> Recipe:
        """The recipe as this recipe runs it (a distillation records its own name in distill.recipe)."""
        return recipe

    def check(self, run: StageRun) -> None:
        """Checks that need more than the recipe's own types, made before any work."""

    def load_inputs(self, run: StageRun) -> None:
        """Teacher, tokenizer, task and data, before the seed is set."""
        raise NotImplementedError

    def build_model(self, run: StageRun):
        """The model to train, its initial weights drawn after the seed is set."""
        raise NotImplementedError

    def place(self, run: StageRun, dev) -> None:
        """Move what the loss reads (a frozen teacher) to the device."""

    def training_rows(self, run: StageRun, dev) -> list:
        """The features to train on (inside the staged folder: a teacher cache may be filled)."""
        raise NotImplementedError

    def step_loss(self, run: StageRun, dev):
        """(step_loss(forward_model, batch) -> (loss, parts), batch_extras or None)."""
        raise NotImplementedError

    def loop_settings(self, run: StageRun) -> TrainingSection:
        """What the training loop runs with: the recipe's training section."""
        return run.section

    def loop_steps(self, run: StageRun) -> int | None:
        """Steps to train whatever the epochs, asked after training_rows (0: the stage trains nothing; None: the
        loop settings' epochs over the rows)."""
        return None

    def unused_parameters(self) -> bool | None:
        """Whether the loss leaves some parameters without a gradient (None: the task says)."""
        return None

    def checkpoint_identity(self, run: StageRun) -> dict:
        """What a checkpoint must match to be resumed."""
        return {"cfg": as_record(run.section), "seed": run.seed}

    def evaluate(self, run: StageRun, model, dev) -> dict:
        raise NotImplementedError

    def save(self, run: StageRun, model, out: Path) -> None:
        raise NotImplementedError

    def manifest(self, run: StageRun, model, dev, stats: dict) -> tuple[dict, dict, dict]:
        """(config, inputs, metrics) of the stage's manifest."""
        raise NotImplementedError

    def result(self) -> dict:
        """What the command prints."""
        raise NotImplementedError


def as_record(section: BaseModel) -> dict:
    """A section as a checkpoint's identity records it (JSON data)."""
    return section.model_dump(mode="json")


def run_stage(recipe: TrainingRecipe, run: StageRun) -> tuple[Path, dict]:
    """Train one stage with `recipe`; returns the stage folder and the recipe's result."""
    from pocketbert.train import checkpoint, distributed, epoch_stop, trainer

    started = time.time()
    run.recipe = recipe.complete(with_recipe_sections(run.recipe))
    run.section_name = recipe.section
    check_writable(run.run_dir, recipe.stage_dir, run.overwrite)
    recipe.check(run)
    recipe.load_inputs(run)
    trainer.set_seed(run.seed)
    model = recipe.build_model(run)
    dev = trainer.pick_device(run.device)
    recipe.place(run, dev)

    with distributed.main_writes(run.run_dir, staged_output(run.run_dir, recipe.stage_dir, run.overwrite)) as out:
        features = recipe.training_rows(run, dev)
        step_loss, batch_extras = recipe.step_loss(run, dev)
        loop = recipe.loop_settings(run)
        spec = trainer.checkpoint_spec_for(run.run_dir, recipe.stage_dir, loop, recipe.checkpoint_identity(run),
                                           features, run.resume)
        stop = epoch_stopper(recipe, run, loop, spec, dev) if loop.stop_patience else None
        steps = recipe.loop_steps(run)
        stats = {"steps": 0} if steps == 0 else trainer.train(
            model, recipe.task, features, recipe.tokenizer.pad_token_id, loop, dev, step_loss, run.seed,
            recipe.progress, spec, unused_parameters=recipe.unused_parameters(), batch_extras=batch_extras,
            after_epoch=stop, max_steps=steps, dropout=recipe.dropout)
        if stop is not None:
            stop.keep_best(model)
            stats["epochs"] = stop.report()
        recipe.evaluate(run, model, dev)
        if out is not None:  # process 0 alone writes the stage
            recipe.save(run, model, out)
            config, inputs, metrics = recipe.manifest(run, model, dev, stats)
            write_manifest(out, stage=recipe.manifest_stage, started=started,
                           config={RECIPE_NAME: recipe.name, "recipe": recipe_dict(run.recipe), **config},
                           inputs=inputs, metrics={**metrics, **run.metrics})
    if distributed.is_main():
        epoch_stop.discard(spec.folder if spec else None)
        checkpoint.discard(spec)
    return Path(run.run_dir) / recipe.stage_dir, recipe.result()


def epoch_stopper(recipe: TrainingRecipe, run: StageRun, loop: TrainingSection, spec, dev):
    """What scores each epoch on the validation rows held out of the recipe's labelled data."""
    from pocketbert.core.errors import ConfigError
    from pocketbert.train import distributed, epoch_stop, trainer

    data = getattr(recipe, "data", None)
    if data is None:
        raise ConfigError(f"stop_patience needs labelled training data, which the {recipe.name} recipe does not read: "
                          f"remove it")
    if spec is not None and not spec.resume and distributed.is_main():
        epoch_stop.discard(spec.folder)  # a fresh start: an earlier attempt's scores are not this run's
    examples = trainer.validation_examples(data, loop, run.seed)
    features = recipe.task.features(recipe.tokenizer, examples, loop.max_length, loop.doc_stride)
    metric = recipe.task.primary_metric

    def score(model) -> float:
        return float(trainer.evaluate(model, recipe.task, examples, features, recipe.tokenizer.pad_token_id,
                                      run.recipe.eval, dev, "validation")[metric])

    return epoch_stop.EpochStop(score, loop.stop_patience, metric, spec.folder if spec else None,
                                spec.fingerprint if spec else "", distributed.is_main())
