"""`pocketbert ladder`: a thin command that checks the ladder, runs its steps and writes the table and plot."""

from __future__ import annotations

from pathlib import Path

import click

from pocketbert.core.config.cli_options import data_dir_option, device_option, resolve_run_dir, run_option


@click.command()
@run_option
@click.option("--ladder", "ladder_name", default="reduced", show_default=True, metavar="NAME|FILE",
              help="The rungs and their setting: reduced (sized for a 2-core CPU), full (each preset's own size), or "
                   "a YAML file like pocketbert/ladder/specs/reduced.yaml.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Folder of the rungs' runs, the table and the plot (default: <run>-ladder beside the run).")
@click.option("--rebench", is_flag=True,
              help="Time every shipped rung again now, even those benched before, so that all latencies come from "
                   "one sitting.")
@data_dir_option
@device_option
def ladder(run, ladder_name, out_dir, rebench, data_dir, device):
    """From the run's teacher: the students of the ladder trained, exported and benched (finished steps kept),
    then one table and Pareto plot of accuracy against int8 latency and download size."""
    import json
    import time

    from transformers import AutoConfig

    from pocketbert.core.errors import ConfigError
    from pocketbert.ladder import flow, table
    from pocketbert.ladder.run_transfer import read_run_transfer
    from pocketbert.ladder.spec import check_ladder, read_ladder
    from pocketbert.core.run.atomic_folder import write_text_atomically
    from pocketbert.core.run.run_files import LADDER_PLOT, LADDER_RESULTS, LADDER_TABLE, TEACHER_DIR
    from pocketbert.core.run.manifest import command_line, verified_stage
    from pocketbert.core.config.recipe import complete_recipe
    from pocketbert.core.run.run_lock import folder_lock
    from pocketbert.core.run.user_paths import output_folder

    run_dir = resolve_run_dir(run)
    out_dir = out_dir or run_dir.parent / f"{run_dir.name}-ladder"
    output_folder(out_dir, flow.MADE_BY, overwrite=False, inputs=[run_dir], continues=True)  # before any work
    teacher_dir, teacher = verified_stage(run_dir, TEACHER_DIR, "pocketbert train teacher")  # before any rung trains
    task = complete_recipe(teacher.config.recipe).task
    spec = read_ladder(ladder_name)
    transfer = read_run_transfer(run_dir, spec.train.run_transfer)
    check_ladder(spec, task, AutoConfig.from_pretrained(str(teacher_dir)), transfer)
    clash = [r.name for r in spec.rungs if not r.in_run and r.name == run_dir.name]
    if clash:
        raise ConfigError(f"the run is named like the rung {clash[0]}: rename the rung in the ladder file")
    # The ladder's folder has one writer; each step's command takes its own rung's lock in turn.
    with folder_lock(out_dir):
        flow.prepare_folder(spec, ladder_name, run_dir, out_dir, transfer)
        started = time.time()
        plan = flow.plan(spec, run_dir, out_dir, task, data_dir, device, rebench, transfer)
        steps = flow.run_plan(plan.steps, lambda line: click.echo(line, err=True))
        compare_path = flow.compare_results(plan.compare_dir)
        result = table.ladder_result(spec, table.read_compare(compare_path), compare_path, plan.rung_dirs, transfer)
        result.update(command=command_line(), spec=ladder_name, steps=steps, wall_time_s=round(time.time() - started, 1))
        # The table and plot are drawn from the JSON as it will be stored, all three before any is written: a plot that
        # fails leaves the earlier set whole.
        serialized = table.dumps(result)
        stored = json.loads(serialized)
        plot = out_dir / LADDER_PLOT
        drawn = table.plot_ladder(stored, plot.with_name(f"{plot.stem}.partial{plot.suffix}"))
        write_text_atomically(out_dir / LADDER_RESULTS, serialized)
        write_text_atomically(out_dir / LADDER_TABLE, table.render_table(stored))
        Path(drawn).replace(plot)
        click.echo(table.render_table(stored).split("\n\nEvery number")[0])
        click.echo(f"-> wrote {out_dir / LADDER_TABLE}, {LADDER_RESULTS} and {LADDER_PLOT}")
