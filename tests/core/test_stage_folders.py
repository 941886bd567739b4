"""What makes a folder a stage (and its parent a run) for the output checks: a manifest.json pocketbert wrote, or one
that cannot be read. Another tool's manifest.json, in a web app or a browser extension the user keeps a model in,
makes neither, so an output may go there as anywhere else."""

from __future__ import annotations

import json
import time

import pytest

from pocketbert.core.errors import RunDirError
from pocketbert.core.run.manifest import write_manifest
from pocketbert.core.run.user_paths import output_folder

# Real formats of other tools' manifest.json: a web app manifest (W3C) and a browser extension's (manifest v3).
WEB_APP_MANIFEST = {"short_name": "Reviews", "name": "Review sentiment", "icons": [{"src": "icon.png",
                    "sizes": "192x192", "type": "image/png"}], "start_url": ".", "display": "standalone"}
EXTENSION_MANIFEST = {"manifest_version": 3, "name": "Sentiment", "version": "1.0",
                      "background": {"service_worker": "worker.js"}}


def stage(folder):
    """A stage folder as a stage writes it: its manifest through the record class."""
    folder.mkdir(parents=True)
    write_manifest(folder, stage="bench", config={}, inputs={}, metrics={}, started=time.time())
    return folder


def foreign_manifest(folder, content):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_text(json.dumps(content))
    return folder


def test_a_web_apps_manifest_beside_the_output_makes_no_run(tmp_path):
    site = tmp_path / "site"
    foreign_manifest(site / "public", WEB_APP_MANIFEST)
    target = site / "build" / "ios"
    assert output_folder(target, "export ios", False) == target


def test_an_extensions_manifest_above_the_output_makes_no_stage(tmp_path):
    extension = foreign_manifest(tmp_path / "extension", EXTENSION_MANIFEST)
    assert output_folder(extension / "model", "export android", False) == extension / "model"
    (extension / "model").mkdir()
    (extension / "model" / "weights.bin").write_bytes(b"\0")
    with pytest.raises(RunDirError, match="already exists"):  # still refused as any full folder is
        output_folder(extension / "model", "export android", False)


def test_a_stage_pocketbert_wrote_and_its_run_are_refused(tmp_path):
    run = tmp_path / "run"
    stage(run / "bench")
    with pytest.raises(RunDirError, match="is a stage folder"):
        output_folder(run / "bench", "export ios", False)
    with pytest.raises(RunDirError, match="lies inside the stage folder"):
        output_folder(run / "bench" / "ios", "export ios", False)
    with pytest.raises(RunDirError, match="is a run"):
        output_folder(run, "export ios", False)
    with pytest.raises(RunDirError, match="lies inside the run"):
        output_folder(run / "apps" / "ios", "export ios", False)
    holder = tmp_path / "holder"  # an earlier output of the command, a run put into it since
    holder.mkdir()
    (holder / ".pocketbert_output.json").write_text(json.dumps({"made_by": "export ios"}))
    stage(holder / "old" / "bench")
    with pytest.raises(RunDirError, match="holds"):  # --overwrite does not replace it
        output_folder(holder, "export ios", True)


@pytest.mark.parametrize("content", [b"{\"stage\": \"teach", b"\xff\xfe not text"], ids=["cut short", "not UTF-8"])
def test_a_manifest_that_cannot_be_read_is_still_a_stage(tmp_path, content):
    damaged = tmp_path / "run" / "teacher"
    damaged.mkdir(parents=True)
    (damaged / "manifest.json").write_bytes(content)
    with pytest.raises(RunDirError, match="is a stage folder"):
        output_folder(damaged, "export ios", False)
    with pytest.raises(RunDirError, match="lies inside the run"):
        output_folder(tmp_path / "run" / "apps" / "ios", "export ios", False)
