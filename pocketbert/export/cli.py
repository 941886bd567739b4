"""`pocketbert export`: a thin command over export.pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

import click

from pocketbert.core.config import export_families as families
from pocketbert.core.config.cli_options import (
    comma_list,
    data_dir_option,
    locks,
    overwrite_option,
    resolve_run_dir,
    run_option,
)
from pocketbert.core.config.recipe_options import overrides, with_flags
from pocketbert.core.run.run_files import ANDROID_APP_DIR, IOS_APP_DIR

if TYPE_CHECKING:  # the recipe's models load pydantic: not for `pocketbert --help`
    from pocketbert.core.config.recipe import Recipe

executorch_option = click.option("--executorch", is_flag=True,
                                 help="Also carry model.int8.pte, with code for ExecuTorch's runtime (sentiment).")
text_in_option = click.option("--text-in", is_flag=True,
                              help="Ship the text-in model (the tokenizer inside, onnxruntime-extensions) instead of "
                                   "the ids-in one with BertTokenizer.kt; that package's Android build is not 16 KB "
                                   "aligned, which Google Play refuses for Android 15+ targets.")
# The export settings offered as options, made from their recipe fields (core/config/recipe_options.py): type, bounds
# and help come from the field in core/config/recipe.py's ExportSection (or VocabularySection, the settings of the
# vocabulary fit an export may run first), so a setting is one field there and one line here.
EXPORT_FLAGS = {
    "parity_examples": "export.parity_examples",
    "coreml_examples": "export.coreml_parity_examples",
    "vocabulary": "export.vocabulary",
    "vocabulary_min_count": "vocabulary.min_count",
    "vocabulary_max_rows": "vocabulary.max_rows",
    "vocabulary_recovery_steps": "vocabulary.recovery_steps",
    "embedding_int4_share": "export.embedding_int4_share",
    "int8_activation_scale": "export.int8_activation_scale",
    "jobs": "export.jobs",
}
# Steps that make the student the export reads, each step(request) run by this command before the export (never by
# export/steps/pipeline.py, which trains nothing): pocketbert/cli.py adds training's vocabulary fit, so that
# `export --vocabulary fitted` fits one first where the run lacks it.
STUDENT_STEPS: list = []
SET_SECTIONS = ("export", "vocabulary")  # the recipe sections --set takes keys of: the export's and its fit's
out_option = click.option("--out", type=click.Path(path_type=Path), default=None,
                          help="Folder to write (default: <run>/ios or <run>/android).")


@click.group(invoke_without_command=True)
@click.option("--run", "--run-dir", "run", default=None, metavar="NAME|PATH",
              help="Run directory: a name under runs/, or a path.")
@data_dir_option
# The program lists stay written out: given here they are programs asked for by name (one that does not apply to
# the student is refused, where the recipe's list is cut to those that apply: ExportFamily.choose), and 'none'
# spells an empty list; a field's option has neither.
@click.option("--coreml-variants", default=None, metavar="V,...",
              callback=comma_list(str, "variant names", "fp16,int8", unique=True),
              help=f"Core ML programs: {', '.join(families.COREML.names)} (default: the recipe's).")
@click.option("--coreai-variants", default=None, metavar="V,...",
              callback=comma_list(str, "variant names", "fp16,int8 (or none)", unique=True),
              help=f"Core AI (iOS 27) programs: {', '.join(families.COREAI.names)} (default: the recipe's; 'none' "
                   "leaves Core AI out).")
@click.option("--executorch-variants", default=None, metavar="V,...",
              callback=comma_list(str, "variant names", "pte,pte-int8 (or none)", unique=True),
              help=f"ExecuTorch programs: {', '.join(families.EXECUTORCH.names)} (default: the recipe's, else "
                   "every one the student can take; 'none' leaves ExecuTorch out).")
@overwrite_option
@with_flags(EXPORT_FLAGS)
@click.option("--set", "set_items", multiple=True, metavar="SECTION.KEY=VALUE",
              help="Override any key of the recipe's export or vocabulary section, e.g. "
                   "export.int8_latency_budget=null or vocabulary.min_count=3.")
@click.pass_context
@locks("run")
def export(ctx, run, data_dir, coreml_variants, coreai_variants, executorch_variants, set_items, overwrite,
           **from_fields):
    """Export <run>/student to ONNX (fp32, fp16, int8), ORT Mobile, ExecuTorch, Core ML and Core AI; writes <run>/export/.

    `export ios` and `export android` then make the folder an app takes."""
    from pocketbert.core.config.export_request import ExportRequest
    from pocketbert.core.errors import ConfigError
    from pocketbert.core.run.manifest import read_manifest, verified_stage
    from pocketbert.core.run.stage_records import ExportRecord
    from pocketbert.core.run.run_files import STUDENT_DIR
    from pocketbert.export.steps.pipeline import export_run
    from pocketbert.export.steps.plan import check_request

    if ctx.invoked_subcommand is not None:
        return
    if run is None:
        raise ConfigError("export needs --run: the run directory whose student to export")
    coreai = [] if coreai_variants == ["none"] else coreai_variants
    executorch = [] if executorch_variants == ["none"] else executorch_variants

    # The request, built and validated once, before any step runs, then every refusal the plan can make from files.
    asked = {families.COREML: coreml_variants, families.COREAI: coreai, families.EXECUTORCH: executorch}
    run_dir = resolve_run_dir(run)
    student = []

    def recorded_recipe() -> dict:
        student.extend(verified_stage(run_dir, STUDENT_DIR, "pocketbert train distill"))
        return student[1].config.recipe

    recipe, given = command_line_recipe(ctx, recorded_recipe)
    request = ExportRequest(run_dir, data_dir, student[0], recipe, given, asked, overwrite)
    check_request(request)
    for step in STUDENT_STEPS:
        step(request)
    path, results = export_run(request)
    for r in results:
        metric = ", ".join(f"{k} {v:.4f}" for k, v in r.metrics.items() if isinstance(v, float))
        click.echo(f"  {r.artifact:<40} {r.runtime:<24} agreement {r.agreement:.4f}  max|diff| {r.max_abs_diff:.2e}  "
                   f"{metric}  {1000 * r.seconds_per_sequence:.1f} ms/sequence")
    fitted = read_manifest(path, ExportRecord).metrics.vocabulary
    if fitted is not None and fitted.against_full_student is not None:
        cost = fitted.against_full_student
        click.echo(f"  vocabulary fitted: {fitted.rows_before} -> {fitted.rows_after} rows; against the full "
                   f"vocabulary on {cost.examples} eval examples: agreement {cost.agreement:.4f}, {cost.metrics_line()}")
        for name, other in (fitted.against_full_student_across_domains or {}).items():
            click.echo(f"    on {other.examples} {name} examples: agreement {other.agreement:.4f}, "
                       f"{other.metrics_line()}")
    click.echo(f"export: {len(results)} models passed the parity check -> wrote {path}")


def command_line_recipe(ctx: click.Context, recorded: Callable[[], dict]) -> tuple[Recipe, frozenset[str]]:
    """The student's recorded recipe with the export command's settings over it, validated once, and the recipe keys
    the command line set, dotted (export.jobs, vocabulary.min_count): the options made from fields (EXPORT_FLAGS) and
    --set export.KEY=VALUE or vocabulary.KEY=VALUE, an option and --set setting one key refused, each checked before
    recorded() reads the run. Reads the command's own parameters (ctx.params)."""
    from pocketbert.core.config.recipe import known_keys, sections_overrides, with_overrides
    from pocketbert.core.errors import ConfigError

    params = ctx.params
    given = overrides(params, EXPORT_FLAGS)
    given_set = sections_overrides(SET_SECTIONS, params["set_items"], "export.int8_size_budget=0.4")
    listed = {f"export.{name}" for name in ("coreml_variants", "coreai_variants", "executorch_variants")}
    twice = sorted(key for key in given_set
                   if key in given or (key in listed and params.get(key.removeprefix("export.")) is not None))
    if twice:
        raise ConfigError(f"an option and --set {twice[0]} both set {twice[0].partition('.')[2]}; keep one")
    given.update(given_set)
    recipe = with_overrides(known_keys(recorded()),  # every default filled, validated once
                            given, "export option" if given else "the recorded recipe", keep_none=True)
    return recipe, frozenset(given)


