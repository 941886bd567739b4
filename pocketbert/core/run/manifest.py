"""manifest.json: what a stage was given, what it produced, and with which software."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from pocketbert.core.files import dumps_strict
from pocketbert.core.errors import PocketbertError, RunDirError
from pocketbert.core.run.run_files import MANIFEST
from pocketbert.core.run.stage_records import ARTIFACTS, StageRecord, record_class

R = TypeVar("R", bound=StageRecord)

# The config key under which a training stage records the name of the recipe it ran (train/registry.py);
# compare and the result scripts read it.
RECIPE_NAME = "recipe_name"

RECORDED_PACKAGES = (
    "pocketbert", "torch", "transformers", "tokenizers", "onnx", "onnxruntime", "coremltools", "numpy",
    "onnxruntime-extensions", "executorch",
)


def sha256_of(path: Path) -> str:
    """sha256 of a file, or of a folder's files in name order."""
    path = Path(path)
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        if path.is_dir():
            digest.update(str(file.relative_to(path)).encode())
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def path_size(path: Path) -> int:
    """Bytes of a file, or of all files in a folder (an .mlpackage, a cache entry)."""
    path = Path(path)
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def package_versions() -> dict[str, str]:
    versions = {"python": sys.version.split()[0]}
    for name in RECORDED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def command_line() -> str:
    """The command that made a stage, as the user typed it (the CLI's own name, then its arguments)."""
    import shlex
    import sys

    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    if program in ("__main__.py", "cli.py"):
        program = "pocketbert"
    return shlex.join([program, *sys.argv[1:]])



def symbolic_links(path: Path) -> list[Path]:
    """Symbolic links at or under `path`, never followed: a stage folder holds its own files."""
    path = Path(path)
    if path.is_symlink():
        return [path]
    found = []
    for root, dirs, files in os.walk(path):  # os.walk does not descend into linked folders
        found += [Path(root) / name for name in (*dirs, *files) if os.path.islink(Path(root) / name)]
    return found


def record_artifacts(stage_dir: Path, error: type[PocketbertError] = RunDirError) -> dict[str, dict]:
    """sha256 and size of every file and folder in a stage folder (the manifest itself aside)."""
    stage_dir = Path(stage_dir)
    linked = symbolic_links(stage_dir)
    if linked:
        raise error(f"{linked[0]} is a symbolic link: a stage folder holds its own files; remove it and run the "
                    "stage again")
    return {p.name: {"sha256": sha256_of(p), "bytes": path_size(p)}
            for p in sorted(stage_dir.iterdir()) if p.name != MANIFEST}


def write_manifest(
    stage_dir: Path,
    *,
    stage: str,
    config: dict[str, Any],
    inputs: dict[str, Path],
    metrics: dict[str, Any],
    started: float,
    extra: dict[str, Any] | None = None,
) -> Path:
    """The stage's manifest.json, written through its record class (stage_records.py), the class its readers read it
    with: a manifest that would not read back is a bug caught here, not in the next stage."""
    manifest = {
        "stage": stage,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "wall_time_s": round(time.time() - started, 2),
        "config": config,
        "inputs": {name: {"path": str(p), "sha256": sha256_of(p)} for name, p in inputs.items() if p is not None},
        "metrics": metrics,
        "versions": package_versions(),
        "git_commit": git_commit(),
        "command": command_line(),
        "host": {"machine": platform.machine(), "system": platform.system(), "processor": platform.processor()},
    }
    if extra:
        manifest.update(extra)
    # the last thing a stage writes: every file beside it is final
    manifest.setdefault(ARTIFACTS, record_artifacts(stage_dir))
    record = record_class(stage).model_validate(manifest)
    path = Path(stage_dir) / MANIFEST
    # what the stage gave, typed by its class; a field it did not give is not written with a default
    path.write_text(dumps_strict(record.model_dump(exclude_unset=True), indent=2, default=str) + "\n")
    return path


