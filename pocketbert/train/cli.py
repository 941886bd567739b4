"""`pocketbert train teacher|distill|vocabulary|...`: thin commands that parse, check and call one library function."""

from __future__ import annotations

from pathlib import Path

import click

from pocketbert.core.config.cli_options import (
    COUNT,
    NON_NEGATIVE,
    data_dir_option,
    device_option,
    locks,
    overwrite_option,
    resolve_run_dir,
    run_option,
)
from pocketbert.core.tasks.registry import TASKS
from pocketbert.core.process import launch_env
from pocketbert.core.run import run_lock
from pocketbert.train.options import Flag, Flags, WithRecipeFlags, overrides, with_flags


def _join_group(device: str | None) -> None:
    from pocketbert.train.trainer import pick_device

    pick_device(device)


run_lock.join_launched_groups_with(_join_group)  # a train command torchrun started joins its group before locking


def _recipe(task, preset, config, given: dict, set_items):
    """The typed recipe: the preset or --config file, then the recipe keys the options set (`given`), then --set,
    validated once with the same messages."""
    from pocketbert.core.config.recipe import parse_set_options, read_recipe, with_overrides
    from pocketbert.core.run.user_paths import dataset_for_recipe

    recipe = read_recipe(task, preset, config)
    # a --set key=null sets null (max_train_examples=null: all)
    recipe = with_overrides(recipe, {**given, **parse_set_options(set_items)}, keep_none=True)
    # a local data file is recorded absolute: later stages read the recipe from the run, from any folder
    return recipe.model_copy(update={"dataset": dataset_for_recipe(recipe.dataset)})


class RecipeChoice(click.Choice):
    """The recipes registered for a command (train/registry.py), read when the option is parsed."""

    def __init__(self, command: str):
        from pocketbert.train import registry

        self.names = registry.names(command)
        super().__init__(list(self.names))

    @property
    def choices(self):
        return tuple(self.names)

    @choices.setter
    def choices(self, value):
        pass


# The recipe keys each command offers as options (option name -> key); their types, bounds and help are the keys'
# fields (train/options.py). A recipe's own options are its class's `flags`.
def training_flags(section: str) -> Flags:
    """What every training command offers, for `section`'s keys."""
    return {"dataset": "dataset", "epochs": f"{section}.epochs", "max_train_examples": f"{section}.max_train_examples",
            "stop_patience": f"{section}.stop_patience", "validation_examples": f"{section}.validation_examples",
            "seed": "seed", "hard_loss": f"{section}.hard_loss", "focal_gamma": f"{section}.focal_gamma",
            # a single weight on the command line (a list of them: --set)
            "focal_alpha": Flag(f"{section}.focal_alpha", kind=NON_NEGATIVE)}


RECIPE_FLAG = Flag("distill.recipe", kind=RecipeChoice("distill"))
LAYER_MAP_FLAG = Flag("student.layer_map", metavar="I,J,...", items="layer numbers", example="0,2,4")
TEACHER_FLAGS = training_flags("teacher")
DISTILL_FLAGS: Flags = {
    **training_flags("distill"), "recipe": RECIPE_FLAG,
    "cross_domain": Flag("eval.cross_domain", metavar="NAME,...", items="dataset names", example="imdb"),
    "temperature": "distill.temperature", "kl_weight": "distill.kl_weight", "ce_weight": "distill.ce_weight",
    "cos_weight": "distill.cos_weight", "compile": "distill.compile",
    "student_model": Flag("student.model", metavar="NAME|PATH"), "layer_map": LAYER_MAP_FLAG,
    "student_init": "student.init", "transfer_data": Flag("transfer.data", metavar="PATH|DATASET", repeat=True),
    "transfer_column": Flag("transfer.text_column", metavar="NAME"), "augment": "distill.augment",
}
ABLATE_FLAGS: Flags = {**training_flags("distill"), "recipe": RECIPE_FLAG}
PRUNE_FLAGS: Flags = {**training_flags("distill"), "epochs": "prune.recovery_epochs",
                      "max_train_examples": "prune.recovery_max_train_examples", "ffn_ratio": "prune.ffn_ratio"}
MLM_FLAGS: Flags = {"layer_map": LAYER_MAP_FLAG}
# a fitted vocabulary's settings: the recipe's vocabulary section
VOCABULARY_FLAGS: Flags = {"vocabulary_min_count": "vocabulary.min_count", "vocabulary_max_rows": "vocabulary.max_rows",
                           "vocabulary_recovery_steps": "vocabulary.recovery_steps",
                           "vocabulary_recovery_learning_rate": "vocabulary.recovery_learning_rate"}