def _named_program(ctx, param, value: str | None) -> str | None:
    """An empty --variant would ship the default without a word: a program is named, or the option left out."""
    from pocketbert.core.errors import ConfigError

    if value is not None and not value.strip():
        raise ConfigError("--variant names no program: name one (e.g. ane, fp16) or leave --variant out for the "
                          "default")
    return value


@export.command()
@run_option
@click.option("--target", type=click.Choice(["coreml", "ios27"]), default="coreml", show_default=True,
              help="coreml: a Core ML package (iOS 16, or 18 for enumerated and int4-block); ios27: the Core AI "
                   ".aimodel (iOS 27).")
@click.option("--variant", default=None, callback=_named_program,
              help=f"Core ML program: {', '.join(families.COREML.names)} (default: the first of "
                   f"{', '.join(families.IOS_APP_PROGRAMS)} the export made); with --target ios27 the Core AI "
                   f"program: {', '.join(families.COREAI.names)} (default: the first exported).")
@executorch_option
@out_option
@overwrite_option
@locks("out", reads=("run",), default_out=IOS_APP_DIR)
def ios(run, target, variant, executorch, out, overwrite):
    """The .mlpackage (or with --target ios27 the .aimodel), swift-transformers tokenizer files, labels and a Swift
    README; writes <run>/ios/."""
    from pocketbert.export.app.app_folders import ios_bundle

    click.echo(f"wrote {ios_bundle(resolve_run_dir(run), variant, out, overwrite, executorch, target)}")


@export.command()
@run_option
@executorch_option
@text_in_option
@out_option
@overwrite_option
@locks("out", reads=("run",), default_out=ANDROID_APP_DIR)
def android(run, executorch, text_in, out, overwrite):
    """model.ort (token ids in) with BertTokenizer.kt and its tables (or with --text-in the model with the tokenizer
    inside), its operator list, labels and a Kotlin README; writes <run>/android/."""
    from pocketbert.export.app.app_folders import android_bundle
    from pocketbert.export.app.app_readme import TEXT_IN_WARNING

    if text_in:
        click.echo(f"warning: {TEXT_IN_WARNING}", err=True)
    click.echo(f"wrote {android_bundle(resolve_run_dir(run), out, overwrite, executorch, text_in)}")
