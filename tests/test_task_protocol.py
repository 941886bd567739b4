"""Every registered task keeps the Task contract (core/tasks/registry.py): what differs by task is a member of the
task."""

from __future__ import annotations

import inspect

import pytest

from pocketbert.core.tasks.registry import TASK_CLASSES, TASKS, Task, make_task
from pocketbert.core.run.run_files import coreml_package_name


def protocol_members() -> set[str]:
    return {name for name in dir(Task) if not name.startswith("_")} | set(Task.__annotations__)


def parameters(function) -> list[str]:
    return [p for p in inspect.signature(function).parameters if p != "self"]


@pytest.mark.parametrize("name", TASKS)
def test_each_registered_task_satisfies_the_protocol(name):
    task = make_task(name, ["negative", "positive"] if name == "sentiment" else [])
    assert isinstance(task, Task)
    for member in sorted(protocol_members()):
        assert hasattr(task, member), f"{name} task lacks {member}"
        declared = inspect.getattr_static(Task, member, None)
        if inspect.isfunction(declared) or isinstance(declared, staticmethod):
            declared_fn = declared.__func__ if isinstance(declared, staticmethod) else declared
            assert parameters(getattr(task, member)) == parameters(declared_fn), f"{name}.{member}'s parameters"


def test_the_registry_is_the_one_list_of_tasks():
    from pocketbert.core.config.recipe import Recipe

    assert TASKS == tuple(TASK_CLASSES)
    assert set(Recipe.model_fields["task"].annotation.__args__) == set(TASKS)


def test_the_coreml_class_name_is_the_tasks():
    for task_class in TASK_CLASSES.values():
        assert coreml_package_name(task_class.coreml_class_stem) == f"{task_class.coreml_class_stem}.mlpackage"
        assert coreml_package_name(task_class.coreml_class_stem, "int8") == \
            f"{task_class.coreml_class_stem}.int8.mlpackage"
    assert TASK_CLASSES["sentiment"].coreml_class_stem == "PocketBertSentiment"  # what apps already reference
