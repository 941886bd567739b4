"""Imports go one way, and a test sees every arrow (those inside functions too):

    cli (pocketbert/cli.py, boundary.py: the command line's wiring)
      -> the stages: train, export <- mobile_bench, inspect, ladder
        -> core (pocketbert/core/, what every stage builds on), in wings, each importing only those below it:
             students (architectures, checkpoints, inference), config (the typed recipe, the command line's
             options), run (the run folder), tasks (tasks, datasets, losses), process (launch, exit codes),
           and its ground, errors.py and files.py, which every wing imports and which import no wing

export and mobile_bench stand in wings too, each importing only the wings of its stage below it (and the core);
the stage's top level (its cli.py) is its command layer, which may import all of them:
    export: steps (plan, runners, record) -> app (the app folders) -> programs (the program makers and the
            catalogue of variants) -> text_in (the tokenizer graph) -> checks (gates, probes) -> evaluators
    mobile_bench: steps (the bench run) -> reports -> device (the kit) -> estimates (phones) -> timing

A stage reads another stage's files, never its code; the ladder runs the stages' commands and reads their files.
The rule is one table, ALLOWED, with no exception list: every module belongs to exactly one part, and the whole
graph, not only the core's, has no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pocketbert

PACKAGE_ROOT = Path(pocketbert.__file__).resolve().parent
CORE, CLI = "core", "cli"
STAGES = ("train", "export", "mobile_bench", "inspect", "ladder")
# The core's wings (its folders), top to bottom: each may import the core's ground and the wings below it.
CORE_WINGS = ("core.students", "core.config", "core.run", "core.tasks", "core.process")
# The core's ground: its modules outside the wings, which every wing imports (and the package's own __init__).
CORE_GROUND = {"pocketbert", "pocketbert.core", "pocketbert.core.errors", "pocketbert.core.files"}
# The wings of the stages that stand in wings, top to bottom: each may import the core and the wings below it.
STAGE_WINGS = {
    "export": ("export.steps", "export.app", "export.programs", "export.text_in", "export.checks",
               "export.evaluators"),
    "mobile_bench": ("mobile_bench.steps", "mobile_bench.reports", "mobile_bench.device", "mobile_bench.estimates",
                     "mobile_bench.timing"),
}
EXPORT_WINGS, BENCH_WINGS = STAGE_WINGS["export"], STAGE_WINGS["mobile_bench"]
BENCH_READS_OF_EXPORT = ("export.app", "export.programs")
# What each part may import besides itself.
ALLOWED = {
    CORE: set(),
    **{wing: {CORE, *CORE_WINGS[i + 1:]} for i, wing in enumerate(CORE_WINGS)},
    "train": {CORE, *CORE_WINGS},
    "export": {CORE, *CORE_WINGS, *EXPORT_WINGS},
    **{wing: {CORE, *CORE_WINGS, *EXPORT_WINGS[i + 1:]} for i, wing in enumerate(EXPORT_WINGS)},
    # it loads the exported programs through export's makers, and the kit builds the app folders' Swift package
    "mobile_bench": {CORE, *CORE_WINGS, *BENCH_WINGS, *BENCH_READS_OF_EXPORT},
    **{wing: {CORE, *CORE_WINGS, *BENCH_WINGS[i + 1:], *BENCH_READS_OF_EXPORT} for i, wing in enumerate(BENCH_WINGS)},
    "inspect": {CORE, *CORE_WINGS},  # it reads the runs' files: manifests, results.json
    "ladder": {CORE, *CORE_WINGS},  # it runs the stages' commands and reads what they wrote
    CLI: {CORE, *CORE_WINGS, *STAGES},
}


def module_name(path: Path) -> str:
    """'pocketbert.core.run.manifest' for pocketbert/core/run/manifest.py, 'pocketbert.core' for its __init__.py."""
    parts = ("pocketbert",) + path.relative_to(PACKAGE_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part_of_module(name: str) -> str:
    parts = name.split(".")
    if len(parts) == 1:
        return CORE  # pocketbert/__init__.py: the version every part may read
    wing = ".".join(parts[1:3])
    wings = (*CORE_WINGS, *EXPORT_WINGS, *BENCH_WINGS)
    if wing in wings and (len(parts) > 3 or (PACKAGE_ROOT / parts[1] / parts[2]).is_dir()):
        return wing  # pocketbert.core.run.manifest, pocketbert.export.steps.plan, or the wing's own __init__
    if parts[1] in ALLOWED and parts[1] != CLI and (len(parts) > 2 or (PACKAGE_ROOT / parts[1]).is_dir()):
        return parts[1]
    return CLI  # a top-level module: the command line's wiring


ALL_MODULES = {module_name(path): path for path in sorted(PACKAGE_ROOT.rglob("*.py"))}


def imported_modules(source: str) -> set[str]:
    """Every pocketbert module a source imports, anywhere in it: `from pocketbert.core.tasks import qa` names
    pocketbert.core.tasks.qa as well as the package (the caller keeps the names that are modules)."""
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


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """What each module imports, as module names (a name that is an attribute counts as its module; a package
    imported for one of its modules counts as that module only)."""
    graph = {}
    for name, path in modules.items():
        imported = imported_modules(path.read_text())
        targets = set()
        for target in imported:
            if target in modules and any(other.startswith(target + ".") and other in modules for other in imported):
                continue  # `from pocketbert.core.tasks import qa`: the arrow is to pocketbert.core.tasks.qa
            while target and target not in modules:
                target = target.rpartition(".")[0]  # pocketbert.core.errors.ConfigError -> pocketbert.core.errors
            if target and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def against_the_direction(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{module} ({part_of_module(module)}) imports {target} ({part_of_module(target)})"
                  for module, targets in graph.items() for target in targets
                  if part_of_module(target) != part_of_module(module)
                  and part_of_module(target) not in ALLOWED[part_of_module(module)])


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of a graph, each found once (Tarjan's strongly connected components of more than one
    module, or a module importing itself), as sorted module lists."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


@pytest.mark.slow
def test_no_module_imports_against_the_direction():
    assert against_the_direction(import_graph(ALL_MODULES)) == []


@pytest.mark.slow
def test_the_package_imports_without_a_cycle():
    assert cycles(import_graph(ALL_MODULES)) == []


def test_the_checks_see_an_arrow_up_a_sideways_one_and_a_cycle():
    graph = {"pocketbert.core.a": {"pocketbert.core.b", "pocketbert.train.c"},
             "pocketbert.core.b": {"pocketbert.core.a"}, "pocketbert.train.c": {"pocketbert.core.a"},
             "pocketbert.mobile_bench.d": {"pocketbert.export.e", "pocketbert.ladder.f"},
             "pocketbert.export.e": {"pocketbert.cli"},
             "pocketbert.core.tasks.g": {"pocketbert.core.run.h", "pocketbert.core.process.i"}}
    assert cycles(graph) == [["pocketbert.core.a", "pocketbert.core.b", "pocketbert.train.c"]]
    assert against_the_direction(graph) == [
        "pocketbert.core.a (core) imports pocketbert.train.c (train)",
        "pocketbert.core.tasks.g (core.tasks) imports pocketbert.core.run.h (core.run)",  # a wing above
        "pocketbert.export.e (export) imports pocketbert.cli (cli)",
        "pocketbert.mobile_bench.d (mobile_bench) imports pocketbert.export.e (export)",  # export's command layer
        "pocketbert.mobile_bench.d (mobile_bench) imports pocketbert.ladder.f (ladder)",
    ]


def test_the_check_sees_an_arrow_up_between_a_stages_wings():
    graph = {"pocketbert.export.checks.gate": {"pocketbert.export.programs.maker", "pocketbert.core.errors"},
             "pocketbert.export.steps.plan": {"pocketbert.export.programs.maker"},
             "pocketbert.mobile_bench.timing.stats": {"pocketbert.mobile_bench.reports.report"},
             "pocketbert.mobile_bench.reports.report": {"pocketbert.export.steps.plan"}}
    assert against_the_direction(graph) == [
        "pocketbert.export.checks.gate (export.checks) imports pocketbert.export.programs.maker (export.programs)",
        "pocketbert.mobile_bench.reports.report (mobile_bench.reports) imports pocketbert.export.steps.plan "
        "(export.steps)",
        "pocketbert.mobile_bench.timing.stats (mobile_bench.timing) imports pocketbert.mobile_bench.reports.report "
        "(mobile_bench.reports)",
    ]


def test_the_check_sees_imports_inside_functions_and_from_lists():
    assert imported_modules("def f():\n    from pocketbert.train.models import x\n") >= {"pocketbert.train.models"}
    assert imported_modules("from pocketbert import train\n") >= {"pocketbert.train"}
    assert imported_modules("import pocketbert.mobile_bench.steps.run\n") == {"pocketbert.mobile_bench.steps.run"}
    graph = import_graph({"pocketbert.train.x": _source("from pocketbert.core.tasks import qa\n"),
                          "pocketbert.core.tasks": Path(pocketbert.__file__),
                          "pocketbert.core.tasks.qa": Path(pocketbert.__file__)})
    assert graph["pocketbert.train.x"] == {"pocketbert.core.tasks.qa"}


def _source(text: str) -> Path:
    import tempfile

    path = Path(tempfile.mkdtemp()) / "x.py"
    path.write_text(text)
    return path


def test_every_module_is_in_one_part_and_every_folder_is_a_known_part():
    """A new folder of the package would be read as the command line's wiring, a new folder of the core as its
    ground: each must be named in ALLOWED, and a new module of the core belongs in a wing."""
    folders = {p.name for p in PACKAGE_ROOT.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert folders <= set(ALLOWED)
    wings = {p.name for p in (PACKAGE_ROOT / CORE).iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert {f"{CORE}.{wing}" for wing in wings} == set(CORE_WINGS)
    assert {name for name in ALL_MODULES if part_of_module(name) == CORE} == CORE_GROUND  # the ground stays small
    top_level = {name for name in ALL_MODULES if part_of_module(name) == CLI}
    assert top_level == {"pocketbert.cli", "pocketbert.boundary"}  # the wiring stays small


def test_the_staged_wings_are_the_folders_and_each_top_level_only_its_command_layer():
    """export/ and mobile_bench/ hold wings and their command line (cli.py): a module beside cli.py belongs in a wing,
    a new folder is named in STAGE_WINGS."""
    for stage, wings in STAGE_WINGS.items():
        folder = PACKAGE_ROOT / stage
        found = {f"{stage}.{p.name}" for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
        assert found == set(wings)
        assert {p.name for p in folder.glob("*.py")} == {"__init__.py", "cli.py"}


def test_bench_reaches_training_speed_through_the_cli_wiring_only():
    from click.testing import CliRunner

    from pocketbert.cli import cli

    result = CliRunner().invoke(cli, ["bench", "train", "--help"])
    assert result.exit_code == 0, result.output
    assert "distillation epoch" in result.output