IMPORT_FLAGS: Flags = {"dataset": "dataset"}

# Where a training command reads its recipe from: a preset or file, and --set.
recipe_source_options = [
    click.option("--task", default="sentiment", show_default=True, help=f"One of: {', '.join(TASKS)}."),
    click.option("--eval-file", type=click.Path(path_type=Path), default=None, help="Evaluation file for a local dataset."),
    click.option("--preset", default="default", show_default=True, help="Recipe pocketbert/configs/<task>-<preset>.yaml."),
    click.option("--config", type=click.Path(path_type=Path), default=None, help="A recipe YAML file instead of a preset."),
    click.option("--set", "set_items", multiple=True, metavar="KEY=VALUE", help="Override any recipe key, e.g. distill.temperature=4."),
]


batch_size_option = click.option(
    "--batch-size", "large_batch", type=click.IntRange(min=1), default=None, metavar="N",
    help="Train with batches of N (global: N x processes); the learning rate is scaled from the recipe's batch "
         "by sqrt(N / batch) (distill.lr_scaling), and warm-up stays the same share of the examples.")


def with_large_batch(recipe, section: str, batch: int | None):
    """The recipe at batch size `batch`, its learning rate stated for the batch it was set for (base_batch_size)."""
    from pocketbert.core.config.recipe import with_overrides

    if batch is None:
        return recipe
    cfg = getattr(recipe, section)
    return with_overrides(recipe, {f"{section}.batch_size": batch,
                                   f"{section}.base_batch_size": cfg.base_batch_size or cfg.batch_size})


def with_options(options):
    def decorate(func):
        for option in reversed(options):
            func = option(func)
        return func
    return decorate


@click.group()
def train():
    """Fine-tune a teacher, then distil it into a student."""


@train.command()
@run_option
@click.option("--model", "model_name", default="minilm", show_default=True,
              help="Checkpoint to fine-tune: 'minilm' (packaged all-MiniLM-L6-v2), a hub name, or a local folder.")
@with_options(recipe_source_options)
@with_flags(TEACHER_FLAGS)
@click.option("--labels", default=None, help="Comma-separated label names for a local dataset (default: from the file).")
@click.option("--resume", is_flag=True, help="Continue from the run's last checkpoint after an interruption.")
@click.option("--trust-remote-code", is_flag=True,
              help="Run Python code shipped with the checkpoint (off: only the model's weights and config are read).")
@batch_size_option
@data_dir_option
@device_option
@overwrite_option
@launch_env.checked
@locks("run", joins_launched_group=True)
def teacher(run, model_name, task, eval_file, preset, config, set_items, labels, resume, trust_remote_code, large_batch,
            data_dir, device, overwrite, **options):
    """Fine-tune a BERT-family checkpoint for the task; writes <run>/teacher/."""
    from pocketbert.core.tasks.data import parse_labels_option
    from pocketbert.train import registry
    from pocketbert.train.stage import StageRun, run_stage

    recipe = with_large_batch(_recipe(task, preset, config, overrides(options, TEACHER_FLAGS), set_items), "teacher",
                              large_batch)
    label_names = parse_labels_option(labels, recipe.dataset)
    path, metrics = run_stage(registry.create(registry.TEACHER), StageRun(
        resolve_run_dir(run), recipe, data_dir, eval_file, source=model_name, label_names=label_names,
        trust_remote_code=trust_remote_code, device=device, overwrite=overwrite, resume=resume))
    _say(f"teacher: {_format_metrics(metrics)} -> wrote {path}")


@train.command(cls=WithRecipeFlags, recipes_of="distill")
@run_option
@click.option("--teacher", "teacher_dir", type=click.Path(path_type=Path), default=None,
              help="A fine-tuned teacher folder (default: <run>/teacher).")
