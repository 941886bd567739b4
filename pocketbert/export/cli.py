"""`pocketbert export`: a thin command over export.pipeline."""

from __future__ import annotations

import click

from pocketbert.cli_options import data_dir_option, overwrite_option, resolve_run_dir, run_option


@click.command()
@run_option
@data_dir_option
@click.option("--parity-examples", type=int, default=None, help="Eval examples for the ONNX parity check (default: recipe).")
@click.option("--coreml-examples", type=int, default=None, help="Eval examples for the Core ML parity check (default: recipe).")
@click.option("--coreml-variants", default=None, metavar="V,...",
              help="Core ML weight compressions: fp16,int8,6bit,4bit,int4-block (default: the recipe's).")
@overwrite_option
def export(run, data_dir, parity_examples, coreml_examples, coreml_variants, overwrite):
    """Export <run>/student to ONNX (fp32, fp16, int8), ORT Mobile and Core ML; writes <run>/export/."""
    from pocketbert.export.pipeline import export_run

    variants = [v.strip() for v in coreml_variants.split(",")] if coreml_variants else None
    path, results = export_run(resolve_run_dir(run), data_dir, overwrite, coreml_examples, parity_examples, variants)
    for r in results:
        metric = ", ".join(f"{k} {v:.4f}" for k, v in r.metrics.items() if isinstance(v, float))
        click.echo(f"  {r.artifact:<38} {r.runtime:<24} agreement {r.agreement:.4f}  max|diff| {r.max_abs_diff:.2e}  {metric}")
    click.echo(f"export: {len(results)} models passed the parity check -> wrote {path}")
