"""`pocketbert export ios` and `export android`: from a finished export, the folder an app takes as it is."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from pocketbert.core.errors import ExportError
from pocketbert.export.checks import mobile_usability
from pocketbert.export.programs import artifacts
from pocketbert.export.app import app_readme, app_tasks
from pocketbert.export.app.swift_package import SWIFT_PACKAGE, package_files
from pocketbert.export.evaluators.placement import readme_table
from pocketbert.export.text_in.text_tokenizer import CONTRIB
from pocketbert.core.config.export_families import COREAI, COREML, IOS_APP_PROGRAMS
from pocketbert.export.programs.variants import Variant, variant_of
from pocketbert.core.run.manifest import read_manifest
from pocketbert.core.run.stage_records import ExportRecord, ParityRow
from pocketbert.core.run.atomic_folder import require_stage
from pocketbert.core.run.run_files import (
    ANDROID_APP_DIR,
    APP_README,
    EXECUTORCH_INT8,
    EXPORT_DIR,
    IOS_APP_DIR,
    LABELS,
    MODEL_CONFIG,
    ONNX_INT8,
    ONNX_QDQ,
    ORT_MODEL,
    TOKENIZER_CONFIG,
    TOKENIZER_GOLDEN,
    TOKENIZER_JSON,
    TOKENIZER_TABLES,
    SWIFT_TOKENIZER_PACKAGE,
    coreai_asset_name,
    coreml_package_name,
)
from pocketbert.core.tasks.registry import TASK_CLASSES
from pocketbert.core.run.user_paths import output_folder, written_output

# PocketBertTokenizer reads tokenizer.tables; swift-transformers, the alternative docs/app.md shows, the other three
TOKENIZER_FOR_SWIFT = (TOKENIZER_TABLES, TOKENIZER_JSON, TOKENIZER_CONFIG, MODEL_CONFIG)
# The iOS folder keeps the files the app reads at run time in a subfolder: Xcode copies a folder reference as it
# is, while the .mlpackage beside it must be added to the target itself, to be compiled and get its class.
IOS_RESOURCES = "resources"


def _export_facts(run_dir: Path) -> tuple[Path, ExportRecord]:
    export_dir = require_stage(run_dir, EXPORT_DIR, "pocketbert export")
    return export_dir, read_manifest(export_dir, ExportRecord)


def _app_folder(run_dir: Path, export_dir: Path, default: str, out: Path | None, overwrite: bool) -> Path:
    """Where the app folder goes, checked first: --overwrite replaces only an earlier app folder of this kind,
    never the export it reads or a folder that holds it."""
    target = Path(out) if out else Path(run_dir) / default
    return output_folder(target, f"export {default}", overwrite, inputs=[export_dir], own_files=True)


def _executorch_files(export_dir: Path, manifest: ExportRecord, code_by_task: dict, wanted: bool) -> list[str]:
    """The ExecuTorch program an app folder carries beside its main model, checked before anything is written."""
    if not wanted:
        return []
    task = manifest.config.task
    if EXECUTORCH_INT8 not in manifest.metrics.parity:
        raise ExportError(f"the export has no {EXECUTORCH_INT8}: re-run `pocketbert export` with pte-int8 among "
                          "--executorch-variants (a BiLSTM has none)")
    if task not in code_by_task:
        raise ExportError(f"the ExecuTorch app code is written for {', '.join(code_by_task)}, not {task}: leave out "
                          "--executorch")
    return [EXECUTORCH_INT8]


def _ios_files_checked(export_dir: Path, manifest: ExportRecord, run_dir: Path, model_name: str, pte: list[str],
                       app) -> tuple[tuple[str, ...], dict[str, str], dict]:
    """The iOS folder's resources and the task's files beside them (Core ML or Core AI alike), verified against the
    manifest with the model before anything is read, and the values the task's app code is filled with."""
    shipped = (*TOKENIZER_FOR_SWIFT, LABELS, TOKENIZER_GOLDEN, *pte)
    beside = app.ios_files()
    artifacts.verified(export_dir, manifest, [model_name, *shipped, *beside], run_dir)
    return shipped, beside, app.code_values(export_dir, manifest)


