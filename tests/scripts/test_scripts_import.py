"""Every script under scripts/ imports: a module it names that moved or was renamed fails here, not in a user's hands."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each script imports torch, transformers or the exporters

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.mark.parametrize("script", sorted(p.name for p in SCRIPTS.glob("*.py")))
def test_the_script_imports(script, monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))  # scripts import their neighbours by name
    name = f"script_{Path(script).stem}"
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / script)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)  # raises on a module that moved, a name that was renamed
