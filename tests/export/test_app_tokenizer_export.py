"""The export builds the app folders' own tokenizers where their toolchain is and checks each on every code point:
the manifest says what each gave, or why it did not run."""

from __future__ import annotations

import json
import shutil

import pytest

from pocketbert.core.run.run_files import EXPORT_DIR, MANIFEST
from pocketbert.export.app import app_programs
from pocketbert.export.checks.tokenizer_probes import FLAG_SEQUENCES

pytestmark = pytest.mark.slow  # the session's exported run

SCALAR_VALUES = 0x110000 - 0x800  # every code point but the surrogates


def test_the_export_checks_each_app_tokenizer_it_can_build(exported_run):
    manifest = json.loads((exported_run / EXPORT_DIR / MANIFEST).read_text())
    checks = manifest["metrics"]["app_tokenizer_exhaustive"]
    contexts = manifest["config"]["tokenizer_check_contexts"]  # the tiny preset's: one
    assert set(checks) == set(app_programs.PROGRAMS)
    toolchains = {"swift": app_programs.swift_executable(), "kotlin": shutil.which("kotlinc")}
    for language, toolchain in toolchains.items():
        if toolchain is None:
            assert "not_run" in checks[language]
            continue
        assert checks[language]["mismatch_count"] == 0
        assert checks[language]["probes"] == len(contexts) * SCALAR_VALUES + len(FLAG_SEQUENCES)
        assert checks[language]["golden_texts"] >= 10 and checks[language]["random_texts"] > 0
        assert checks[language]["added_token_texts"] > 0  # [SEP], [MASK] ... typed in texts


def test_the_manifest_leaves_to_a_device_only_what_this_machine_did_not_prove(exported_run):
    """The app tokenizers compiled and checked here are proven here: the device list keeps only the frameworks."""
    manifest = json.loads((exported_run / EXPORT_DIR / MANIFEST).read_text())
    checks = manifest["metrics"]["app_tokenizer_exhaustive"]
    ran = [language for language, check in checks.items() if "not_run" not in check]
    proven, device = " ".join(manifest["metrics"]["proven_here"]), " ".join(manifest["metrics"]["needs_a_device"])
    if ran:
        assert f"{' and '.join(sorted(ran))} compiled and checked here" in proven
    assert "compiling and running the Swift and Kotlin" not in device
    assert "frameworks" in device
