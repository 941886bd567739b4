"""The same run exported twice gives byte-identical models, one export while another process keeps a core busy:
nothing the export chooses depends on the machine's speed or load."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
from helpers import error_line, linked_copy, run_cli

from pocketbert.core.run import run_files
from pocketbert.export.checks import int8_budget
from pocketbert.export.programs import onnx_export

pytestmark = pytest.mark.slow  # one export of the tiny run beside the session's shared one

# The files of the ONNX family, which every export builds whatever the recipe's Core ML / Core AI / ExecuTorch
# choice: every model and operator list of ONNX Runtime.
ONNX_SUFFIXES = (".onnx", ".ort", ".config")
BUSY_LOOP = "while True: pass"
# The quick export of helpers.QUICK_EXPORT, given as recipe keys: `export --set` reaches the export as the options do.
QUICK_SETTINGS = ("--set", "export.coreml_variants=[fp16]", "--set", "export.coreml_parity_examples=1",
                  "--set", "export.coreai_variants=[]", "--set", "export.executorch_variants=[]")


def _digests(folder) -> dict[str, str]:
    """sha256 of every ONNX Runtime file in the export, the hub layout's onnx/ folder too."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name.endswith(ONNX_SUFFIXES)}


def test_an_export_under_load_is_byte_identical_to_the_first(exported_run, tmp_path, capsys, shared_data):
    run = linked_copy(exported_run, tmp_path / "run", ["teacher", "student"])
    busy = subprocess.Popen([sys.executable, "-c", BUSY_LOOP])
    try:
        result = run_cli(capsys, "export", "--run", run, "--data-dir", shared_data, *QUICK_SETTINGS)
        assert busy.poll() is None  # the loop ran beside the whole export
    finally:
        busy.kill()
        busy.wait()
    assert result.exit_code == 0, error_line(result)
    first, again = _digests(exported_run / "export"), _digests(run / "export")
    assert run_files.ONNX_FP32 in first and run_files.ONNX_INT8 in first and run_files.ORT_MODEL in first
    manifest = json.loads((run / "export" / run_files.MANIFEST).read_text())
    promise = manifest["metrics"]["reproducibility"]
    assert promise["mlpackage"] == onnx_export.APPLE_BYTES_VARY  # what cannot be byte-identical says why
    if onnx_export.ort_order_is_fixed():
        assert again == first  # every ONNX and ORT file and operator list, byte for byte
        assert promise["ort"] == onnx_export.ORT_BYTES_FIXED
    else:  # where the converter's address layout cannot be fixed, the manifest says why its .ort files differ
        assert {k: v for k, v in again.items() if k.endswith(".onnx")} == \
            {k: v for k, v in first.items() if k.endswith(".onnx")}
        assert promise["ort"] == onnx_export.ORT_BYTES_VARY
    assert manifest["config"]["coreml_variants"] == ["fp16"] and manifest["config"]["coreai_variants"] == []
    assert manifest["config"]["executorch_variants"] == [] and manifest["config"]["coreml_parity_examples"] == 1
    # What made them equal: every trial's latency cost is counted on the graph, none timed.
    macs = int8_budget.weight_macs(run / "export" / run_files.ONNX_FP32)
    for folder in (exported_run, run):
        choice = json.loads((folder / "export" / run_files.MANIFEST).read_text())["metrics"]["int8_mixed_precision"]
        assert choice["trials"] and choice["fp32_mac_cost"] == int8_budget.FP32_MAC_COST
        assert all(t["latency_ratio"] == int8_budget.graph_latency_ratio(macs, t["fp32_nodes"])
                   for t in choice["trials"])

    # A file the export's manifest does not list is ignored by what reads the export: never copied, never a crash.
    stray = {"stray.onnx": b"not a model", "notes.txt": b"mine", "Extra.mlpackage": None}
    for name, content in stray.items():
        if content is None:
            (run / "export" / name).mkdir()
        else:
            (run / "export" / name).write_bytes(content)
    for command in (["export", "android"], ["export", "ios"], ["bench", "kit"]):
        result = run_cli(capsys, *command, "--run", run)
        assert result.exit_code == 0, (command, error_line(result))
    for folder in (run / "android", run / "ios", run / "device_kit"):
        assert folder.is_dir() and not any(p.name in stray for p in folder.rglob("*")), folder
