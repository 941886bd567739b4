"""The tasks a recipe may name (the task registry's, re-exported). Recipes are read, overridden and validated in
core/recipe.py."""

from __future__ import annotations

from pocketbert.core.tasks import TASKS, check_task  # noqa: F401  (the task registry names the tasks)
