"""Command-line options made from the recipe's fields, in one step: a setting is named (its dotted key), typed,
bounded and described once, where the recipe declares it (core/config/recipe.py, or a recipe's own settings); a
command's table only says which keys it offers as options and how an option spells one.

An option's type follows its field: a number keeps the field's bounds (checked as the option is parsed, in one
line naming the option), a Literal is a choice, an optional yes/no is an --x/--no-x pair, a list is
comma-separated (or repeated, where its items may hold commas). Its help is the field's description.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Union

import click

from pocketbert.core.config.cli_options import Number, OneOf, comma_list


@dataclass(frozen=True)
class Flag:
    """How an option spells a recipe key."""

    key: str                   # the dotted recipe key it sets, e.g. distill.temperature
    metavar: str | None = None
    repeat: bool = False       # a list given one item per option (paths may hold commas), else comma-separated
    items: str = "values"      # a comma list's items, in words, and an example, for its error
    example: str = ""
    kind: click.ParamType | None = None  # the value's type where the field's cannot say it (a union)


Flags = dict[str, "Flag | str"]  # option name (--kl-weight: kl_weight) -> the key it sets


def as_flag(spelling: Flag | str) -> Flag:
    return spelling if isinstance(spelling, Flag) else Flag(spelling)


def recipe_field(key: str):
    """The pydantic field a dotted recipe key names: a shared one, else one of a registered recipe's sections
    (the shared sections first: reading them imports no recipe module)."""
    from pocketbert.core.config.recipe import Recipe, recipe_model

    def find(model):
        *sections, leaf = key.split(".")
        for section in sections:
            field = model.model_fields.get(section)
            model = field.annotation if field else None
            if model is None:
                return None
        return model.model_fields.get(leaf)

    found = find(Recipe) or find(recipe_model())
    if found is None:
        raise KeyError(f"no recipe key {key}")
    return found


def _inner(annotation):
    """Optional[X] as X; a union of several types as its first (focal_alpha: a number, or a list of them)."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        return kinds[0]
    return annotation


def _bounds(kind: type, metadata: list) -> Number:
    bound = {attr: getattr(m, attr) for m in metadata for attr in ("gt", "ge", "lt", "le")
             if getattr(m, attr, None) is not None}
    low, low_open = (bound["gt"], True) if "gt" in bound else (bound.get("ge"), False)
    high, high_open = (bound["lt"], True) if "lt" in bound else (bound.get("le"), False)
    if kind is int and low_open:  # a whole number > 0 is one >= 1, as the option's error says it
        low, low_open = low + 1, False
    if kind is int and high_open:
        high, high_open = high - 1, False
    return Number(kind, low, high, low_open, high_open)


def option(name: str, spelling: Flag | str) -> click.Option:
    """The click option `--name` setting the recipe key `spelling` names."""
    flag = as_flag(spelling)
    field = recipe_field(flag.key)
    kind = _inner(field.annotation)
    declared = "--" + name.replace("_", "-")
    settings: dict[str, Any] = {"default": None, "help": field.description, "metavar": flag.metavar}
    if flag.kind is not None:
        settings["type"] = flag.kind
    elif flag.repeat:
        settings["multiple"] = True
    elif kind is bool and field.default is None:  # unset keeps the recipe's choice: --x or --no-x
        declared = f"{declared}/--no-{declared[2:]}"
    elif kind is bool:
        settings.update(is_flag=True, callback=lambda ctx, param, value: value or None)
    elif kind in (int, float):
        settings["type"] = _bounds(kind, field.metadata)
    elif typing.get_origin(kind) is Literal:
        settings["type"] = OneOf(typing.get_args(kind))
    elif typing.get_origin(kind) is list:
        item = typing.get_args(kind)[0]
        settings["callback"] = comma_list(item, flag.items, flag.example)
    return click.Option([declared, name], **{k: v for k, v in settings.items() if v is not None or k == "default"})


def with_flags(flags: Flags):
    """A decorator adding one option per entry of `flags`."""
    def decorate(func):
        func.__click_params__ = [*getattr(func, "__click_params__", []),
                                 *(option(name, spelling) for name, spelling in reversed(flags.items()))]
        return func
    return decorate


def overrides(options: dict[str, Any], flags: Flags) -> dict[str, Any]:
    """The recipe keys the given options set (an option left unset keeps the recipe's value)."""
    out = {}
    for name, spelling in flags.items():
        value = options.get(name)
        if isinstance(value, tuple):  # a repeated option: a list, or unset when never given
            value = list(value) or None
        if value is not None:
            out[as_flag(spelling).key] = value
    return out
