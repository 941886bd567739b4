"""`pocketbert bench`: measure and report; `bench import` a phone measurement; `bench compare` two results.
(`bench train`, the speed of a distillation epoch, is training's own command: pocketbert/train/cli.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import click

from pocketbert.core.config.cli_options import (COUNT, POSITIVE, OneOf, locks, overwrite_option, resolve_run_dir,
                                                thread_list)
from pocketbert.mobile_bench.reports.results_diff import DEFAULT_THRESHOLD_PERCENT
from pocketbert.core.run.run_files import DEVICE_KIT_DIR

PHONE_PRECISIONS = ("fp32", "fp16", "int8", "6bit", "4bit", "int4-block")  # of a measured .mlpackage

DEVICE_KEY = re.compile(r"^[a-z0-9][a-z0-9-]*$")


@click.group(invoke_without_command=True)
@click.option("--run", "run", default=None, metavar="NAME|PATH", help="Run directory: a name under runs/, or a path.")
@click.option("--reference", "reference_source", default=None,
              help="BERT-base checkpoint (hub name or folder); default: its architecture built from the config.")
@click.option("--threads", default=None, help="Comma-separated ONNX Runtime thread counts (default: the recipe's).")
@click.option("--time-cap", type=POSITIVE, default=None,
              help="Seconds of timed repeats per configuration at most (default: the recipe's).")
@click.option("--set", "set_items", multiple=True, metavar="bench.KEY=VALUE",
              help="Override a key of the recipe's bench section, e.g. bench.sequence_sweep=[128].")
@overwrite_option
@click.pass_context
@locks("run")
def bench(ctx, run, reference_source, threads, time_cap, set_items, overwrite):
    """Time the exported student against BERT-base (and its teacher); write <run>/bench/results.json,
    report.md and report.html.

    \b
    Subcommands:
      pocketbert bench import FILE --run R --device iphone-15-pro   a phone measurement into the report
      pocketbert bench compare A.json B.json                        changes between two results, noise-aware
      pocketbert bench calibration                                  published phone figures beside their floors
      pocketbert bench kit --run R                                  a Swift package that measures on a Mac/iPhone
    """
    if ctx.invoked_subcommand is not None:
        return
    from pocketbert.core.errors import ConfigError
    from pocketbert.mobile_bench.reports.report import headline_sentence
    from pocketbert.mobile_bench.steps.run import bench_run

    if run is None:
        raise ConfigError("name the run to benchmark: pocketbert bench --run NAME")
    overrides = bench_overrides(set_items)
    path, results = bench_run(resolve_run_dir(run), overwrite, reference_source, thread_list(threads, "--threads"),
                              time_cap, overrides)
    click.echo(headline_sentence(results))
    check = results.get("architecture_check")
    if check:
        click.echo(f"architecture check: 6-of-12-layer student / BERT-base = {check['latency_ratio']:.3f} measured, "
                   f"{check['flop_ratio']:.3f} in FLOPs (bar {check['bar']})")
    click.echo(f"bench: {len(results['measurements'])} measurements in {results['wall_time_s']} s -> wrote "
               f"{path}/results.json, report.md and report.html")


def bench_overrides(set_items: tuple[str, ...]) -> dict:
    """--set bench.KEY=VALUE pairs as bench-section keys, checked with the recipe's rules before any timing."""
    from pocketbert.core.config.recipe import section_overrides

    return section_overrides("bench", set_items, "bench.time_cap_s=2")


@bench.command("import")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--run", "run", required=True, metavar="NAME|PATH", help="Run directory the measurement belongs to.")
@click.option("--device", "device_key", required=True,
              help="Device key, e.g. iphone-15-pro (the keys of device_profiles.yaml get roofline floors).")
