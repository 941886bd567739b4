"""The .ort files held to the student on the ONNX Runtime versions the app folders name: each gated by the same
rule as on the export's own runtime, the versions in the manifest, and a file such a runtime cannot read refused."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime
import pytest

from pocketbert.core.errors import ExportError
from pocketbert.core.process.launch_env import SESSION_THREADS_ENV
from pocketbert.core.run.run_files import EXPORT_DIR, MANIFEST, ORT_MODEL, ORT_QDQ_MODEL
from pocketbert.export.checks import app_runtimes

pytestmark = pytest.mark.slow  # the session's exported run, and a second ONNX Runtime in a process of its own
OLDER = [r for r in app_runtimes.APP_RUNTIMES if r.version != onnxruntime.__version__]
# An .ort read by another ONNX Runtime version runs the same kernels on the same weights here: outputs equal to
# within float rounding.
SAME_OUTPUTS_ATOL = 1e-4


def test_the_app_runtimes_gate_each_ort_and_the_manifest_names_them(exported_run):
    parity = json.loads((exported_run / EXPORT_DIR / MANIFEST).read_text())["metrics"]["parity"]
    assert OLDER, "every app runtime is the export's own: nothing older is gated"
    for name in (ORT_MODEL, ORT_QDQ_MODEL):
        gates = parity[name]["app_runtimes"]
        assert set(gates) == {r.version for r in app_runtimes.APP_RUNTIMES}
        for runtime in OLDER:
            gate = gates[runtime.version]
            assert gate["platform"] == runtime.platform and gate["passed"] is True
            assert gate["max_abs_diff"] <= parity[name]["max_abs_diff"] + SAME_OUTPUTS_ATOL
            assert gate["metrics"] == parity[name]["metrics"]
        assert parity[name]["passed"]


def test_an_older_runtime_runs_the_file_as_the_exports_own_does(exported_run):
    model = exported_run / EXPORT_DIR / ORT_MODEL
    ids = np.array([[101, 7, 8, 9, 102]], dtype=np.int64)
    current = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    feeds = {i.name: (ids if "input_ids" in i.name else np.ones_like(ids) if "mask" in i.name else np.zeros_like(ids))
             for i in current.get_inputs()}
    expected = current.run(None, feeds)
    for runtime in OLDER:
        session = app_runtimes.WorkerSession(model, runtime.version)
        try:
            got = session.run(feeds)
        finally:
            session.close()
        assert all(np.allclose(a, b, atol=SAME_OUTPUTS_ATOL) for a, b in zip(expected, got))


def test_a_file_an_app_runtime_cannot_read_is_refused(tmp_path):
    broken = tmp_path / "model.ort"
    broken.write_bytes(b"not an ort flatbuffer" * 10)
    with pytest.raises(ExportError, match=f"ONNX Runtime {OLDER[0].version} could not load model.ort"):
        app_runtimes.WorkerSession(broken, OLDER[0].version)


def test_an_older_runtimes_session_takes_the_processs_thread_cap(exported_run, monkeypatch):
    model = exported_run / EXPORT_DIR / ORT_MODEL
    for cap, threads in (("1", 1), (None, 0)):
        if cap is None:
            monkeypatch.delenv(SESSION_THREADS_ENV, raising=False)
        else:
            monkeypatch.setenv(SESSION_THREADS_ENV, cap)
        session = app_runtimes.WorkerSession(model, OLDER[0].version)
        try:
            assert session.threads == threads
        finally:
            session.close()
