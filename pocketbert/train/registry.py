"""The one place training recipes are registered, by name and by the command that runs them.

A recipe is a TrainingRecipe subclass (train/stage.py) that declares its own settings (its `sections`) and
options (`flags`). Its module is imported only when a recipe is read or run, so that `--help` (which lists the
names) imports no torch. Adding a recipe touches its own module and this table.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import import_module

from pocketbert.core.config import recipe as recipe_settings
from pocketbert.core.errors import ConfigError

TEACHER = "teacher"
DISTILBERT = "distilbert"
BILSTM = "tang"  # Tang et al. 2019; the name recipes and manifests have always used
MASKED_LM = "mlm"
STATIC = "static"  # a Model2Vec-style token table with a classifier
LAYERWISE = "layerwise"  # TinyBERT / MiniLM layer-wise distillation into a student of any width and depth
FITTED_VOCABULARY = "fitted-vocabulary"  # the student's word-piece table cut to the recipe's text, then recovered

# The command that runs each recipe (`pocketbert train <command>`), and its recipes: name -> class, or
# "module:Class" until first used. The first distillation recipe is the default of `train distill`.
_RECIPES: dict[str, dict[str, object]] = {
    "teacher": {TEACHER: "pocketbert.train.teacher:TeacherFineTuning"},
    "distill": {
        DISTILBERT: "pocketbert.train.distill:DistilBertRecipe",
        BILSTM: "pocketbert.train.bilstm_distill:BiLSTMRecipe",
        STATIC: "pocketbert.train.static_distill:StaticRecipe",
        LAYERWISE: "pocketbert.train.layerwise:LayerwiseRecipe",
    },
    "mlm": {MASKED_LM: "pocketbert.train.mlm:MaskedLMRecipe"},
    "vocabulary": {FITTED_VOCABULARY: "pocketbert.train.vocabulary.step:VocabularyFit"},
}
DEFAULT_DISTILLATION = DISTILBERT


def register(name: str, recipe: type | str, command: str = "distill") -> None:
    """Make `recipe` (a TrainingRecipe subclass, or "module:Class") available to `pocketbert train <command>`."""
    if any(name in recipes for recipes in _RECIPES.values()):
        raise ValueError(f"a recipe named '{name}' is registered already")
    _RECIPES.setdefault(command, {})[name] = recipe


def unregister(name: str) -> None:
    for recipes in _RECIPES.values():
        recipes.pop(name, None)


class Names(Sequence):
    """The names registered for a command, read when asked (a Click choice made before a recipe was added
    still offers it)."""

    def __init__(self, command: str):
        self.command = command

    def _names(self) -> list[str]:
        return list(_RECIPES.get(self.command, {}))

    def __getitem__(self, index):
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())


def names(command: str = "distill") -> Names:
    return Names(command)


def recipe_class(name: str | None, command: str | None = None) -> type:
    """The recipe registered under `name` (None: the default distillation), among `command`'s recipes if given."""
    if command is None:
        recipes = {n: target for registered in _RECIPES.values() for n, target in registered.items()}
    else:
        recipes = _RECIPES.get(command, {})
    name = DEFAULT_DISTILLATION if name is None else name
    if name not in recipes:
        raise ConfigError(f"unknown {command or 'training'}.recipe '{name}': use {' or '.join(recipes)}")
    target = recipes[name]
    if isinstance(target, str):
        module, _, attribute = target.partition(":")
        target = getattr(import_module(module), attribute)
        for registered in _RECIPES.values():
            if name in registered:
                registered[name] = target
    return target


def create(name: str | None, command: str | None = None):
    """A fresh recipe object (one per run: it holds the run's state)."""
    return recipe_class(name, command)()


def recipe_classes(command: str | None = None) -> list[type]:
    """Every registered recipe (of `command`, when given), imported."""
    commands = [command] if command else list(_RECIPES)
    return [recipe_class(name, c) for c in commands for name in list(_RECIPES.get(c, {}))]


def recipe_sections() -> list[tuple[str, type]]:
    """(section name, settings model) of every registered recipe: what a recipe is read with (core/config/recipe.py)."""
    return [(name, settings) for cls in recipe_classes() for name, settings in cls.sections.items()]


# Recipes are read with every registered recipe's settings from the moment the registry is loaded (the
# `pocketbert` command loads it first: pocketbert/cli.py).
recipe_settings.use_sections(recipe_sections)
