"""manifest.json: what a stage was given, what it produced, and with which software."""

from __future__ import annotations

import hashlib
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from pocketbert.core.files import dumps_strict
from pocketbert.rundir import MANIFEST

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
    path.write_text(dumps_strict(manifest, indent=2, default=str) + "\n")
    return path


# What later stages read from each stage's manifest: a manifest without one of these (edited, or cut short) is
# refused when it is read, not by a KeyError halfway through the next stage.
REQUIRED_KEYS = ("stage", "config", "metrics")
STAGE_KEYS = {
    "teacher": ("config.recipe",),
    "student": ("config.recipe", "config.dataset", "metrics.eval"),
    "export": ("config.task", "config.max_length", "metrics.parity"),
}
OBJECT_KEYS = {"config", "metrics", "config.recipe", "metrics.eval", "metrics.parity"}


def read_manifest(stage_dir: Path) -> dict[str, Any]:
    """A stage folder's manifest.json, checked to be one: a JSON object with the keys later stages read.
    A missing, unreadable or edited manifest is a RunDirError naming it and the command that rewrites it."""
    from pocketbert.errors import RunDirError
    from pocketbert.core.files import read_json_object

    path = Path(stage_dir) / MANIFEST
    advice = f"re-run the stage that wrote {Path(stage_dir).name}/ (with --overwrite)"
    manifest = read_json_object(path, RunDirError, advice, "stage folder's manifest")
    for dotted in (*REQUIRED_KEYS, *STAGE_KEYS.get(str(manifest.get("stage")), ())):
        node: Any = manifest
        for key in dotted.split("."):
            node = node.get(key) if isinstance(node, dict) else None
        if node is None or (dotted in OBJECT_KEYS and not isinstance(node, dict)):
            what = "object" if dotted in OBJECT_KEYS else "entry"
            raise RunDirError(f"{path}: no '{dotted}' {what} in the manifest; {advice}")
    return manifest
