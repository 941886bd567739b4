"""The export builds the app folders' own tokenizers where their toolchain is and checks each on every code point:
the manifest says what each gave, or why it did not run."""

from __future__ import annotations

import json
import shutil

import pytest

from pocketbert.core.run_files import EXPORT_DIR, MANIFEST
from pocketbert.export.app import app_programs

pytestmark = pytest.mark.slow  # the session's exported run

EVERY_PROBE = 4_000_000  # every scalar value in four contexts: 4 x 1,112,064, and the flag sequences


def test_the_export_checks_each_app_tokenizer_it_can_build(exported_run):
    checks = json.loads((exported_run / EXPORT_DIR / MANIFEST).read_text())["metrics"]["app_tokenizer_exhaustive"]
    assert set(checks) == set(app_programs.PROGRAMS)
    toolchains = {"swift": app_programs.swift_executable(), "kotlin": shutil.which("kotlinc")}
    for language, toolchain in toolchains.items():
        if toolchain is None:
            assert "not_run" in checks[language]
            continue
        assert checks[language]["mismatch_count"] == 0 and checks[language]["probes"] > EVERY_PROBE
        assert checks[language]["golden_texts"] >= 10 and checks[language]["random_texts"] > 0
