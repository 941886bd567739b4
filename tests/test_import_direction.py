"""Imports go one way: core <- train; core <- export <- mobile_bench; core <- inspect. A stage reads another
stage's files, never its code. Every import counts, those inside functions too."""

from __future__ import annotations

import ast
from pathlib import Path

import pocketbert

PACKAGE_ROOT = Path(pocketbert.__file__).resolve().parent
STAGES = ("train", "export", "mobile_bench", "inspect")
# What each part of the package may not import. The shared core is pocketbert/core/ and the top-level modules;
# cli.py is the exception that proves the rule: it wires the stage groups together (by module name, lazily).
FORBIDDEN = {
    "core": set(STAGES),
    "train": {"export", "mobile_bench", "inspect"},
    "export": {"train", "mobile_bench", "inspect"},
    "mobile_bench": {"train", "inspect"},
    "inspect": {"train", "export", "mobile_bench"},  # it reads the runs' files: manifests, results.json
}
WIRING_MODULES = {"cli.py"}


def part_of(path: Path) -> str | None:
    relative = path.relative_to(PACKAGE_ROOT)
    if len(relative.parts) == 1:
        return None if relative.name in WIRING_MODULES else "core"
    return relative.parts[0] if relative.parts[0] in FORBIDDEN else None


def imported_stages(source: str) -> set[str]:
    """The pocketbert stage packages a module's source imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "pocketbert" and len(parts) > 1 and parts[1] in STAGES:
                found.add(parts[1])
    return found


def violations() -> list[str]:
    found = []
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        part = part_of(path)
        if part is None:
            continue
        for stage in sorted(imported_stages(path.read_text()) & FORBIDDEN[part]):
            found.append(f"{path.relative_to(PACKAGE_ROOT)} ({part}) imports pocketbert.{stage}")
    return found


def test_no_module_imports_against_the_direction():
    assert violations() == []


def test_the_check_sees_imports_inside_functions_and_from_lists():
    inside_function = "def f():\n    from pocketbert.train.models import x\n"
    from_list = "from pocketbert import train\n"
    plain = "import pocketbert.mobile_bench.run\n"
    assert imported_stages(inside_function) == {"train"}
    assert imported_stages(from_list) == {"train"}
    assert imported_stages(plain) == {"mobile_bench"}
    assert imported_stages("from pocketbert.core import tasks\nimport pocketbert.errors\n") == set()


def test_every_package_module_is_assigned_a_part():
    """A new stage folder would escape the check: it must be named in FORBIDDEN first."""
    folders = {p.name for p in PACKAGE_ROOT.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert folders <= set(FORBIDDEN)


def test_bench_reaches_training_speed_through_the_cli_wiring_only():
    from click.testing import CliRunner

    from pocketbert.cli import cli

    result = CliRunner().invoke(cli, ["bench", "train", "--help"])
    assert result.exit_code == 0, result.output
    assert "distillation epoch" in result.output
