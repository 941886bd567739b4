"""Every file name a stage reads or writes is spelled once, in run_files.py: a module names the constant, never the
string (DESIGN.md: 'one module of names'). Thresholds the recipe defaults to are the export's own constants."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pocketbert
from pocketbert.core.run import run_files

PACKAGE_ROOT = Path(pocketbert.__file__).resolve().parent
ALLOWED = {
    ("export/programs/onnx_export.py", run_files.ONNX_FP32),  # on purpose: a scratch name inside a temporary folder
}


def file_names() -> set[str]:
    """run_files' file names: its upper-case string constants (and tuples of them) with a suffix."""
    names = set()
    for key, value in vars(run_files).items():
        values = value if isinstance(value, tuple) else (value,)
        if key.isupper():
            names |= {v for v in values if isinstance(v, str) and "." in v.strip(".")}
    return names


def inline_uses(source: str, names: set[str]) -> set[str]:
    """The file names a module spells as whole string literals (docstrings and messages inside f-strings aside)."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
            and id(node) not in docstrings}


def test_rundir_names_files_that_modules_would_spell():
    assert {"tokenizer.json", "tokenizer_config.json", "vocab.txt", "config.json", "labels.json",
            "manifest.json", "model.safetensors", "last.pt"} <= file_names()


@pytest.mark.slow
def test_no_module_spells_a_run_directory_file_name():
    names = file_names()
    found = []
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        relative = path.relative_to(PACKAGE_ROOT).as_posix()
        if relative == "core/run/run_files.py":
            continue
        found += [f"{relative}: {name!r}" for name in sorted(inline_uses(path.read_text(), names))
                  if (relative, name) not in ALLOWED]
    assert found == []


def test_the_check_sees_a_literal_and_skips_docstrings():
    source = '"""Writes tokenizer.json."""\ndef f(out):\n    """tokenizer.json"""\n    return out / "tokenizer.json"\n'
    assert inline_uses(source, {"tokenizer.json"}) == {"tokenizer.json"}
    assert inline_uses('"""tokenizer.json"""\n', {"tokenizer.json"}) == set()


def test_the_recipe_defaults_are_the_int8_budgets():
    from pocketbert.core.config.recipe import ExportSection
    from pocketbert.export.checks import int8_budget

    fields = ExportSection.model_fields
    assert fields["int8_size_budget"].default == int8_budget.INT8_SIZE_BUDGET
    assert fields["int8_latency_budget"].default == int8_budget.INT8_LATENCY_BUDGET
