"""The export's artifacts, hashed into its manifest when made and checked against it before use.

An app folder copies, and bench times, only what the parity gate proved: a file edited, swapped or replaced
by a link since the export is refused by name, with the command that makes it again.
"""

from __future__ import annotations

import os
from pathlib import Path

from pocketbert.errors import ExportError
from pocketbert.manifest import path_size, sha256_of
from pocketbert.rundir import MANIFEST

ARTIFACTS = "artifacts"  # manifest key: {name: {"sha256": ..., "bytes": ...}} for every entry of export/


def _links(path: Path) -> list[Path]:
    """Symbolic links at or under `path`, never followed: an export holds its own files."""
    if path.is_symlink():
        return [path]
    found = []
    for root, dirs, files in os.walk(path):  # os.walk does not descend into linked folders
        found += [Path(root) / name for name in (*dirs, *files) if os.path.islink(Path(root) / name)]
    return found


def record(export_dir: Path) -> dict:
    """sha256 and size of every file and folder the export wrote (the manifest itself aside)."""
    export_dir = Path(export_dir)
    linked = _links(export_dir)
    if linked:
        raise ExportError(f"{linked[0]} is a symbolic link: an export holds its own files; remove it and re-run "
                          "`pocketbert export`")
    return {p.name: {"sha256": sha256_of(p), "bytes": path_size(p)}
            for p in sorted(export_dir.iterdir()) if p.name != MANIFEST}


def verified(export_dir: Path, manifest: dict, names: list[str], run_dir: Path) -> list[Path]:
    """The paths of `names` in the export, each checked against the hash its manifest recorded."""
    export_dir = Path(export_dir)
    again = f"re-run `pocketbert export --run {run_dir} --overwrite`"
    recorded = manifest.get(ARTIFACTS)
    if not isinstance(recorded, dict):
        raise ExportError(f"{export_dir / MANIFEST} records no artifact hashes (an export by an older version, or "
                          f"an edited manifest), so its files cannot be checked: {again}")
    if export_dir.is_symlink():
        raise ExportError(f"{export_dir} is a symbolic link: an export holds its own files; {again}")
    paths = []
    for name in names:
        path = export_dir / name
        linked = _links(path)
        if linked:
            raise ExportError(f"{linked[0]} is a symbolic link, not a file the export wrote: {again}")
        entry = recorded.get(name)
        if not isinstance(entry, dict) or "sha256" not in entry:
            raise ExportError(f"{name} is not among the artifacts {export_dir / MANIFEST} records: {again}")
        if not path.exists():
            raise ExportError(f"{path} is missing from the export: {again}")
        if sha256_of(path) != entry["sha256"]:
            raise ExportError(f"{path} changed after the export (its sha256 is not the one manifest.json records): "
                              f"{again}")
        paths.append(path)
    return paths
