"""`pocketbert inspect` and `pocketbert compare`: thin commands that parse, check and call the library."""

from __future__ import annotations

import json
from pathlib import Path

import click

from pocketbert.core.config.cli_options import (
    COUNT,
    POSITIVE,
    THREADS,
    Number,
    OneOf,
    data_dir_option,
    locks,
    overwrite_option,
    resolve_run_dir,
    run_option,
)

COMPARED_RUNTIMES = ("onnxruntime", "pytorch", "coreml", "executorch")  # what bench measures
COMPARED_FORMATS = ("onnx", "ort", "pytorch", "mlpackage", "pte")


@click.command()
@run_option
@click.option("--datasets", default=None, metavar="NAME,...",
              help="Datasets to look at (default: the training dataset and its cross-domain ones).")
@click.option("--examples", type=COUNT, default=500, show_default=True, help="Eval examples per dataset.")
@click.option("--pooling", type=click.Choice(["cls", "mean"]), default="cls", show_default=True,
              help="Sentence embedding: the [CLS] state or the mean of the token states (last layer).")
@click.option("--clusters", type=Number(int, 2), default=9, show_default=True, help="Gaussian-mixture components.")
@click.option("--perplexity", type=POSITIVE, default=30.0, show_default=True, help="t-SNE perplexity.")
@data_dir_option
@overwrite_option
@locks("run")
def inspect(run, datasets, examples, pooling, clusters, perplexity, data_dir, overwrite):
    """Teacher beside student: t-SNE and clusters of embeddings, a linear probe, attention, confusion matrices."""
    from pocketbert.core.errors import ConfigError
    from pocketbert.inspect import report
    from pocketbert.inspect.collect import inspect_run
    from pocketbert.core.run.atomic_folder import check_writable, staged_output
    from pocketbert.core.run.run_files import INSPECT_DIR, INSPECT_HTML, INSPECT_RESULTS, INSPECT_TABLE

    if clusters < 2:
        raise ConfigError(f"--clusters must be at least 2 (got {clusters})")
    run_dir = resolve_run_dir(run)
    check_writable(run_dir, INSPECT_DIR, overwrite)
    names = [n.strip() for n in datasets.split(",") if n.strip()] if datasets else None
    result = inspect_run(run_dir, names, examples, data_dir, pooling, clusters, perplexity)
    with staged_output(run_dir, INSPECT_DIR, overwrite) as out:
        (out / INSPECT_RESULTS).write_text(json.dumps(result) + "\n")
        markdown, _ = report.render(json.loads((out / INSPECT_RESULTS).read_text()), out)
        (out / INSPECT_TABLE).write_text(markdown)
        (out / INSPECT_HTML).write_text(report.to_html(markdown, out))
    for name, data in result["datasets"].items():
        t, s = data["models"]["teacher"], data["models"]["student"]
        click.echo(f"{name}: accuracy teacher {t['accuracy']:.4f} / student {s['accuracy']:.4f}; linear probe "
                   f"{report.number(t['probe']['accuracy'])} / {report.number(s['probe']['accuracy'])}; cluster "
                   f"purity {t['purity']:.3f} / {s['purity']:.3f}")
    click.echo(f"-> wrote {run_dir / INSPECT_DIR / INSPECT_TABLE} and {INSPECT_HTML}")


@click.command()
@click.argument("runs", nargs=-1, required=True)
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=Path("runs/compare"), show_default=True,
              help="Folder for compare.json, compare.md and compare.png.")
@click.option("--runtime", type=OneOf(COMPARED_RUNTIMES), default="onnxruntime", show_default=True, help="Runtime whose latency is compared.")
@click.option("--format", "model_format", type=OneOf(COMPARED_FORMATS), default="onnx", show_default=True, help="onnx, ort or pytorch.")
@click.option("--precision", type=OneOf(("fp32", "fp16", "int8")), default="int8", show_default=True, help="fp32 or int8.")
@click.option("--threads", type=THREADS, default=1, show_default=True, help="Thread count of the compared latency.")
@overwrite_option
@locks("out_dir", reads=("runs",))
def compare(runs, out_dir, runtime, model_format, precision, threads, overwrite):
    """Finished runs side by side: accuracy in and across domains, latency, size, training time; Pareto plot."""
    from pocketbert.inspect.run_comparison import MADE_BY, compare_runs, plot_pareto, render_table
    from pocketbert.core.run.run_files import COMPARE_PLOT, COMPARE_RESULTS, COMPARE_TABLE
    from pocketbert.core.run.user_paths import output_folder, written_output

    run_dirs = [resolve_run_dir(r) for r in runs]
    output_folder(out_dir, MADE_BY, overwrite, inputs=run_dirs, own_files=True)
    result = compare_runs(run_dirs, runtime, model_format, precision, threads)
    with written_output(out_dir, MADE_BY) as out:
        (out / COMPARE_RESULTS).write_text(json.dumps(result, indent=2) + "\n")
        stored = json.loads((out / COMPARE_RESULTS).read_text())
        (out / COMPARE_TABLE).write_text(render_table(stored))
        plot_pareto(stored, out / COMPARE_PLOT)
    click.echo((out_dir / COMPARE_TABLE).read_text().split("\n\nPareto:")[0])
    click.echo(f"-> wrote {out_dir / COMPARE_TABLE} and {COMPARE_PLOT}")