@with_options(recipe_source_options)
@with_flags(DISTILL_FLAGS)
@click.option("--resume", is_flag=True, help="Continue from the run's last checkpoint after an interruption.")
@batch_size_option
@data_dir_option
@device_option
@overwrite_option
@launch_env.checked
@locks("run", joins_launched_group=True)
def distill(run, teacher_dir, task, eval_file, preset, config, set_items, resume, large_batch, data_dir, device,
            overwrite, **options):
    """Distil the teacher into a student (half its layers, one of any shape, a BiLSTM or static embeddings); writes
    <run>/student/."""
    from pocketbert.core.tasks.data import check_cross_domain
    from pocketbert.core.config.recipe import cross_domain_datasets
    from pocketbert.train import registry
    from pocketbert.train.stage import StageRun, run_stage

    flags = {**DISTILL_FLAGS, **click.get_current_context().command.recipe_flags()}
    recipe = with_large_batch(_recipe(task, preset, config, overrides(options, flags), set_items), "distill",
                              large_batch)
    check_cross_domain(cross_domain_datasets(recipe), recipe.task)
    path, result = run_stage(registry.create(recipe.distill.recipe, "distill"), StageRun(
        resolve_run_dir(run), recipe, data_dir, eval_file, teacher_dir=teacher_dir, device=device,
        overwrite=overwrite, resume=resume))
    kept = f", {100 * result['kept']:.1f} % of the teacher's" if result["kept"] is not None else ""
    _say(f"student: {_format_metrics(result['eval'])} (teacher {_format_metrics(result['teacher_eval'])}{kept})"
         f" -> wrote {path}")
    if result.get("transfer_data"):
        used = result["transfer_data"]
        _say(f"  transfer data: {used['rows']:,} unlabelled rows beside {used['labelled_rows']:,} labelled "
             f"({100 * used['share_of_rows']:.0f} % of the training rows), from "
             + ", ".join(s["source"] for s in used["sources"]))
    for name, pair in result.get("cross_domain", {}).items():
        _say(f"  on {name}: student {_format_metrics(pair['student'])}; teacher {_format_metrics(pair['teacher'])}")


def _say(message: str) -> None:
    """Under torchrun, process 0 speaks for all."""
    from pocketbert.train.distributed import is_main

    if is_main():
        click.echo(message)


def _format_metrics(metrics: dict) -> str:
    return ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items())


@train.command()
@run_option
@click.option("--teacher", "teacher_dir", type=click.Path(path_type=Path), default=None,
              help="A fine-tuned teacher folder (default: <run>/teacher).")
@with_options(recipe_source_options)
@with_flags(ABLATE_FLAGS)
@click.option("--variants", default=None, metavar="NAME,...",
              help="Variants to run (default all of the recipe's): distilbert's full, no_kl, no_ce, no_cos, "
                   "random_init; layerwise's also no_hidden, no_embedding, no_attention, no_relation.")
@data_dir_option
@device_option
@launch_env.checked
@locks("run", joins_launched_group=True)
def ablate(run, teacher_dir, task, eval_file, preset, config, set_items, variants, data_dir, device, **options):
    """Distil with each loss removed in turn and from a random student; writes <run>/ablation/ablation.md."""
    from pocketbert.core.run.run_files import ABLATION_DIR, ABLATION_TABLE
    from pocketbert.train.ablate import ablate as run_ablation

    recipe = _recipe(task, preset, config, overrides(options, ABLATE_FLAGS), set_items)
    run_dir = resolve_run_dir(run)
    run_ablation(run_dir, recipe, teacher_dir, data_dir, device,
                 [v.strip() for v in variants.split(",")] if variants else None)
    table = run_dir / ABLATION_DIR / ABLATION_TABLE
    _say(table.read_text() + f"-> wrote {table}")


@train.command()
@run_option
@click.option("--teacher-model", "teacher_model", required=True, metavar="NAME|PATH",
              help="A checkpoint with its masked-LM head (a hub name like bert-base-uncased, or a local folder).")
