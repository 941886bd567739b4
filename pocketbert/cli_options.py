"""Options shared by the stage commands."""

from __future__ import annotations

from pathlib import Path

import click

from pocketbert.user_paths import run_dir as resolve_run_dir  # noqa: F401  (the commands' one way to read --run)


# --run-dir spells the same option for torchrun, whose own parser takes "--run" for its "--run-path".
run_option = click.option("--run", "--run-dir", "run", required=True, metavar="NAME|PATH",
                          help="Run directory: a name under runs/, or a path.")
overwrite_option = click.option("--overwrite", is_flag=True, help="Replace this stage's earlier output.")
data_dir_option = click.option("--data-dir", type=click.Path(path_type=Path), default=None, envvar="POCKETBERT_DATA_DIR",
                               help="Folder holding the named datasets (default: $POCKETBERT_DATA_DIR, else the hub).")
device_option = click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
