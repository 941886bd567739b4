"""The `pocketbert` command. Stage commands are imported only when invoked, so --help stays instant."""

from __future__ import annotations

import importlib
import sys

import click

from pocketbert import __version__

STAGE_COMMANDS = {
    "train": ("pocketbert.train.cli", "train", "Fine-tune a teacher and distil it into a smaller student."),
    "import": ("pocketbert.train.cli", "import_model", "Make a run whose student is a fine-tuned checkpoint you have."),
    "export": ("pocketbert.export.cli", "export", "Export the student to ONNX, ORT Mobile and Core ML, with a parity check."),
    "bench": ("pocketbert.mobile_bench.cli", "bench", "Measure the student's latency against BERT-base and write the report."),
    "inspect": ("pocketbert.inspect.cli", "inspect", "Embeddings, clusters, attention and errors of teacher and student."),
    "compare": ("pocketbert.inspect.cli", "compare", "Which student to ship: finished runs side by side, with a Pareto plot."),
    "ladder": ("pocketbert.ladder.cli", "ladder", "From one teacher, a ladder of students built, exported, benched, plotted."),
}

# Commands a stage adds to another stage's group: `bench train` times training, so training owns it.
STAGE_SUBCOMMANDS = {"bench": {"train": ("pocketbert.train.cli", "bench_train")}}
def _export_steps_before() -> tuple[list, object]:
    """The export ships the student the run holds; where its request asks for a fitted vocabulary the run lacks,
    training's step fits one first (each step takes the export's typed request)."""
    from pocketbert.export.cli import STUDENT_STEPS
    from pocketbert.train.vocabulary.before_export import fit_before_export

    return STUDENT_STEPS, fit_before_export


# Steps one stage's command runs first, from another stage: the stage -> (its list of steps, the step), imported
# when the stage's command is, by a function whose imports the import graph shows.
STAGE_STEPS_BEFORE = {"export": _export_steps_before}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(STAGE_COMMANDS)

    def get_command(self, ctx, name):
        if name not in STAGE_COMMANDS:
            return None
        module, attr, _ = STAGE_COMMANDS[name]
        group = getattr(importlib.import_module(module), attr)
        for sub, (sub_module, sub_attr) in STAGE_SUBCOMMANDS.get(name, {}).items():
            if sub not in group.commands:
                group.add_command(getattr(importlib.import_module(sub_module), sub_attr), sub)
        if name in STAGE_STEPS_BEFORE:
            steps, step = STAGE_STEPS_BEFORE[name]()
            if step not in steps:
                steps.append(step)
        return group

    def format_commands(self, ctx, formatter):
        rows = [(name, STAGE_COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pocketbert")
def cli():
    """Distil a BERT-family model and ship it inside a phone app.

    \b
    Typical run:
      pocketbert train teacher --run sst2   # fine-tune the packaged MiniLM on SST-2
      pocketbert train distill --run sst2   # distil it into a student of half the layers
      pocketbert export --run sst2          # ONNX, int8 ONNX, .ort, .mlpackage + parity check
      pocketbert bench --run sst2           # latency against BERT-base, report.md
    """
    # Recipes are read with every training recipe's own settings, which the training registry hands to
    # core/config/recipe.py when it loads: in every command, so that the ladder checks its rungs' whole recipes too.
    importlib.import_module("pocketbert.train.registry")


# Loggers of dependencies that transformers imports on its own when they are installed (torchao comes with
# ExecuTorch): their start-up notes about GPU kernels this machine lacks are not the user's concern.
QUIET_LOGGERS = ("torchao", "torch.utils._pytree")


def end_progress_bars() -> None:
    """Close the progress bars a failure left open, so the error line starts a line of its own."""
    std = sys.modules.get("tqdm.std")
    for bar in list(getattr(getattr(std, "tqdm", None), "_instances", ())):
        try:
            bar.close()
        except Exception:  # noqa: BLE001 - a bar that cannot close must not hide the error
            pass


def main(argv=None) -> None:
    """The command with its error boundary: whatever ends it, the user reads one line and the exit status means
    one thing (pocketbert/core/process/exit_codes.py). POCKETBERT_DEBUG=1 shows the traceback above that line."""
    import logging

    from pocketbert.boundary import debug_requested, verdict
    from pocketbert.core.process.collector import collecting_less
    from pocketbert.core.process.parent_watch import stop_with_parent
    from pocketbert.core.process.termination import end_on_sigterm_as_on_ctrl_c

    end_on_sigterm_as_on_ctrl_c()  # before the parent watch, which ends this process with SIGTERM
    stop_with_parent()
    from pocketbert.core.process.launch_env import drop_invalid_thread_count, session_threads

    said = drop_invalid_thread_count()  # before torch loads, whose OpenMP would say it again in each process
    if said:
        click.echo(said, err=True)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    debug = False
    try:
        debug = debug_requested()  # read before the command: a value it cannot take is refused before any work
        session_threads()  # the sessions' thread cap, likewise
        with collecting_less():  # before the command's imports, which make most of the heap
            cli.main(args=argv, prog_name="pocketbert", standalone_mode=False)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - this is the one place every failure is said in one line
        line, code, debuggable = verdict(exc)
        end_progress_bars()
        if debuggable and debug:
            import traceback

            traceback.print_exception(exc)  # beside the line, never instead of its exit status
        if isinstance(exc, click.ClickException) and not line:
            exc.show()  # click's own usage text, then its `Error:` line
        else:
            click.echo(line, err=True)
        sys.exit(code)


if __name__ == "__main__":
    main()