def read_manifest(stage_dir: Path, record: type[R] = StageRecord) -> R:
    """A stage folder's manifest.json as its stage's record (stage_records.py), one of `record`'s class: a missing,
    unreadable or edited manifest, one without what later stages read, or another stage's, is a RunDirError naming
    it and the command that rewrites it."""
    from pydantic import ValidationError

    from pocketbert.core.errors import RunDirError
    from pocketbert.core.files import read_json_object

    path = Path(stage_dir) / MANIFEST
    advice = f"re-run the stage that wrote {Path(stage_dir).name}/ (with --overwrite)"
    manifest = read_json_object(path, RunDirError, advice, "stage folder's manifest")
    try:
        read = record_class(manifest.get("stage")).model_validate(manifest)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        if first["type"] == "missing":
            raise RunDirError(f"{path}: no '{where}' entry in the manifest; {advice}") from None
        raise RunDirError(f"{path}: '{where}' in the manifest is not what a stage writes ({first['msg']}); "
                          f"{advice}") from None
    if not isinstance(read, record):
        raise RunDirError(f"{path} is a '{read.stage}' stage's manifest, not the one this folder's stage writes; "
                          f"{advice}")
    return read


# The command that writes each stage's folder (`import` and `train prune` write students too, rarely again).
STAGE_COMMANDS = {"teacher": "pocketbert train teacher", "student": "pocketbert train distill",
                  "student_fitted": "pocketbert train vocabulary", "export": "pocketbert export"}


def rerun_advice(stage_dir: Path, manifest: StageRecord) -> str:
    """What makes a stage folder again: its stage's command on its run, with --overwrite."""
    command = STAGE_COMMANDS.get(manifest.stage)
    if command is None:
        return f"re-run the stage that wrote {Path(stage_dir).name}/ (with --overwrite)"
    return f"re-run `{command} --run {Path(stage_dir).parent} --overwrite`"


def verify_artifacts(stage_dir: Path, manifest: StageRecord, names: list[str] | None = None,
                     error: type[PocketbertError] = RunDirError, again: str | None = None) -> list[Path]:
    """The paths of `names` (None: every file the manifest records) in a stage folder, each checked against the
    sha256 its manifest recorded when the stage wrote it, before a later stage reads any. A file edited, damaged,
    removed or replaced by a link since is `error`, one line naming it and the command that writes it again."""
    stage_dir = Path(stage_dir)
    again = again or rerun_advice(stage_dir, manifest)
    recorded = manifest.artifacts
    if recorded is None:
        raise error(f"{stage_dir / MANIFEST} records no file hashes (a stage folder written by an older version, or "
                    f"an edited manifest), so its files cannot be checked: {again}")
    if stage_dir.is_symlink():
        raise error(f"{stage_dir} is a symbolic link: a stage folder holds its own files; {again}")
    paths = []
    for name in sorted(recorded) if names is None else names:
        path = stage_dir / name
        linked = symbolic_links(path)
        if linked:
            raise error(f"{linked[0]} is a symbolic link, not a file the stage wrote: {again}")
        entry = recorded.get(name)
        if entry is None:
            raise error(f"{name} is not among the files {stage_dir / MANIFEST} records: {again}")
        if not path.exists():
            raise error(f"{path} is missing from the stage folder that wrote it: {again}")
        if sha256_of(path) != entry.sha256:
            raise error(f"{path} changed after the {manifest.stage} was written (edited or "
                        f"damaged: its sha256 is not the one {MANIFEST} records): {again}")
        paths.append(path)
    return paths


def read_verified_stage(stage_dir: Path, record: type[R] = StageRecord) -> R:
    """A finished stage folder's manifest, with every file it records checked against its hash: what a later stage
    calls before it reads the folder. A folder written before stages recorded their files (no hashes in its
    manifest) is read as it is, with one line saying its files could not be checked."""
    manifest = read_manifest(stage_dir, record)
    if manifest.artifacts is None:
        import sys

        print(f"note: {Path(stage_dir) / MANIFEST} records no file hashes (written by an older pocketbert): its "
              f"files are read unchecked; {rerun_advice(stage_dir, manifest)} to record them", file=sys.stderr)
        return manifest
    verify_artifacts(stage_dir, manifest)
    return manifest


def verified_stage(run_dir: Path, stage: str, made_by: str) -> tuple[Path, StageRecord]:
    """(folder, manifest) of a run's finished stage, its files checked against their hashes (read_verified_stage),
    or an error naming the command that makes it."""
    from pocketbert.core.run.atomic_folder import require_stage

    folder = require_stage(run_dir, stage, made_by)
    return folder, read_verified_stage(folder, record_class(stage))
