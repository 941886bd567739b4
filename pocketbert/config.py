"""YAML recipes: one file per task and preset in pocketbert/configs/, overridable from the command line.

Every recipe is validated (core/recipe.py) as it is loaded and again after overrides, before any work starts;
what callers get is the complete recipe, every default filled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pocketbert.core.tasks import TASKS, check_task  # noqa: F401  (the task registry names the tasks)
from pocketbert.errors import ConfigError

CONFIG_DIR = Path(__file__).resolve().parent / "configs"  # inside the package: a wheel ships the presets


def available_presets(task: str) -> list[str]:
    return sorted(p.stem.split("-", 1)[1] for p in CONFIG_DIR.glob(f"{task}-*.yaml"))


def load_recipe(task: str, preset: str = "default", path: Path | None = None) -> dict[str, Any]:
    """The recipe for a task and preset (pocketbert/configs/<task>-<preset>.yaml), or the YAML file at `path`."""
    check_task(task)
    if path is None:
        path = CONFIG_DIR / f"{task}-{preset}.yaml"
        if not path.is_file():
            raise ConfigError(
                f"no preset '{preset}' for task '{task}': choose one of {', '.join(available_presets(task)) or 'none'}"
            )
    from pocketbert.core.files import read_text

    text = read_text(Path(path), ConfigError, "recipe (--config)")
    try:
        recipe = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"cannot read recipe {path}: {_yaml_problem(exc)}; fix the YAML or pass another "
                          "--config") from None
    except RecursionError:
        raise ConfigError(f"cannot read recipe {path}: nested too deeply; fix the YAML") from None
    if not isinstance(recipe, dict) or recipe.get("task") != task:
        raise ConfigError(f"recipe {path} is not a '{task}' recipe (its 'task:' key must say {task})")
    from pocketbert.core.recipe import recipe_dict, validate_recipe

    return recipe_dict(validate_recipe(recipe, str(path)))


def apply_overrides(recipe: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Set dotted keys ('distill.temperature') to values (None values are left out) and validate the result."""
    from pocketbert.core.recipe import recipe_dict, with_overrides

    return recipe_dict(with_overrides(recipe, overrides))


def parse_set_options(items: tuple[str, ...]) -> dict[str, Any]:
    """`--set distill.temperature=4` pairs, values parsed as YAML scalars."""
    parsed = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set expects key=value, got '{item}' (for example --set distill.temperature=4)")
        key, raw = item.split("=", 1)
        key = key.strip()
        if not key or any(not part for part in key.split(".")):
            raise ConfigError(f"--set '{item}': name a recipe key before '=' (for example distill.temperature=4)")
        if not raw.strip():
            raise ConfigError(f"--set '{item}': no value after '='; give one (null restores the default)")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ConfigError(f"--set '{item}': the value is not valid YAML ({_yaml_problem(exc)}); quote it or "
                              "close its brackets") from None
        if key in parsed:
            raise ConfigError(f"--set {key} is given twice; keep one")
        parsed[key] = value
    return parsed


def _yaml_problem(exc) -> str:
    """A YAML error's own words, on one line."""
    return " ".join(str(getattr(exc, "problem", None) or exc).split())