@click.option("--corpus", type=click.Path(path_type=Path), required=True, help="Plain UTF-8 text, one passage a line.")
@click.option("--task", default="sentiment", show_default=True, help="Recipe file family to read the mlm: section from.")
@click.option("--preset", default="default", show_default=True, help="Recipe pocketbert/configs/<task>-<preset>.yaml.")
@click.option("--config", type=click.Path(path_type=Path), default=None, help="A recipe YAML file instead of a preset.")
@with_flags(MLM_FLAGS)
@click.option("--set", "set_items", multiple=True, metavar="KEY=VALUE", help="Override a recipe key, e.g. mlm.epochs=2.")
@click.option("--resume", is_flag=True, help="Continue from the run's last checkpoint after an interruption.")
@device_option
@overwrite_option
@launch_env.checked
@locks("run", joins_launched_group=True)
def mlm(run, teacher_model, corpus, task, preset, config, set_items, resume, device, overwrite, **options):
    """Masked-LM distillation on plain text (task-agnostic); writes <run>/student_mlm/ for --student-model."""
    from pocketbert.train import registry
    from pocketbert.train.stage import StageRun, run_stage

    recipe = _recipe(task, preset, config, overrides(options, MLM_FLAGS), set_items)
    path, result = run_stage(registry.create(registry.MASKED_LM), StageRun(
        resolve_run_dir(run), recipe, source=teacher_model, corpus=corpus, device=device, overwrite=overwrite,
        resume=resume))
    ppl = result["perplexity"]
    _say(f"masked-LM student: held-out perplexity {ppl['student']:.2f} (teacher {ppl['teacher']:.2f}) -> wrote {path}")


@train.command()
@run_option
@click.option("--out-run", type=click.Path(path_type=Path), default=None,
              help="Run directory for the pruned student (default: <run>-pruned beside the run).")
@click.option("--teacher", "teacher_dir", type=click.Path(path_type=Path), default=None,
              help="Teacher for the recovery (default: the one the student was distilled from).")
@with_options(recipe_source_options)
@with_flags(PRUNE_FLAGS)
@data_dir_option
@device_option
@overwrite_option
@launch_env.checked
@locks("out_run", reads=("run",), default_out="-pruned", joins_launched_group=True)
def prune(run, out_run, teacher_dir, task, eval_file, preset, config, set_items, data_dir, device, overwrite,
          **options):
    """Prune the student's FFN channels (torch-pruning) and recover by distillation; writes <run>-pruned/student/."""
    from pocketbert.train.prune import prune_student

    recipe = _recipe(task, preset, config, overrides(options, PRUNE_FLAGS), set_items)
    path, result = prune_student(resolve_run_dir(run), recipe, out_run, data_dir, device, overwrite, teacher_dir)
    p = result["pruning"]
    _say(f"pruned FFN {p['intermediate_size_before']} -> {p['intermediate_size_after']} channels, "
         f"{p['parameters_before']:,} -> {p['parameters_after']:,} parameters; after recovery "
         f"{_format_metrics(result['eval'])} (teacher {_format_metrics(result['teacher_eval'])}) -> wrote {path}")


@train.command()
@run_option
@with_flags(VOCABULARY_FLAGS)
@click.option("--set", "set_items", multiple=True, metavar="KEY=VALUE",
              help="Override a key of the student's recipe, e.g. transfer.data=[app.txt] (count your app's text too).")
@click.option("--resume", is_flag=True, help="Continue from the run's last checkpoint after an interruption.")
@data_dir_option
@device_option
@overwrite_option
@launch_env.checked
@locks("run", joins_launched_group=True)
def vocabulary(run, set_items, resume, data_dir, device, overwrite, **options):
    """Fit the student's vocabulary to the recipe's training and transfer text (never its evaluation text), then
    recover it by a short distillation toward the full student; writes <run>/student_fitted/ for `export --vocabulary
    fitted`."""
    from pocketbert.core.config.recipe import complete_recipe, parse_set_options, with_overrides
    from pocketbert.core.errors import ConfigError
    from pocketbert.core.run.atomic_folder import require_stage
    from pocketbert.core.run.manifest import read_manifest
    from pocketbert.core.run.run_files import STUDENT_DIR
    from pocketbert.train.vocabulary.step import FIT_READS, STAGE_MADE_BY, fit_recipe

    given = parse_set_options(tuple(set_items))
    elsewhere = sorted(key for key in given if "." in key and key.split(".")[0] not in FIT_READS)
    if elsewhere:  # a setting of a section the fit never reads would be taken and ignored
        raise ConfigError(f"train vocabulary reads the {', '.join(FIT_READS[:-1])} and {FIT_READS[-1]} sections, not "
                          f"{', '.join(elsewhere)}: give those to the stage that reads them (--set on "
                          "`pocketbert train teacher` or `train distill`)")
    run_dir = resolve_run_dir(run)
    student = require_stage(run_dir, STUDENT_DIR, STAGE_MADE_BY)
    # the student's recorded recipe, every default filled, with the options and --set pairs over it
    recipe = with_overrides(complete_recipe(read_manifest(student).config.recipe),
                            {**overrides(options, VOCABULARY_FLAGS), **given}, keep_none=True)
    path, record = fit_recipe(run_dir, recipe, data_dir, device, overwrite, resume)
    cost, recovery, lacked = record.against_full_student, record.recovery, record.eval_unknown_rate
    recovered = (f"; {recovery.steps} recovery steps, loss {recovery.loss_before:.4f} -> {recovery.loss_after:.4f}"
                 if recovery is not None and recovery.steps else "")
    lacked = f", lacking {100 * lacked:.2f} % of the eval text's pieces" if lacked is not None else ""
    _say(f"vocabulary fitted: {record.rows_before} -> {record.rows_after} rows{lacked}{recovered}; against the full "
         f"vocabulary on {cost.examples} eval examples: agreement {cost.agreement:.4f}, {cost.metrics_line()} -> "
         f"wrote {path}")


