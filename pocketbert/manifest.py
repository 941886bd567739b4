"""manifest.json: what a stage was given, what it produced, and with which software."""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from pocketbert.rundir import MANIFEST

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
    path = Path(stage_dir) / MANIFEST
    path.write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    return path


def read_manifest(stage_dir: Path) -> dict[str, Any]:
    return json.loads((Path(stage_dir) / MANIFEST).read_text())
