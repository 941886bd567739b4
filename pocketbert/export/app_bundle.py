"""`pocketbert export ios` and `export android`: from a finished export, the folder an app takes as it is."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pocketbert.errors import ExportError, RunDirError
from pocketbert.export import app_readme
from pocketbert.export.variants import COREML_VARIANTS, VARIANTS
from pocketbert.manifest import read_manifest
from pocketbert.rundir import (
    ANDROID_APP_DIR,
    EXPORT_DIR,
    IOS_APP_DIR,
    LABELS,
    MODEL_CONFIG,
    ORT_MODEL,
    ORT_REQUIRED_OPERATORS,
    TOKENIZER_GOLDEN,
    atomic_folder,
    coreml_package_name,
    require_stage,
)

TOKENIZER_FOR_SWIFT = ("tokenizer.json", "tokenizer_config.json", MODEL_CONFIG)  # what swift-transformers reads
# The iOS folder keeps the files the app reads at run time in a subfolder: Xcode copies a folder reference as it
# is, while the .mlpackage beside it must be added to the target itself, to be compiled and get its class.
IOS_RESOURCES = "resources"


def _export_facts(run_dir: Path) -> tuple[Path, dict]:
    export_dir = require_stage(run_dir, EXPORT_DIR, "pocketbert export")
    return export_dir, read_manifest(export_dir)


def _app_folder(run_dir: Path, default: str, out: Path | None, overwrite: bool) -> Path:
    """Where the app folder goes; an existing non-empty one is replaced only with --overwrite, checked first."""
    target = Path(out) if out else Path(run_dir) / default
    if target.exists() and (not target.is_dir() or any(target.iterdir())) and not overwrite:
        raise RunDirError(f"{target} already exists: pass --overwrite to replace it, or choose another --out")
    return target


def ios_bundle(run_dir: Path, variant: str = "fp16", out: Path | None = None, overwrite: bool = False) -> Path:
    """The chosen .mlpackage (under the name Xcode turns into the model class), tokenizer files, labels, README."""
    export_dir, manifest = _export_facts(run_dir)
    task = manifest["config"]["task"]
    target = _app_folder(run_dir, IOS_APP_DIR, out, overwrite)
    if variant not in COREML_VARIANTS:
        raise ExportError(f"unknown Core ML variant '{variant}': choose from {', '.join(COREML_VARIANTS)}")
    package = export_dir / coreml_package_name(task, variant)
    if not package.exists():
        made = manifest["config"].get("coreml_variants", ["fp16"])
        raise ExportError(f"the export has no Core ML {variant} variant (it has {', '.join(made)}): "
                          f"pick one of those, or re-run `pocketbert export --coreml-variants fp16,{variant}`")
    parity = manifest["metrics"]["parity"][package.name]
    base_name = coreml_package_name(task)  # one class name, whatever the compression
    with atomic_folder(target) as tmp:
        shutil.copytree(package, tmp / base_name)
        (tmp / IOS_RESOURCES).mkdir()
        for name in (*TOKENIZER_FOR_SWIFT, LABELS, TOKENIZER_GOLDEN):
            shutil.copyfile(export_dir / name, tmp / IOS_RESOURCES / name)
        described = {"tokenizer.json": "the WordPiece tokenizer (swift-transformers reads it)",
                     "tokenizer_config.json": "tokenizer settings (lower case, Chinese characters, special tokens)",
                     MODEL_CONFIG: "model config; swift-transformers reads its model type",
                     LABELS: "label names in the order of the logits",
                     TOKENIZER_GOLDEN: "texts and the token ids they must give: run them through the app's "
                                       "tokenizer in a unit test"}
        files = {base_name: f"Core ML ML Program, {variant} weights, minimum "
                            f"{VARIANTS[variant].minimum_ios.replace('iOS', 'iOS ')}",
                 **{f"{IOS_RESOURCES}/{name}": what for name, what in described.items()}}
        (tmp / "README.md").write_text(app_readme.ios_readme(
            task, files, base_name.removesuffix(".mlpackage"), variant, int(manifest["config"]["max_length"]),
            parity["metrics"], parity["n_examples"], IOS_RESOURCES))
    return target


def android_bundle(run_dir: Path, out: Path | None = None, overwrite: bool = False) -> Path:
    """model.ort, its operator list for a reduced runtime, vocab and tokenizer files, labels, README."""
    export_dir, manifest = _export_facts(run_dir)
    task = manifest["config"]["task"]
    target = _app_folder(run_dir, ANDROID_APP_DIR, out, overwrite)
    tokenizer_config = json.loads((export_dir / "tokenizer_config.json").read_text())
    labels = json.loads((export_dir / LABELS).read_text())
    with atomic_folder(target) as tmp:
        for name in (ORT_MODEL, ORT_REQUIRED_OPERATORS, "vocab.txt", "tokenizer.json", LABELS, TOKENIZER_GOLDEN):
            shutil.copyfile(export_dir / name, tmp / name)
        files = {ORT_MODEL: "ONNX Runtime Mobile model (int8 weights)",
                 ORT_REQUIRED_OPERATORS: "operators the model needs, for a reduced ONNX Runtime build",
                 "vocab.txt": "WordPiece vocabulary, one token a line (the Kotlin tokenizer reads it)",
                 "tokenizer.json": "the same tokenizer for other runtimes", LABELS: "label names in logit order",
                 TOKENIZER_GOLDEN: "texts and the token ids they must give: run them through the app's tokenizer "
                                   "in a unit test"}
        (tmp / "README.md").write_text(app_readme.android_readme(
            task, files, labels, int(manifest["config"]["max_length"]),
            bool(tokenizer_config.get("do_lower_case", True)), manifest["metrics"]["parity"][ORT_MODEL]["metrics"],
            manifest["metrics"]["parity"][ORT_MODEL]["n_examples"]))
    return target