# `pocketbert bench train`: pocketbert/cli.py hangs it under the bench group, beside the latency commands.
@click.command("train")
@run_option
@click.option("--teacher", "teacher_dir", type=click.Path(path_type=Path), default=None,
              help="A fine-tuned teacher folder (default: <run>/teacher).")
@click.option("--task", default="sentiment", show_default=True, help="sentiment or qa.")
@click.option("--preset", default="default", show_default=True, help="Recipe pocketbert/configs/<task>-<preset>.yaml.")
@click.option("--examples", type=COUNT, default=2000, show_default=True, help="Training examples in the timed epoch.")
@data_dir_option
@device_option
@launch_env.checked
@locks("run", joins_launched_group=True)
def bench_train(run, teacher_dir, task, preset, examples, data_dir, device):
    """Examples/s of a distillation epoch against a reference loop (max-length padding, teacher every step)."""
    from pocketbert.core.config.recipe import read_recipe
    from pocketbert.core.run.run_files import TRAIN_BENCH_RESULTS
    from pocketbert.train.train_bench import bench_train

    run_dir = resolve_run_dir(run)
    result = bench_train(run_dir, read_recipe(task, preset), examples, teacher_dir, data_dir, device)
    t = result["timings"]
    click.echo(f"{result['examples']} examples, batch {result['batch_size']}, max length {result['max_length']} "
               f"(mean {result['mean_length']:.1f}), {result['device']}, {result['threads']} threads")
    for name, label in (("reference", "reference loop"), ("pocketbert_cold_cache", "pocketbert, cache filled now"),
                        ("pocketbert_warm_cache", "pocketbert, cache on disk")):
        click.echo(f"  {label:30s} {t[name]['examples_per_second']:8.1f} examples/s  ({t[name]['seconds']:.1f} s, "
                   f"median of {result['repeats']}, spread {100 * t[name]['spread']:.1f} %)")
    click.echo(f"speed-up: {result['speedup_warm_cache']:.2f}x with the cache on disk, "
               f"{result['speedup_cold_cache']:.2f}x filling it -> wrote {run_dir / TRAIN_BENCH_RESULTS}")


@click.command("import")
@run_option
@click.option("--model", "model_name", required=True,
              help="A fine-tuned checkpoint: a Hugging Face folder (config.json, weights, tokenizer) or a hub name.")
@click.option("--task", default="sentiment", show_default=True, help=f"One of: {', '.join(TASKS)}.")
@with_flags(IMPORT_FLAGS)
@click.option("--preset", default="default", show_default=True,
              help="Recipe whose export and bench sections the run keeps.")
@click.option("--config", type=click.Path(path_type=Path), default=None, help="A recipe YAML file instead of a preset.")
@click.option("--set", "set_items", multiple=True, metavar="KEY=VALUE", help="Override any recipe key.")
@click.option("--trust-remote-code", is_flag=True,
              help="Run Python code shipped with the checkpoint (off: only the model's weights and config are read).")
@data_dir_option
@overwrite_option
@locks("run")
def import_model(run, model_name, task, preset, config, set_items, trust_remote_code, data_dir, overwrite, **options):
    """Make a run whose student is an existing fine-tuned checkpoint; writes <run>/student/ for export and bench."""
    from pocketbert.train.imported import import_student

    recipe = _recipe(task, preset, config, overrides(options, IMPORT_FLAGS), set_items)
    path, metrics = import_student(model_name, task, resolve_run_dir(run), recipe, data_dir, trust_remote_code,
                                   overwrite)
    _say(f"imported: {_format_metrics(metrics)} -> wrote {path}")
