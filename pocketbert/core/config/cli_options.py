"""Options shared by the stage commands."""

from __future__ import annotations

from pathlib import Path

import click

from pocketbert.core.run.user_paths import run_dir as resolve_run_dir  # noqa: F401  (the commands' one way to read --run)


# --run-dir spells the same option for torchrun, whose own parser takes "--run" for its "--run-path".
run_option = click.option("--run", "--run-dir", "run", required=True, metavar="NAME|PATH",
                          help="Run directory: a name under runs/, or a path.")
overwrite_option = click.option("--overwrite", is_flag=True, help="Replace this stage's earlier output.")
data_dir_option = click.option("--data-dir", type=click.Path(path_type=Path), default=None, envvar="POCKETBERT_DATA_DIR",
                               help="Folder holding the named datasets (default: $POCKETBERT_DATA_DIR, else the hub).")
device_option = click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")


def locks(*parameters: str, reads: tuple[str, ...] = (), default_out: str | None = None,
          joins_launched_group: bool = False):
    """The command writes the folders these parameters name (a --run by its name or path, others as paths), and
    only reads those `reads` names: one writer per folder, or readers, held for the whole command
    (pocketbert/core/run/run_lock.py). default_out: the folder inside the run that `--out` left unset stands for
    (<run>/<default_out>), or the name beside it, as <run><default_out>, when it starts with '-'.
    joins_launched_group: the command trains in torchrun's process groups (run_lock.writes)."""
    from pocketbert.core.run.run_lock import writes

    def folder(name: str, value) -> Path:
        return resolve_run_dir(value) if name in ("run", "runs") else Path(value)

    def defaults(kwargs: dict) -> dict:
        if default_out is None or kwargs.get("run") is None:
            return {}
        run = resolve_run_dir(kwargs["run"])
        out = run.parent / f"{run.name}{default_out}" if default_out.startswith("-") else run / default_out
        return {name: out for name in parameters if name.startswith("out")}

    return writes(*parameters, reads=reads, resolve=folder, defaults=defaults,
                  joins_launched_group=joins_launched_group)


# ---------------------------------------------------------------- option values, checked as they are parsed
#
# Click's own range types let nan and inf through (every comparison with nan is false), and their errors are a
# usage block rather than one line. These raise ConfigError, which the CLI prints as one `error:` line before
# any work starts.

class Number(click.ParamType):
    """A finite int or float within bounds."""

    def __init__(self, kind: type = float, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False):
        self.kind, self.low, self.high, self.low_open, self.high_open = kind, low, high, low_open, high_open
        self.name = "integer" if kind is int else "number"

    def rule(self) -> str:
        noun = "whole number" if self.kind is int else "number"
        if self.low == 0 and self.high is None:
            return f"a positive {noun}" if self.low_open else f"a non-negative {noun}"
        if self.kind is int and self.low == 1 and self.high is None:
            return "a positive whole number"
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.low_open else '>='} {self.low:g}")
        if self.high is not None:
            parts.append(f"{'<' if self.high_open else '<='} {self.high:g}")
        return ("a whole number" if self.kind is int else "a finite number") + (f" {' and '.join(parts)}" if parts else "")

    def convert(self, value, param, ctx):
        import math

        from pocketbert.core.errors import ConfigError

        name = param.opts[0] if param is not None and param.opts else "the value"
        try:
            number = self.kind(value) if not isinstance(value, str) else self.kind(value.strip())
        except (TypeError, ValueError):
            raise ConfigError(f"{name} must be {self.rule()} (got '{value}')") from None
        if isinstance(number, float) and not math.isfinite(number):
            raise ConfigError(f"{name} must be {self.rule()} (got '{value}')")
        too_low = self.low is not None and (number <= self.low if self.low_open else number < self.low)
        too_high = self.high is not None and (number >= self.high if self.high_open else number > self.high)
        if too_low or too_high:
            raise ConfigError(f"{name} must be {self.rule()} (got '{value}')")
        return number


class OneOf(click.ParamType):
    """One of a few words (click.Choice, with a one-line error)."""

    name = "choice"

    def __init__(self, choices: tuple[str, ...]):
        self.choices = tuple(choices)

    def get_metavar(self, param, ctx=None):
        return "[" + "|".join(self.choices) + "]"

    def convert(self, value, param, ctx):
        from pocketbert.core.errors import ConfigError

        if value in self.choices:
            return value
        name = param.opts[0] if param is not None and param.opts else "the value"
        raise ConfigError(f"{name} must be one of {', '.join(self.choices)} (got '{value}')")


MAX_THREADS = 256  # more threads than any phone or laptop has cores: a larger count is a typo
from pocketbert.core.config.recipe import SEED_MAX  # noqa: E402  (one bound for the recipe and --seed)

COUNT = Number(int, 1)  # examples, epochs, batch, sequence length: at least one
THREADS = Number(int, 1, MAX_THREADS)
SEED = Number(int, 0, SEED_MAX)
POSITIVE = Number(float, 0, low_open=True)
NON_NEGATIVE = Number(float, 0)
FRACTION = Number(float, 0, 1)


def comma_list(kind, what: str, example: str, unique: bool = False):
    """A Click callback: 'a,b,c' as a list of `kind`, or None when the option is not given. An empty item (a
    stray comma) is refused, as is a repeated one where `unique`."""
    def parse(ctx, param, value):
        from pocketbert.core.errors import ConfigError

        if value is None:
            return None
        option = f"--{param.name.replace('_', '-')}"
        items = [item.strip() for item in value.split(",")]
        try:
            if not all(items):
                raise ValueError
            parsed = [kind(item) for item in items]
        except ValueError:
            raise ConfigError(f"{option} must be comma-separated {what} like {example} (got '{value}')") from None
        repeated = sorted({item for item in items if items.count(item) > 1}) if unique else []
        if repeated:
            raise ConfigError(f"{option} names {', '.join(repeated)} more than once (got '{value}')")
        return parsed
    return parse


def thread_list(value: str | None, option: str) -> list[int] | None:
    """'1,2,4' as thread counts, each 1 to MAX_THREADS."""
    from pocketbert.core.errors import ConfigError

    if value is None:
        return None
    try:
        counts = [int(t) for t in value.split(",")]
    except ValueError:
        raise ConfigError(f"{option} must be comma-separated integers like 1,2 (got '{value}')") from None
    if not counts or any(t < 1 for t in counts):
        raise ConfigError(f"{option} must be positive thread counts (got '{value}')")
    if any(t > MAX_THREADS for t in counts):
        raise ConfigError(f"{option} must be at most {MAX_THREADS} threads each (got '{value}')")
    return counts
