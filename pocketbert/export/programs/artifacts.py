"""The export's artifacts, hashed into its manifest when made (manifest.write_manifest) and checked against it
before use.

An app folder copies, and bench times, only what the parity gate proved: a file edited, swapped or replaced
by a link since the export is refused by name, with the command that makes it again.
"""

from __future__ import annotations

from pathlib import Path

from pocketbert.core.errors import ExportError
from pocketbert.core.run.manifest import ARTIFACTS, verify_artifacts
from pocketbert.core.run.stage_records import ExportRecord

__all__ = ["ARTIFACTS", "verified"]


def verified(export_dir: Path, manifest: ExportRecord, names: list[str], run_dir: Path) -> list[Path]:
    """The paths of `names` in the export, each checked against the hash its manifest recorded."""
    return verify_artifacts(export_dir, manifest, names, ExportError,
                            f"re-run `pocketbert export --run {run_dir} --overwrite`")
