"""One typed export request: built once at the command line and handed to every step; no dict of export settings
crosses a function boundary in export/ or train/vocabulary/ (the fit an export may run first)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pocketbert
from tests.helpers import QUICK_EXPORT, linked_copy, run_cli

PACKAGE_ROOT = Path(pocketbert.__file__).resolve().parent
REQUEST_READERS = (PACKAGE_ROOT / "export", PACKAGE_ROOT / "train" / "vocabulary")
# What a dict of export settings was called when it travelled beside the typed recipe.
SETTINGS_NAMES = {"settings", "overrides", "export_settings", "given_settings"}


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.arg]:
    a = function.args
    return [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []), *([a.kwarg] if a.kwarg else [])]


def settings_parameters(source: str, where: str) -> list[str]:
    """Each parameter of a function in `source` that carries settings untyped: named as export settings were, and
    not annotated with a record (a dict, or nothing)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for arg in _parameters(node):
            annotation = ast.unparse(arg.annotation) if arg.annotation is not None else ""
            if arg.arg in SETTINGS_NAMES and (not annotation or "dict" in annotation.lower() or "Any" in annotation):
                found.append(f"{where}:{node.lineno} {node.name}({arg.arg})")
    return found


def test_no_dict_of_export_settings_crosses_a_function_boundary():
    found = [hit for folder in REQUEST_READERS for path in sorted(folder.rglob("*.py"))
             for hit in settings_parameters(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE_ROOT)))]
    assert found == []


def test_the_check_sees_a_settings_dict_and_passes_a_typed_record():
    source = ("def plan(run, settings: dict | None): ...\ndef step(overrides): ...\n"
              "def graph(settings: QASettings): ...\n")
    assert settings_parameters(source, "x.py") == ["x.py:1 plan(settings)", "x.py:2 step(overrides)"]


@pytest.mark.slow
def test_one_export_command_validates_its_request_once(capsys, tmp_path, monkeypatch, quick_exported_run,
                                                       shared_data):
    """The recorded recipe with the command's settings over it is validated once, and the student's files verified
    once, however many steps read the request."""
    from pocketbert.core.config import recipe as recipe_module
    from pocketbert.core.run import manifest as manifest_module
    from pocketbert.core.run.run_files import STUDENT_DIR

    run = tmp_path / "run"
    linked_copy(quick_exported_run, run)
    calls = {"validated": 0, "student_verified": 0}
    validate, verify = recipe_module.validate_recipe, manifest_module.verified_stage

    def counting_validate(*args, **kwargs):
        calls["validated"] += 1
        return validate(*args, **kwargs)

    def counting_verify(run_dir, stage, made_by):
        calls["student_verified"] += stage == STUDENT_DIR
        return verify(run_dir, stage, made_by)

    monkeypatch.setattr(recipe_module, "validate_recipe", counting_validate)
    monkeypatch.setattr(manifest_module, "verified_stage", counting_verify)
    result = run_cli(capsys, "export", "--run", run, "--data-dir", shared_data, "--overwrite", "--parity-examples", "4",
                     "--set", "export.int8_activation_scale=per_token", *QUICK_EXPORT)
    assert result.exit_code == 0, result.err
    assert calls == {"validated": 1, "student_verified": 1}