def _fill_ios_folder(tmp: Path, model: Path, model_name: str, export_dir: Path, resources: tuple[str, ...],
                     beside: tuple[str, ...] = ()) -> None:
    """The iOS folder's contents, Core ML or Core AI alike: the model folder under the name the Swift loads, the
    resources the app bundles, the task's files beside them (sources the app target compiles, files for its
    tests) and the Swift tokenizer package."""
    shutil.copytree(model, tmp / model_name)
    (tmp / IOS_RESOURCES).mkdir()
    for name in resources:
        shutil.copyfile(export_dir / name, tmp / IOS_RESOURCES / name)
    for name in beside:
        shutil.copyfile(export_dir / name, tmp / name)
    for source in package_files():
        target = tmp / SWIFT_TOKENIZER_PACKAGE / source.relative_to(SWIFT_PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


@dataclass(frozen=True)
class _IOSModel:
    """The program an iOS folder carries, chosen from the export: its file there, the name the Swift loads it by,
    its variant's definition, its parity record and the lengths it takes (none: each input at its own)."""

    path: Path
    base_name: str
    variant: str
    definition: Variant
    parity: ParityRow
    lengths: tuple[int, ...]


class CoreMLTarget:
    """`export ios`: a Core ML package (iOS 16, or 18 for the enumerated and int4-block programs)."""

    runtime = "Core ML"
    tokenizer_settings = "tokenizer settings (lower case, Chinese characters, special tokens)"

    def model(self, export_dir: Path, manifest: ExportRecord, task: str, variant: str | None) -> _IOSModel:
        stem = TASK_CLASSES[task].coreml_class_stem
        made, parity = manifest.config.coreml_variants, manifest.metrics.parity
        if not made:
            raise ExportError("the export has no Core ML program: re-run `pocketbert export --coreml-variants fp16`, "
                              "or choose --target ios27 for its Core AI program")
        gated = {v for v in made if (row := parity.get(coreml_package_name(stem, v))) is not None and row.passed}
        variant = variant or next(v for v in (*IOS_APP_PROGRAMS, made[0]) if v in gated or v == made[0])
        if variant not in COREML.names:
            raise ExportError(f"unknown Core ML variant '{variant}': choose from {', '.join(COREML.names)}")
        package = export_dir / coreml_package_name(stem, variant)
        # a package the export did not make (copied in by hand) has no gate: it is not shipped
        if variant not in made or package.name not in parity or not package.exists():
            raise ExportError(f"the export has no Core ML {variant} variant (it has {', '.join(made)}): "
                              f"pick one of those, or re-run `pocketbert export --coreml-variants fp16,{variant}`")
        row = parity[package.name]
        lengths = tuple(int(n) for n in (row.by_length or {}))
        # one class name, whatever the compression
        return _IOSModel(package, coreml_package_name(stem), variant, variant_of(COREML, variant), row, lengths)

    def model_row(self, model: _IOSModel) -> str:
        return (f"Core ML ML Program (`{model.variant}`), {model.definition.precision} weights, minimum "
                f"{model.definition.minimum_ios.replace('iOS', 'iOS ')}")

    def how_run(self, parity: ParityRow) -> str:
        return f"run by {parity.runtime} on Linux"

    def by_length(self, model: _IOSModel) -> str:
        return "each function" if model.definition.multifunction else "each enumerated length"

    def length_name(self, model: _IOSModel, n: str) -> str:
        return f"main_len{n}" if model.definition.multifunction else n

    def not_run(self) -> str:
        return ("the Swift code is type-checked here against stubs of Core ML's API, not built with Apple's SDK; "
                "Core ML itself (and which compute unit it picks) runs only on Apple hardware")

    def readme(self, model: _IOSModel, facts: app_readme.FolderFacts, **steps) -> str:
        return app_readme.ios_readme(facts, model_class=model.base_name.removesuffix(".mlpackage"),
                                     variant=model.variant, weights=model.definition.precision, lengths=model.lengths,
                                     functions=model.definition.multifunction, **steps)


class CoreAITarget:
    """`export ios --target ios27`: the Core AI program (iOS 27), one function per enumerated length."""

    runtime = "Core AI"
    tokenizer_settings = "tokenizer settings (lower case, special tokens)"

    def model(self, export_dir: Path, manifest: ExportRecord, task: str, variant: str | None) -> _IOSModel:
        stem = TASK_CLASSES[task].coreml_class_stem
        made, parity = manifest.config.coreai_variants, manifest.metrics.parity
        if not made:
            raise ExportError("the export has no Core AI program: re-run `pocketbert export --coreai-variants fp16` "
                              "(with the coreai extra installed), or leave out --target ios27")
        variant = variant or made[0]
        if variant not in COREAI.names:
            raise ExportError(f"unknown Core AI variant '{variant}': choose from {', '.join(COREAI.names)}")
        asset = export_dir / coreai_asset_name(stem, variant)
        if variant not in made or asset.name not in parity or not asset.exists():
            raise ExportError(f"the export has no Core AI {variant} variant (it has {', '.join(made)}): pick one of "
                              f"those, or re-run `pocketbert export --coreai-variants {variant}`")
        row = parity[asset.name]
        lengths = tuple(int(n) for n in (row.by_length or {})) or tuple(manifest.metrics.coreai_entry_points or ())
        return _IOSModel(asset, coreai_asset_name(stem), variant, variant_of(COREAI, variant), row, lengths)

    def model_row(self, model: _IOSModel) -> str:
        return (f"Core AI program (`{model.variant}`), {model.definition.precision} weights, one function per "
                f"length ({', '.join(map(str, model.lengths))}), minimum "
                f"{model.definition.minimum_ios.replace('iOS', 'iOS ')}")

    def how_run(self, parity: ParityRow) -> str:
        return f"its saved program run op by op by {parity.runtime} on Linux"

    def by_length(self, model: _IOSModel) -> str:
        return "each function"

    def length_name(self, model: _IOSModel, n: str) -> str:
        return f"main_len{n}"

    def not_run(self) -> str:
        return ("the Swift code is type-checked here against stubs of Core AI's API, not built with Apple's SDK; "
                "Core AI's runtime (which runs only on Apple platforms) did not run the program; `coreai-build` did "
                "not compile it")

    def readme(self, model: _IOSModel, facts: app_readme.FolderFacts, **steps) -> str:
        return app_readme.ios_coreai_readme(facts, asset_stem=model.base_name.removesuffix(".aimodel"),
                                            weights=model.definition.precision, lengths=model.lengths, **steps)


# `export ios --target`: what the folder's program is and how its README speaks of it.
IOS_TARGETS = {"coreml": CoreMLTarget(), "ios27": CoreAITarget()}


def ios_bundle(run_dir: Path, variant: str | None = None, out: Path | None = None, overwrite: bool = False,
               executorch: bool = False, target: str = "coreml") -> Path:
    """The chosen program (under the name Xcode turns into the model class: a .mlpackage, or with target ios27 the
    Core AI .aimodel), tokenizer files, labels, README; with executorch, the int8 ExecuTorch program too, and Swift
    for it."""
    if target not in IOS_TARGETS:
        raise ExportError(f"unknown iOS target '{target}': choose from {', '.join(IOS_TARGETS)}")
    kind = IOS_TARGETS[target]
    export_dir, manifest = _export_facts(run_dir)
    task = manifest.config.task
    app = app_tasks.app_of(task)
    folder = _app_folder(run_dir, export_dir, IOS_APP_DIR, out, overwrite)
    pte = _executorch_files(export_dir, manifest, app_readme.SWIFT_EXECUTORCH, executorch)
    model = kind.model(export_dir, manifest, task, variant)
    parity = model.parity
    shipped, beside, values = _ios_files_checked(export_dir, manifest, run_dir, model.path.name, pte, app)
    max_length = manifest.config.max_length
    with written_output(folder, f"export {IOS_APP_DIR}", run=run_dir) as tmp:
        _fill_ios_folder(tmp, model.path, model.base_name, export_dir, shipped, tuple(beside))
        described = {TOKENIZER_TABLES: f"the WordPiece tokenizer, tabulated for {SWIFT_TOKENIZER_PACKAGE}'s "
                                       "`BertTokenizer(contentsOf:)`",
                     TOKENIZER_JSON: "the WordPiece tokenizer (the tokenizers library's file; swift-transformers "
                                     "1.3.3 or later reads it)",
                     TOKENIZER_CONFIG: kind.tokenizer_settings,
                     MODEL_CONFIG: "model config; swift-transformers reads its model type",
                     LABELS: "label names in the order of the logits",
                     TOKENIZER_GOLDEN: "texts and the token ids they must give: run them through the app's "
                                       "tokenizer in a unit test",
                     **{name: f"ExecuTorch program, int8 Linear layers (the alternative to {kind.runtime} below)"
                        for name in pte}}
        files = {model.base_name: kind.model_row(model),
                 f"{SWIFT_TOKENIZER_PACKAGE}/": "Swift package, no dependencies: `BertTokenizer` (tokenize, encode, "
                                              "code-point offsets) and `substring(_:codePoints:)`",
                 **{f"{IOS_RESOURCES}/{name}": what for name, what in described.items()}, **beside}
        proven = [f"`{model.path.name}` gave the student's answers on {parity.n_examples} eval examples, "
                  f"{kind.how_run(parity)} (agreement {parity.agreement:.4f}, max |diff| "
                  f"{parity.max_abs_diff:.3g})",
                  "tokenizer.json gives the ids in tokenizer_golden.json (tokenizers library)"]
        if parity.by_length:
            proven.append(f"{kind.by_length(model)} (" + ", ".join(
                f"{kind.length_name(model, n)}: max |diff| {r['max_abs_diff']:.3g} on {r['inputs']} inputs"
                for n, r in parity.by_length.items()) + ")")
        needs_device = [kind.not_run(), f"{SWIFT_TOKENIZER_PACKAGE} on the device: run tokenizer_golden.json's texts "
                        "through `BertTokenizer.encode(_:maxLength:)` in a unit test (pocketbert's own tests build "
                        "the same Swift on Linux and check it against tokenizer.json on every code point)",
                        *app.ios_needs_device()]
        alternative = [line for name in pte for line in app_readme.executorch_section(
            app_readme.SWIFT_EXECUTORCH, kind.runtime, task, name, max_length,
            json.loads((export_dir / LABELS).read_text()), values, app.executorch_note("swift"))]
        facts = app_readme.FolderFacts(task, files, max_length, parity.metrics, parity.n_examples, proven,
                                       needs_device, alternative, values)
        (tmp / APP_README).write_text(kind.readme(model, facts, resources=IOS_RESOURCES, extra_steps=app.ios_steps(),
                                                  placement=_placement(manifest, model.path.name)))
    return folder


def _placement(manifest: ExportRecord, shipped: str) -> list[str]:
    """The README's table of where each Apple program is predicted to run (exports made before the placement
    check have none)."""
    placed = manifest.metrics.placement
    return readme_table(placed, shipped) if placed else []


def _extension_ops(required_operators: Path) -> list[str]:
    """The onnxruntime-extensions ops an ONNX Runtime operator list names (domain;opset;op,op,...)."""
    return [op for line in required_operators.read_text().splitlines() if line.startswith(CONTRIB + ";")
            for op in line.split(";", 2)[2].split(",")]


def android_bundle(run_dir: Path, out: Path | None = None, overwrite: bool = False, executorch: bool = False,
                   text_in: bool = False) -> Path:
    """The task's int8 ONNX Runtime Mobile model with token ids in (model.ort), BertTokenizer.kt and the tables it
    reads, its operator list, the files app_tasks names and a README whose Kotlin picks the execution provider ONNX
    Runtime's verdict supports and names the onnxruntime it was proven on; with text_in, the text-in model instead
    (sentiment: model.text.ort; QA: model.qa.ort, the answer in one call), which needs onnxruntime-extensions; with
    executorch, the int8 ExecuTorch program and tokenizer.json too, and Kotlin for them."""
    export_dir, manifest = _export_facts(run_dir)
    task = manifest.config.task
    app = app_tasks.app_of(task)
    target = _app_folder(run_dir, export_dir, ANDROID_APP_DIR, out, overwrite)
    pte = _executorch_files(export_dir, manifest, app_readme.KOTLIN_EXECUTORCH, executorch)
    parity = manifest.metrics.parity
    model = app.text_in_model if text_in else ORT_MODEL
    if model not in parity:
        what = app.text_in_model_is if text_in else "int8 model for ONNX Runtime Mobile"
        raise ExportError(f"the export has no {model} ({what}): re-run `pocketbert export` with this version")
    files = app.android_files(pte, text_in)
    exported = [name for name in files if name != app_tasks.KOTLIN_TOKENIZER.name]
    if not text_in and not (export_dir / TOKENIZER_TABLES).is_file():
        raise ExportError(f"the export has no {TOKENIZER_TABLES} (what the app's tokenizer reads): re-run `pocketbert "
                          "export` with this version, or add --text-in")
    usability = manifest.metrics.ort_mobile_usability or {}
    # The text-in models are the tokenizer (QA: and the windows and the search) around the dynamic int8 graph, and
    # model.ort is that graph: the verdict is that graph's.
    if ONNX_INT8 not in usability:
        raise ExportError(f"the export records no ONNX Runtime Mobile verdict for {ONNX_INT8}: re-run `pocketbert "
                          "export` with this version")
    provider = mobile_usability.preferred_provider(usability[ONNX_INT8])
    verdicts = [f"- `{graph}`, {name}: {usability[graph][name]['advice']}"
                for graph in (ONNX_INT8, ONNX_QDQ) if graph in usability
                for name in mobile_usability.ANDROID_PROVIDERS if name in usability[graph]]
    shipped = parity[model]
    artifacts.verified(export_dir, manifest, exported, run_dir)  # before any of them is read or copied
    labels = json.loads((export_dir / LABELS).read_text()) if LABELS in files else []
    values = app.code_values(export_dir, manifest)
    contrib_ops = _extension_ops(export_dir / app.text_in_operators) if text_in else []
    max_length = manifest.config.max_length
    ort_version = manifest.versions.get("onnxruntime")
    with written_output(target, f"export {ANDROID_APP_DIR}", run=run_dir) as tmp:
        for name in exported:
            shutil.copyfile(export_dir / name, tmp / name)
        if not text_in:
            shutil.copyfile(app_tasks.KOTLIN_TOKENIZER, tmp / app_tasks.KOTLIN_TOKENIZER.name)
        facts = app_readme.FolderFacts(
            task, files, max_length, shipped.metrics, shipped.n_examples,
            app.android_proven(shipped, text_in, ort_version),
            app.android_needs_device(contrib_ops, shipped, pte, text_in),
            [line for name in pte for line in app_readme.executorch_section(
                app_readme.KOTLIN_EXECUTORCH, "ONNX Runtime", task, name, max_length, labels, values,
                app.executorch_note("kotlin"))], values)
        (tmp / APP_README).write_text(app_readme.android_readme(
            facts, labels, model, provider, verdicts, app.android_input_step(max_length, values, text_in), text_in,
            ort_version, TOKENIZER_TABLES))
    return target
