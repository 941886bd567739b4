"""docs/development.md's layout is the tree's: every package folder and every module in it, each named under its
own folder, and nothing named that is not there."""

from __future__ import annotations

import re
from pathlib import Path

import pocketbert

PACKAGE_ROOT = Path(pocketbert.__file__).resolve().parent
LAYOUT_DOC = PACKAGE_ROOT.parent / "docs" / "development.md"
INDENT = 2  # spaces per folder level in the layout block
FOLDER_LINE = re.compile(r"^( +)([a-z_]+)/ ")
MODULE = re.compile(r"(?<![/\w])([a-z_0-9]+\.py)\b")  # a bare file name: a path names another folder's


def layout() -> dict[Path, set[str]]:
    """Each folder the layout names, with the module files named on its lines."""
    text = LAYOUT_DOC.read_text(encoding="utf-8")
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    named: dict[Path, set[str]] = {PACKAGE_ROOT: set()}
    stack: list[str] = []
    current = PACKAGE_ROOT
    for line in block.splitlines()[2:]:  # past "pocketbert/"
        folder = FOLDER_LINE.match(line)
        if folder:
            depth = len(folder.group(1)) // INDENT - 1
            stack = stack[:depth] + [folder.group(2)]
            current = PACKAGE_ROOT.joinpath(*stack)
            named.setdefault(current, set())
        named[current].update(MODULE.findall(line))
    return named


def package_folders() -> set[Path]:
    return {p.parent for p in PACKAGE_ROOT.rglob("__init__.py")}


def test_every_package_folder_is_in_the_layout_and_every_named_folder_exists():
    named = layout()
    assert sorted(str(p.relative_to(PACKAGE_ROOT)) for p in package_folders() - set(named)) == []
    assert sorted(str(p.relative_to(PACKAGE_ROOT)) for p in named if not p.is_dir()) == []


def test_every_module_is_named_under_its_folder_and_every_named_module_exists():
    named = layout()
    missing, unknown = [], []
    for folder, modules in named.items():
        present = {p.name for p in folder.glob("*.py")} - {"__init__.py"}
        in_subtree = {p.name for p in folder.rglob("*.py")}
        missing += [f"{folder.relative_to(PACKAGE_ROOT)}/{m}" for m in sorted(present - modules)
                    if folder in package_folders()]
        unknown += [f"{folder.relative_to(PACKAGE_ROOT)}/{m}" for m in sorted(modules - in_subtree)]
    assert missing == [], "modules the layout does not name"
    assert unknown == [], "modules the layout names that are not in that folder"
