"""Every iOS and Android app folder's code type-checks: `swift build` and `kotlinc` against compile stubs of the
frameworks it calls (tests/app_stubs, each declaration citing its documentation), on Linux. A stub is the API's
shape, not its behaviour: this proves the code is well-formed Swift/Kotlin calling the documented signatures, not
that it runs.

Sentiment folders are the CLI's own (`export ios` / `export android` on the session's exported tiny run); QA code is
rendered by the same functions from the QA values the template tests use (the session has no QA export). Builds are
cached by a hash of everything compiled, under pytest's cache folder: a second run with the same code is instant.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_app_templates import QA_VALUES

from pocketbert.core.tasks.registry import TASK_CLASSES
from pocketbert.export.app import app_programs, app_readme, qa_postprocess

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
STUBS = ROOT / "tests" / "app_stubs"
SWIFT_STUB_MODULES = ("CoreML", "CoreAI", "ExecuTorch", "Tokenizers")
# pocketbert's own Swift tokenizer package (package data): app code that imports it builds against the real thing
SWIFT_TOKENIZER = ROOT / "pocketbert" / "export" / "app" / "swift" / "PocketBertTokenizer"
SWIFT = shutil.which("swift") or ("/opt/swift/usr/bin/swift" if Path("/opt/swift/usr/bin/swift").is_file() else None)
KOTLINC = shutil.which("kotlinc")
# AutoCloseable.use: part of every Kotlin an Android app builds with today, a separate jar in Debian's Kotlin 1.3
KOTLIN_JDK7 = [p for p in (Path("/usr/share/java/kotlin-stdlib-jdk7.jar"),
                           Path(KOTLINC or ".").resolve().parent.parent / "lib" / "kotlin-stdlib-jdk7.jar")
               if p.is_file()][:1]
COMPILE_TIMEOUT_S = 900
OUTPUT_KEPT = 20_000  # characters of a build's output kept in its record: the compiler's errors come last
CODE_BLOCK = re.compile(r"```(swift|kotlin)\n(.*?)\n```", re.S)
IMPORT = re.compile(r"^import (\w+)", re.M)
PACKAGE = re.compile(r"^package [\w.]+", re.M)
COMPILER_ERROR = re.compile(r"^\S+:\d+:\d+: error: (.*)$", re.M)  # swift and kotlinc alike: path:line:column

needs_swift = pytest.mark.skipif(SWIFT is None, reason="swift not found: put Swift 6 on PATH (/opt/swift/usr/bin)")
needs_kotlinc = pytest.mark.skipif(KOTLINC is None, reason="kotlinc not installed: apt-get install kotlin (Debian)")


def folder_code(folder: Path, language: str) -> dict[str, str]:
    """The app code a folder holds in `language`: each code block of its README as a file, and the source files
    beside it (QaAnswer.swift, QaAnswer.kt)."""
    suffix = {"swift": ".swift", "kotlin": ".kt"}[language]
    code = {f"Readme{i}{suffix}": text for i, (lang, text) in
            enumerate(CODE_BLOCK.findall((folder / "README.md").read_text(encoding="utf-8"))) if lang == language}
    code.update({p.name: p.read_text(encoding="utf-8") for p in sorted(folder.iterdir()) if p.suffix == suffix})
    return code


def readme_code(lines: list[str] | str, language: str) -> str:
    return "\n".join(text for lang, text in CODE_BLOCK.findall("\n".join(lines) if isinstance(lines, list) else lines)
                     if lang == language)


def xcode_model_class(task: str, classifier: bool = False) -> str:
    """The class Xcode generates from a .mlpackage (the task's class stem, inputs and outputs), as a stub: the
    shape Apple's "Integrating a Core ML Model into Your App" describes
    (https://developer.apple.com/documentation/coreml/integrating-a-core-ml-model-into-your-app)."""
    spec = TASK_CLASSES[task]
    name = spec.coreml_class_stem
    outputs = ["    let label: String = \"\"", "    let label_probs: [String: Double] = [:]"] if classifier else [
        f"    var {o}: MLMultiArray {{ fatalError(\"stub\") }}" for o in spec.output_names]
    params = ", ".join(f"{i}: MLMultiArray" for i in spec.input_names)
    return "\n".join([
        "// STUB: the class Xcode generates from the .mlpackage; never shipped. Its shape, as Apple documents it:",
        "// https://developer.apple.com/documentation/coreml/integrating-a-core-ml-model-into-your-app",
        "import CoreML", "",
        f"final class {name}Output {{", *outputs, "}", "",
        f"final class {name} {{",
        "    let model: MLModel",
        "    init(configuration: MLModelConfiguration) throws { fatalError(\"stub\") }",
        f"    func prediction({params}) throws -> {name}Output {{ fatalError(\"stub\") }}",
        "}", ""])


def _hash(*parts) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(repr(part).encode() if not isinstance(part, (bytes, str)) else str(part).encode())
    return digest.hexdigest()[:20]


def _stub_texts(language: str) -> dict[str, str]:
    folder = STUBS / language
    return {p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def _tokenizer_package_texts() -> dict[str, str]:
    """The Swift tokenizer package's files, part of what a build that depends on it compiles (none yet: empty)."""
    return {p.relative_to(SWIFT_TOKENIZER).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(SWIFT_TOKENIZER.rglob("*.swift"))} if SWIFT_TOKENIZER.is_dir() else {}


def _cache_folder(request, name: str, tmp_path_factory) -> Path:
    """Under pytest's cache (kept between runs) when it is on; else the session's temporary folder."""
    cache = getattr(request.config, "cache", None)
    return Path(cache.mkdir(name)) if cache is not None else tmp_path_factory.mktemp(name)


def swift_package(root: Path, targets: dict[str, dict[str, str]]) -> None:
    """A package of the stub modules and one target per app code variant, each depending on the stubs and the
    package's targets its files import: a target with main.swift is an executable, one named *Tests a test
    target; its .json files and Models/ folder are resources, as the bench kit's Package.swift declares them."""
    sources = root / "Sources"
    for module in SWIFT_STUB_MODULES:
        (sources / module).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(STUBS / "swift" / f"{module}.swift", sources / module / f"{module}.swift")
    declared = [f'.target(name: "{m}", path: "Sources/{m}")' for m in SWIFT_STUB_MODULES]
    for target, files in targets.items():
        folder = sources / target
        shutil.rmtree(folder, ignore_errors=True)
        for name, text in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text, encoding="utf-8")
        imported = {m for text in files.values() for m in IMPORT.findall(text)}
        deps = ", ".join([f'"{m}"' for m in sorted(imported & {*SWIFT_STUB_MODULES, *targets})]
                         + [f'.product(name: "{m}", package: "{m}")' for m in sorted(imported) if m == SWIFT_TOKENIZER.name])
        resources = sorted({name.split("/")[0] for name in files if name.endswith(".json") or "/" in name})
        kind = "executableTarget" if "main.swift" in files else "testTarget" if target.endswith("Tests") else "target"
        declared.append(f'.{kind}(name: "{target}", dependencies: [{deps}], path: "Sources/{target}"'
                        + (f", resources: [{', '.join(f'.copy({chr(34)}{r}{chr(34)})' for r in resources)}]"
                           if resources else "") + ")")
    uses_tokenizer = any(SWIFT_TOKENIZER.name in IMPORT.findall(text) for files in targets.values()
                         for text in files.values())
    dependencies = f'.package(path: "{SWIFT_TOKENIZER}")' if uses_tokenizer else ""
    (root / "Package.swift").write_text(
        "// swift-tools-version:5.9\nimport PackageDescription\n\n"
        f"let package = Package(name: \"AppCodeCheck\", dependencies: [{dependencies}], targets: [\n    "
        + ",\n    ".join(declared) + "\n])\n")


def swift_build(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([SWIFT, "build", "--build-tests", "--package-path", str(root), "-j", "2"],
                          capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)


def kotlin_compile(root: Path, variants: dict[str, dict[str, str]]) -> subprocess.CompletedProcess:
    """One kotlinc call for every variant: each variant's files go into a package of their own (the classes of two
    variants share names), prepended before their imports; a file that declares its package (the stubs,
    BertTokenizer.kt) is compiled once, as it is."""
    sources = root / "src"
    shutil.rmtree(sources, ignore_errors=True)
    for name, text in _stub_texts("kotlin").items():
        (sources / "stubs" / name).parent.mkdir(parents=True, exist_ok=True)
        (sources / "stubs" / name).write_text(text)
    for variant, files in variants.items():
        for name, text in files.items():
            packaged = PACKAGE.search(text) is not None
            path = sources / ("packaged" if packaged else variant) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text if packaged else f"package app.{variant}\n\n{text}\n", encoding="utf-8")
    out = root / "classes"
    shutil.rmtree(out, ignore_errors=True)
    classpath = ["-cp", str(KOTLIN_JDK7[0])] if KOTLIN_JDK7 else []
    return subprocess.run([KOTLINC, "-nowarn", *classpath, str(sources), "-d", str(out)], capture_output=True,
                          text=True, timeout=COMPILE_TIMEOUT_S, env=app_programs.kotlinc_environment())


def compiled(cache: Path, key: str, build) -> tuple[int, str]:
    """The exit status and output of build(), run once per key: an earlier build of these exact sources (with the
    same stubs and compiler) answers from its record."""
    record = cache / f"build-{key}.json"
    if record.is_file():
        return tuple(json.loads(record.read_text()))
    result = build()
    answer = (result.returncode, (result.stdout + result.stderr)[-OUTPUT_KEPT:])
    record.write_text(json.dumps(answer))
    return answer


# --- what is compiled -------------------------------------------------------------------------------------------

# `export ios` options on the tiny run: the default (one function per length), the other shapes it made, ExecuTorch
# beside Core ML and beside Core AI, Core AI.
IOS_CLI_VARIANTS = {"IosDefault": [], "IosEnumerated": ["--variant", "enumerated"], "IosFlexible": ["--variant", "6bit"],
                    "IosExecuTorch": ["--executorch"], "IosCoreAI": ["--target", "ios27"],
                    "IosCoreAIExecuTorch": ["--target", "ios27", "--executorch"]}
ANDROID_CLI_VARIANTS = {"android_default": [], "android_executorch": ["--executorch"], "android_text_in": ["--text-in"]}


def _cli_folders(run: Path, out: Path, platform: str, variants: dict[str, list[str]]) -> dict[str, Path]:
    from pocketbert.cli import main

    for name, options in variants.items():
        try:
            main(["export", platform, *options, "--run", str(run), "--out", str(out / name)])
        except SystemExit as exc:
            assert exc.code in (0, None), (name, exc.code)
    return {name: out / name for name in variants}


@pytest.fixture(scope="module")
def ios_folders(exported_run, tmp_path_factory):
    """The folders `export ios` writes from the session's tiny sentiment export, and its `bench kit` package."""
    from pocketbert.mobile_bench.device.kit import write_kit

    out = tmp_path_factory.mktemp("ios-folders")
    return {**_cli_folders(exported_run, out, "ios", IOS_CLI_VARIANTS), "kit": write_kit(exported_run, out / "kit")}


@pytest.fixture(scope="module")
def android_folders(exported_run, tmp_path_factory):
    """The folders `export android` writes from the session's tiny sentiment export."""
    return _cli_folders(exported_run, tmp_path_factory.mktemp("android-folders"), "android", ANDROID_CLI_VARIANTS)


def kit_targets(kit: Path) -> dict[str, dict[str, str]]:
    """The bench kit's three targets as `pocketbert bench kit` wrote them (Sources/<target>/, Tests/<target>/)."""
    return {target.name: {p.relative_to(target).as_posix(): p.read_text(encoding="utf-8")
                          for p in sorted(target.rglob("*")) if p.is_file()}
            for folder in ("Sources", "Tests") for target in sorted((kit / folder).iterdir())}


def ios_targets(folders: dict[str, Path]) -> dict[str, dict[str, str]]:
    """Every iOS code variant: the sentiment folders' Swift, and the QA Swift of each shape and runtime."""
    targets = {}
    for name in (n for n in IOS_CLI_VARIANTS if n in folders):
        files = folder_code(folders[name], "swift")
        if "CoreAI" not in name:
            files["GeneratedModel.swift"] = xcode_model_class("sentiment")
        targets[f"Sentiment{name}"] = files
    targets["SentimentIosClassifier"] = {
        "Readme.swift": readme_code(app_readme.swift_code("sentiment", "PocketBertSentiment", 64, "classifier", ()),
                                    "swift"),
        "GeneratedModel.swift": xcode_model_class("sentiment", classifier=True)}
    routine = {"QaAnswer.swift": qa_postprocess.render("swift")}
    qa_shapes = {"Functions": ("ane", (32, 96), True), "Enumerated": ("enumerated", (32, 96), False),
                 "Fixed": ("fixed", (), False), "Flexible": ("fp16", (), False)}
    for shape, (variant, lengths, functions) in qa_shapes.items():
        targets[f"QaIos{shape}"] = {
            "Readme.swift": readme_code(app_readme.swift_code("qa", "PocketBertQA", 96, variant, lengths, QA_VALUES,
                                                              functions), "swift"),
            "GeneratedModel.swift": xcode_model_class("qa"), **routine}
    targets["QaIosCoreAI"] = {"Readme.swift": readme_code(app_readme.swift_coreai_code(
        "qa", "PocketBertQA", 96, (32, 96), QA_VALUES), "swift"), **routine}
    if "kit" in folders:
        targets.update(kit_targets(folders["kit"]))
    targets["QaIosExecuTorch"] = {"Readme.swift": readme_code(app_readme.executorch_section(
        app_readme.SWIFT_EXECUTORCH, "Core ML", "qa", "model.int8.pte", 96, [], QA_VALUES), "swift"), **routine}
    return targets


def android_variants(folders: dict[str, Path]) -> dict[str, dict[str, str]]:
    """Every Android code variant: the sentiment folders' Kotlin, and the QA Kotlin of each model and runtime."""
    from pocketbert.export.app import app_tasks

    variants = {f"sentiment_{name}": folder_code(folders[name], "kotlin") for name in ANDROID_CLI_VARIANTS
                if name in folders}
    routine = {"QaAnswer.kt": qa_postprocess.render("kotlin")}
    variants["qa_android_default"] = {
        "Readme.kt": readme_code(app_readme.kotlin_code("qa", [], 96, "model.ort", "XNNPACK", QA_VALUES,
                                                        ort_version="1.31.1", tables="tokenizer.tables"), "kotlin"),
        "BertTokenizer.kt": app_tasks.KOTLIN_TOKENIZER.read_text(encoding="utf-8"), **routine}
    variants["qa_android_text_in"] = {"Readme.kt": readme_code(app_readme.kotlin_code(
        "qa", [], 96, "model.qa.ort", "NNAPI", QA_VALUES, text_in=True), "kotlin")}
    variants["qa_android_executorch"] = {
        "Readme.kt": readme_code(app_readme.executorch_section(app_readme.KOTLIN_EXECUTORCH, "ONNX Runtime", "qa",
                                                               "model.int8.pte", 96, [], QA_VALUES), "kotlin"),
        **routine}
    return variants


def errors(output: str) -> set[str]:
    """The compiler's distinct error messages, without their places (swift prints each twice: once per job)."""
    return set(COMPILER_ERROR.findall(output))


# --- the tests --------------------------------------------------------------------------------------------------

@needs_swift
def test_every_ios_variants_swift_compiles(ios_folders, request, tmp_path_factory):
    targets = ios_targets(ios_folders)
    assert all(targets.values()) and len(targets) == 16  # 6 CLI folders, 7 rendered, the kit's 3 targets
    cache = _cache_folder(request, "app-swift-build", tmp_path_factory)
    status, output = compiled(cache, _hash(SWIFT, targets, _stub_texts("swift"), _tokenizer_package_texts()),
                              lambda: (swift_package(cache / "package", targets), swift_build(cache / "package"))[1])
    assert status == 0, output


@needs_kotlinc
def test_every_android_variants_kotlin_compiles(android_folders, request, tmp_path_factory):
    variants = android_variants(android_folders)
    assert all(variants.values()) and len(variants) == 6  # 3 CLI folders, 3 rendered
    cache = _cache_folder(request, "app-kotlin-build", tmp_path_factory)
    status, output = compiled(cache, _hash(KOTLINC, variants, _stub_texts("kotlin")),
                              lambda: kotlin_compile(cache / "build", variants))
    assert status == 0, output


@needs_swift
@needs_kotlinc
def test_a_misspelled_call_fails_to_compile(request, tmp_path_factory):
    """The checks can fail: one framework call misspelled in each language is the compiler's error, named."""
    swift = readme_code(app_readme.swift_code("sentiment", "PocketBertSentiment", 64, "fp16", ()), "swift")
    broken = {"Broken": {"Readme.swift": swift.replace("MLMultiArray(shape:", "MLMultiArray(shapes:"),
                         "GeneratedModel.swift": xcode_model_class("sentiment")}}
    assert broken["Broken"]["Readme.swift"] != swift
    cache = _cache_folder(request, "app-broken-build", tmp_path_factory)
    status, output = compiled(cache, _hash(SWIFT, broken, _stub_texts("swift")),
                              lambda: (swift_package(cache / "swift", broken), swift_build(cache / "swift"))[1])
    assert status != 0 and "shapes:" in output and len(errors(output)) == 1, output  # that call, nothing else

    kotlin = readme_code(app_readme.kotlin_code("sentiment", ["negative", "positive"], 64, "model.text.ort", "CPU",
                                                text_in=True), "kotlin")
    broken = {"broken": {"Readme.kt": kotlin.replace("OrtEnvironment.getEnvironment()",
                                                     "OrtEnvironment.getEnviroment()")}}
    assert broken["broken"]["Readme.kt"] != kotlin
    status, output = compiled(cache, _hash(KOTLINC, broken, _stub_texts("kotlin")),
                              lambda: kotlin_compile(cache / "kotlin", broken))
    assert status != 0 and "unresolved reference: getEnviroment" in output and len(errors(output)) == 1, output
