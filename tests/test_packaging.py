"""pyproject.toml says what the code needs: the Python it runs on, an extra for every optional import, each
version once; the Makefile reads its pins from it."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "pocketbert"
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
# onnxruntime publishes no Python 3.10 wheels since 1.24 (TOOLCHAIN-NOTES "Packaging facts"); Core AI needs 3.11.
OLDEST_PYTHON = "3.11"


def _name(requirement: str) -> str:
    """The distribution a requirement names, normalised (PEP 503)."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", requirement).group()).lower()


def _distributions(module: str) -> set[str]:
    """The distributions that provide a top-level module (its own name when it is not installed here)."""
    top = module.split(".")[0]
    return {_name(d) for d in _installed().get(top, [top])}


@cache
def _installed() -> dict[str, list[str]]:
    return packages_distributions()  # reads every installed distribution's file list: seconds


@cache
def _package_trees() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(encoding="utf-8"))) for path in sorted(PACKAGE.rglob("*.py"))]


def _calls_to_require() -> list[tuple[str, str, str]]:
    """(file, module, extra) for each pocketbert.errors.require("module", "extra") in the package."""
    found = []
    for path, tree in _package_trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "require" and len(node.args) == 2 \
                    and all(isinstance(a, ast.Constant) for a in node.args):
                found.append((str(path.relative_to(REPO)), node.args[0].value, node.args[1].value))
    return found


def _third_party_imports() -> dict[str, set[str]]:
    """Each third-party top-level module the package imports, with the files that import it."""
    found: dict[str, set[str]] = {}
    for path, tree in _package_trees():
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "pocketbert":
                    found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


def test_requires_the_python_the_pinned_wheels_need():
    assert PROJECT["requires-python"] == f">={OLDEST_PYTHON}"


@pytest.mark.slow
def test_each_require_names_an_extra_that_installs_the_module():
    extras = {extra: {_name(r) for r in reqs} for extra, reqs in PROJECT["optional-dependencies"].items()}
    calls = _calls_to_require()
    assert len(calls) > 20  # the walk found the calls
    wrong = [f"{file}: require({module!r}, {extra!r})" for file, module, extra in calls
             if not _distributions(module) & extras.get(extra, set())]
    assert not wrong, "the extra named does not install the module: " + "; ".join(wrong)


@pytest.mark.slow
def test_every_third_party_import_is_a_dependency_or_in_an_extra():
    declared = {_name(r) for r in PROJECT["dependencies"]} | \
        {_name(r) for reqs in PROJECT["optional-dependencies"].values() for r in reqs}
    imports = _third_party_imports()
    assert {"torch", "onnx", "coremltools", "sklearn"} <= set(imports)  # the walk found the imports
    missing = {module: sorted(files) for module, files in imports.items() if not _distributions(module) & declared}
    assert not missing, f"imported, declared nowhere: {missing}"


def test_a_package_named_twice_has_one_version():
    pins: dict[str, set[str]] = {}
    for reqs in [PROJECT["dependencies"], *PROJECT["optional-dependencies"].values()]:
        for requirement in reqs:
            pins.setdefault(_name(requirement), set()).add(requirement.split(";")[0].strip())
    assert {name: p for name, p in pins.items() if len(p) > 1} == {}


@pytest.mark.parametrize("text", [(REPO / "Makefile").read_text(), (REPO / ".ci" / "run").read_text()],
                         ids=["Makefile", ".ci/run"])
def test_versions_are_written_only_in_pyproject(text):
    assert not re.findall(r"[A-Za-z0-9_.-]+==[0-9][^\s\"']*", text)
