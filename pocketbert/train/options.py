"""Training commands' options: the generator of options from the recipe's fields (core/config/recipe_options.py), and
the options each registered training recipe adds."""

from __future__ import annotations

import click

from pocketbert.core.config.recipe_options import Flag, Flags, as_flag, option, overrides, recipe_field, with_flags

__all__ = ["Flag", "Flags", "WithRecipeFlags", "as_flag", "option", "overrides", "recipe_field", "with_flags"]


class WithRecipeFlags(click.Command):
    """A command whose options include every registered recipe's own (its class's `flags`), made when the
    command is parsed or its help shown: the recipes' modules are imported then, not when `--help` lists the
    commands."""

    def __init__(self, *args, recipes_of: str = "distill", **kwargs):
        super().__init__(*args, **kwargs)
        self.recipes_of = recipes_of
        self._recipe_flags: Flags | None = None

    def recipe_flags(self) -> Flags:
        if self._recipe_flags is None:
            from pocketbert.train import registry

            self._recipe_flags = {name: spelling for cls in registry.recipe_classes(self.recipes_of)
                                  for name, spelling in cls.flags.items()}
            self.params.extend(option(name, spelling) for name, spelling in self._recipe_flags.items())
        return self._recipe_flags

    def get_params(self, ctx):
        self.recipe_flags()
        return super().get_params(ctx)
