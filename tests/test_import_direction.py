"""Imports go one way: core <- train; core <- export <- mobile_bench; core <- inspect; core <- ladder. A stage
reads another stage's files, never its code; the ladder runs the stages' commands and reads their files. Every import counts, those inside functions too.

The core is pocketbert/core/ with the few top-level modules it builds on (errors, rundir, cache_dir, and storage,
which says what a failed write means): it imports no other top-level module (config, manifest, user_paths... sit
above it), and its modules import each other without a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pocketbert

PACKAGE_ROOT = Path(pocketbert.__file__).resolve().parent
STAGES = ("train", "export", "mobile_bench", "inspect", "ladder")
# What each part of the package may not import. The shared core is pocketbert/core/ and the top-level modules;
# cli.py is the exception that proves the rule: it wires the stage groups together (by module name, lazily).
TOP = "top"  # the top-level modules above the core: the CLI's options, recipes' YAML, manifests, user paths
FORBIDDEN = {
    "core": set(STAGES),
    TOP: set(STAGES),
    "train": {"export", "mobile_bench", "inspect", "ladder"},
    "export": {"train", "mobile_bench", "inspect", "ladder"},
    "mobile_bench": {"train", "inspect", "ladder"},
    "inspect": {"train", "export", "mobile_bench", "ladder"},  # it reads the runs' files: manifests, results.json
    "ladder": {"train", "export", "mobile_bench", "inspect"},  # it runs their commands and reads what they wrote
}
WIRING_MODULES = {"cli.py"}
# The top-level modules that belong to the core: what every stage and the core itself build on.
CORE_TOP_LEVEL = {"errors", "rundir", "cache_dir", "storage"}  # storage: what a failed write means (rundir's)


def part_of(path: Path) -> str | None:
    relative = path.relative_to(PACKAGE_ROOT)
    if len(relative.parts) == 1:
        if relative.name in WIRING_MODULES:
            return None
        return "core" if relative.stem in CORE_TOP_LEVEL | {"__init__"} else TOP
    return relative.parts[0] if relative.parts[0] in FORBIDDEN else None


def module_name(path: Path) -> str:
    """'pocketbert.core.tasks' for pocketbert/core/tasks.py, 'pocketbert.core' for its __init__.py."""
    parts = ("pocketbert",) + path.relative_to(PACKAGE_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str) -> set[str]:
    """Every pocketbert module a source imports, anywhere in it: `from pocketbert.core import qa` names
    pocketbert.core.qa as well as the package (the caller keeps the names that are modules)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(name for name in names if name.split(".")[0] == "pocketbert")
    return found


def core_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE_ROOT.rglob("*.py")) if part_of(path) == "core"}


def core_imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """What each core module imports, as module names (a name that is an attribute counts as its module)."""
    graph = {}
    for name, path in modules.items():
        targets = set()
        for imported in imported_modules(path.read_text()):
            while imported and imported not in modules and imported not in ALL_MODULES:
                imported = imported.rpartition(".")[0]  # pocketbert.errors.ConfigError -> pocketbert.errors
            if imported and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


ALL_MODULES = {module_name(path) for path in PACKAGE_ROOT.rglob("*.py")}


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Core modules importing a pocketbert module outside the core (a top-level one other than the core's own)."""
    return sorted(f"{module} imports {target}" for module, targets in graph.items() for target in targets
                  if target not in graph and target not in {"pocketbert"})


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles among the given modules (each found once, from its first module in sorted order)."""
    found, seen = [], set()

    def visit(node: str, path: list[str]) -> None:
        for target in sorted(graph.get(node, ())):
            if target not in graph:
                continue
            if target in path:
                cycle = path[path.index(target):]
                key = frozenset(cycle)
                if key not in seen:
                    seen.add(key)
                    found.append(cycle + [target])
            elif len(path) < len(graph):
                visit(target, path + [target])

    for start in sorted(graph):
        visit(start, [start])
    return found


def imported_stages(source: str) -> set[str]:
    """The pocketbert stage packages a module's source imports, anywhere in it."""
    return {name.split(".")[1] for name in imported_modules(source)
            if len(name.split(".")) > 1 and name.split(".")[1] in STAGES}


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


def test_the_core_imports_no_module_above_it():
    """The core builds on errors, rundir and cache_dir only: config, manifest, user paths and the CLI's options
    are built on the core, so an import the other way is an arrow up (and soon a cycle)."""
    assert upward_imports(core_imports(core_modules())) == []


def test_core_modules_import_each_other_without_a_cycle():
    assert cycles(core_imports(core_modules())) == []


def test_the_core_checks_see_an_arrow_up_and_a_cycle():
    graph = {"pocketbert.core.a": {"pocketbert.core.b", "pocketbert.errors"},
             "pocketbert.core.b": {"pocketbert.core.a"}, "pocketbert.errors": set()}
    assert cycles(graph) == [["pocketbert.core.a", "pocketbert.core.b", "pocketbert.core.a"]]
    assert upward_imports({"pocketbert.core.a": {"pocketbert.config"}}) == ["pocketbert.core.a imports pocketbert.config"]
    assert imported_modules("def f():\n    from pocketbert.core import qa\n") >= {"pocketbert.core.qa"}


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
