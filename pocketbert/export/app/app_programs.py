"""The app tokenizers as programs, built from the sources the app folders ship, where their toolchain is present:
the Swift package's `pocketbert-tokenize` (`swift build`) and the Kotlin `TokenizeMain` (`kotlinc`, one jar with
the Kotlin runtime, run by `java`). Each is built once into pocketbert's cache under a hash of its sources, so a
second export, or a test, reuses it. The export runs the exhaustive app-tokenizer check with each
(app_tokenizer_check.py) and records the result, or why it did not run, in its manifest.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from pocketbert.core.errors import ExportError

SWIFT_CANDIDATES = ("swift", "/opt/swift/usr/bin/swift")  # the Swift toolchain's usual Linux home, off PATH
BUILD_TIMEOUT_S = 900  # a first build on 2 busy cores takes minutes
KOTLIN_SOURCES = Path(__file__).parent / "kotlin" / "tokenizer"
KOTLIN_MAIN = "ai.pocketbert.tokenizer.TokenizeMainKt"  # the class kotlinc makes of TokenizeMain.kt's main
CACHE_FOLDER = "app-programs"
TOOLCHAIN_HOME = "toolchain-home"  # in CACHE_FOLDER: the home the compilers see
# kotlinc is a short-lived JVM: its C2 compiler and the parallel collector's threads cost more CPU than they win
# back (a compile of the tokenizer's sources: 14.3-14.6 -> 6.4-6.5 s of CPU, AMD EPYC, 2 cores, 2026-12-02).
# kotlinc's own default heap comes first; JAVA_OPTS the user set comes last and so wins.
KOTLINC_JAVA_OPTS = ("-Xmx256M", "-Xms32M", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


class ToolchainMissing(Exception):
    """No compiler for that language on this machine: the check is skipped, and the manifest says why."""


def swift_executable() -> str | None:
    for candidate in SWIFT_CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return found
    return None


def _digest(paths: list[Path], root: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _built(folder: Path, build) -> Path:
    """`folder` after build(folder) made it, once: several processes wait for the one that builds."""
    from pocketbert.core.run.cache_dir import building

    with building(folder):
        if not (folder / "built").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            build(folder)
            (folder / "built").write_text("")
    return folder


def toolchain_environment() -> dict[str, str]:
    """The compilers' own state (SwiftPM's caches, configuration and security folders under $HOME and the XDG
    folders; the JVM's user.home, which Java reads from the account, not from $HOME) kept in pocketbert's cache
    (POCKETBERT_CACHE where set), never in the user's home."""
    import os

    from pocketbert.core.run.cache_dir import cache_root

    home = cache_root() / CACHE_FOLDER / TOOLCHAIN_HOME
    home.mkdir(parents=True, exist_ok=True)
    java = " ".join(filter(None, [os.environ.get("JAVA_TOOL_OPTIONS", ""), f"-Duser.home={home}"]))
    return {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_CONFIG_HOME": str(home / ".config"), "JAVA_TOOL_OPTIONS": java}


def kotlinc_environment() -> dict[str, str]:
    """toolchain_environment() with the JVM options kotlinc runs fastest with."""
    environment = toolchain_environment()
    environment["JAVA_OPTS"] = " ".join(filter(None, [*KOTLINC_JAVA_OPTS, environment.get("JAVA_OPTS", "")]))
    return environment


def _run_build(argv: list[str], cwd: Path | None, what: str, environment: dict[str, str] | None = None) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
                          env=environment or toolchain_environment())
    if done.returncode != 0:
        errors = [line for line in (done.stderr + done.stdout).splitlines() if "error" in line.lower()]
        raise ExportError(f"{what} does not build: {(errors or ['exit ' + str(done.returncode)])[0].strip()}")


def swift_package_build() -> Path:
    """The PocketBertTokenizer package, copied into the cache under its sources' hash and built there (release, its
    XCTest cases too: `swift test --skip-build` runs them in that folder)."""
    from pocketbert.core.run.cache_dir import cache_root
    from pocketbert.export.app.swift_package import SWIFT_PACKAGE, package_files

    swift = swift_executable()
    if swift is None:
        raise ToolchainMissing("no Swift toolchain (swift on PATH or in /opt/swift/usr/bin)")
    folder = cache_root() / CACHE_FOLDER / f"swift-{_digest(package_files(), SWIFT_PACKAGE)}"

    def build(into: Path) -> None:
        shutil.copytree(SWIFT_PACKAGE, into)
        _run_build([swift, "build", "-c", "release", "--build-tests"], into, "the Swift tokenizer package")

    return _built(folder, build)


def swift_program() -> list[str]:
    return [str(swift_package_build() / ".build" / "release" / "pocketbert-tokenize")]


def kotlin_jar(sources: list[Path], name: str) -> Path:
    """`sources` compiled into one jar with the Kotlin runtime (run it with `java -cp JAR MAIN_CLASS`)."""
    from pocketbert.core.run.cache_dir import cache_root

    if shutil.which("kotlinc") is None or shutil.which("java") is None:
        raise ToolchainMissing("kotlinc not installed (Debian: apt-get install kotlin)")
    roots = {source.parent for source in sources}
    digest = hashlib.sha256(b"".join(s.name.encode() + b"\0" + s.read_bytes() + b"\0"
                                     for s in sorted(sources, key=lambda p: (p.name, p.read_bytes())))).hexdigest()[:16]
    folder = cache_root() / CACHE_FOLDER / f"kotlin-{name}-{digest}"

    def build(into: Path) -> None:
        into.mkdir(parents=True)
        _run_build(["kotlinc", *map(str, sources), "-include-runtime", "-d", str(into / f"{name}.jar")], None,
                   f"the Kotlin sources in {', '.join(sorted(str(r) for r in roots))}", kotlinc_environment())

    return _built(folder, build) / f"{name}.jar"


def kotlin_program() -> list[str]:
    jar = kotlin_jar(sorted(KOTLIN_SOURCES.glob("*.kt")), "pocketbert-tokenize")
    return ["java", "-cp", str(jar), KOTLIN_MAIN]


PROGRAMS = {"swift": swift_program, "kotlin": kotlin_program}


def app_tokenizer_checks(tokenizer_json: Path, tables: Path, golden: Path, contexts: tuple[str, ...]) -> dict:
    """Each app language's program against tokenizer.json on every code point in each of `contexts`
    (app_tokenizer_check.check), or why it was not run; an ExportError when one differs."""
    return {language: app_tokenizer_check_of(language, tokenizer_json, tables, golden, contexts)
            for language in PROGRAMS}


def app_tokenizer_check_of(language: str, tokenizer_json: Path, tables: Path, golden: Path,
                           contexts: tuple[str, ...]) -> dict:
    """One language's program checked (app_tokenizer_checks): a parallel export runs each in a process of its own."""
    from pocketbert.export.app import app_tokenizer_check

    try:
        command = PROGRAMS[language]()
    except ToolchainMissing as exc:
        return {"not_run": str(exc)}
    result = app_tokenizer_check.cached_check(command, tokenizer_json, tables, golden, language, contexts)
    app_tokenizer_check.require_equal(result, f"the {language.capitalize()} tokenizer")
    return {k: v for k, v in result.items() if k != "first_mismatches"}