@click.option("--model", default="student", show_default=True, help="Which model was measured: student, bert-base, teacher.")
@click.option("--precision", type=OneOf(PHONE_PRECISIONS), default="fp16", show_default=True, help="Precision of the measured .mlpackage.")
@click.option("--sequence-length", type=COUNT, default=None, help="Sequence length measured (default: the bench's).")
@click.option("--batch", type=COUNT, default=1, show_default=True)
@locks("run")
def import_measurement(file, run, device_key, model, precision, sequence_length, batch):
    """Bring a latency measured on a phone (Xcode performance report or coremltools benchmark JSON) into the run."""
    from pocketbert.core.errors import ConfigError
    from pocketbert.mobile_bench.steps.run import import_phone_measurement

    if not DEVICE_KEY.match(device_key):
        raise ConfigError(f"--device must be a key like iphone-15-pro (lower case, digits, '-'), got '{device_key}'")
    if model not in ("student", "bert-base", "teacher"):
        raise ConfigError(f"--model must be student, bert-base or teacher (got '{model}')")
    saved, refreshed = import_phone_measurement(resolve_run_dir(run), Path(file), device_key, model, precision,
                                                batch, sequence_length)
    click.echo(f"bench import: {saved}" + (f"; re-rendered {refreshed}" if refreshed else
                                           "; run `pocketbert bench` to include it in the report"))


@bench.command("compare")
@click.argument("before", type=click.Path(path_type=Path))
@click.argument("after", type=click.Path(path_type=Path))
@click.option("--threshold", type=POSITIVE, default=DEFAULT_THRESHOLD_PERCENT, show_default=True, metavar="PERCENT",
              help="A measurement without an interval (a phone import) regresses when this much slower.")
@click.option("--allow-missing", is_flag=True,
              help="Compare what both files measured when the second lacks some of the first's measurements "
                   "(default: refused, exit 2).")
def compare(before, after, threshold, allow_missing):
    """Change between two results.json files, BEFORE the baseline. Exit status: 0 when every measurement of
    BEFORE was compared and none got slower beyond noise (or beyond --threshold where it has no interval); 1 when
    one did; 2 when the files cannot be compared (unreadable, empty, a setting given twice, nothing in common,
    a measurement of BEFORE missing from AFTER); 70 a bug in pocketbert."""
    import sys

    from pocketbert.core.process import exit_codes
    from pocketbert.mobile_bench.reports.results_diff import (
        compare_results,
        load_results,
        render_comparison,
    )

    result = compare_results(load_results(before), load_results(after), threshold, allow_missing,
                             names=(before, after))
    click.echo(render_comparison(result))
    if result["regressions"]:
        sys.exit(exit_codes.FINDING)


@bench.command("calibration")
@click.option("--out", "out", type=click.Path(path_type=Path), default=None,
              help="Also write calibration.json and calibration.md into this folder (replaced as a whole).")
@locks("out")
def calibration_command(out):
    """Published device measurements beside pocketbert's floor for each, and the calibration factors."""
    from pocketbert.mobile_bench.reports.calibration_report import render_calibration, write_calibration

    text, table = render_calibration()
    click.echo(text)
    if out is not None:
        click.echo(f"bench calibration: wrote {write_calibration(Path(out), text, table)}")


@bench.command("kit")
@click.option("--run", "run", required=True, metavar="NAME|PATH", help="Run directory whose export to measure.")
@click.option("--out", "out", type=click.Path(path_type=Path), default=None,
              help="Folder to write (default: <run>/device_kit).")
@overwrite_option
@locks("out", reads=("run",), default_out=DEVICE_KIT_DIR)
def kit_command(run, out, overwrite):
    """A Swift package that loads each Apple program of the export on a Mac or an iPhone, prints where each
    operation is planned, times load, first and warm predictions, and writes a JSON `bench import` reads."""
    from pocketbert.mobile_bench.device.kit import write_kit

    folder = write_kit(resolve_run_dir(run), out, overwrite)
    click.echo(f"bench kit: wrote {folder} (build it with Xcode on a Mac; see its README.md)")
