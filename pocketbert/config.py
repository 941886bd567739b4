"""The tasks a recipe may name. Recipes themselves are read, overridden and validated in core/recipe.py."""

from __future__ import annotations

from pocketbert.errors import ConfigError

TASKS = ("sentiment", "qa")


def check_task(task: str) -> str:
    if task not in TASKS:
        raise ConfigError(f"unknown task '{task}': choose one of {', '.join(TASKS)}")
    return task
