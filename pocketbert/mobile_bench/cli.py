"""`pocketbert bench`: a thin command over mobile_bench.run."""

from __future__ import annotations

import click

from pocketbert.cli_options import overwrite_option, resolve_run_dir, run_option


@click.command()
@run_option
@click.option("--reference", "reference_source", default=None,
              help="BERT-base checkpoint (hub name or folder); default: its architecture built from the config.")
@click.option("--threads", default=None, help="Comma-separated thread counts (default: the recipe's).")
@click.option("--repeats", type=int, default=None, help="Timed runs per model (default: the recipe's).")
@overwrite_option
def bench(run, reference_source, threads, repeats, overwrite):
    """Time the exported student against BERT-base; writes <run>/bench/results.json and report.md."""
    from pocketbert.errors import ConfigError
    from pocketbert.mobile_bench.report import headline_sentence
    from pocketbert.mobile_bench.run import bench_run

    try:
        thread_list = [int(t) for t in threads.split(",")] if threads else None
    except ValueError:
        raise ConfigError(f"--threads must be comma-separated integers like 1,2 (got '{threads}')") from None
    path, results = bench_run(resolve_run_dir(run), overwrite, reference_source, thread_list, repeats)
    click.echo(headline_sentence(results))
    click.echo(f"bench: {len(results['measurements'])} measurements -> wrote {path}/results.json and report.md")
