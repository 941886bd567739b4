"""Kotlin sources compiled by Debian's kotlinc into one jar with the Kotlin runtime, once per test session and source
set: kotlinc takes tens of seconds a compile, so the jar is kept under the tests' cache folder (POCKETBERT_CACHE, one
per session, shared by its workers) keyed by the sources' hash."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from pocketbert.core.cache_dir import building, cache_root

KOTLINC_MISSING = "kotlinc not installed: apt-get install kotlin (Debian; .ci/run does, as root)"
needs_kotlinc = pytest.mark.skipif(shutil.which("kotlinc") is None, reason=KOTLINC_MISSING)
COMPILE_TIMEOUT_S = 600  # 2 cores shared with other test workers: a compile alone takes 10-60 s

KOTLIN_TOKENIZER = Path(__file__).resolve().parents[1] / "pocketbert" / "export" / "app" / "kotlin" / "tokenizer"
TOKENIZE_MAIN = "ai.pocketbert.tokenizer.TokenizeMainKt"  # the class kotlinc makes of TokenizeMain.kt's main


QA_ANSWER_CHECK = Path(__file__).resolve().parent / "kotlin" / "QaAnswerCheck.kt"
QA_ANSWER_CHECK_MAIN = "QaAnswerCheckKt"


def tokenizer_sources() -> list[Path]:
    return sorted(KOTLIN_TOKENIZER.glob("*.kt"))


def app_kotlin_jar(folder: Path) -> Path:
    """The Kotlin tokenizer, its command line, the QA routine (rendered into `folder`) and the QA check in one jar:
    every Kotlin test of a session shares its one compile."""
    from pocketbert.export.app import qa_postprocess

    routine = qa_postprocess.write_routines(folder)[1]
    return kotlin_jar([*tokenizer_sources(), routine, QA_ANSWER_CHECK], "pocketbert-kotlin")


def kotlin_jar(sources: list[Path], name: str) -> Path:
    """`sources` compiled into `name`.jar, the Kotlin runtime included (run it with `java -cp JAR MAIN_CLASS`)."""
    digest = hashlib.sha256()
    for source in sorted(sources, key=lambda p: (p.name, p.read_bytes())):
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    folder = cache_root() / "kotlin" / f"{name}-{digest.hexdigest()[:16]}"
    jar = folder / f"{name}.jar"
    with building(folder):
        if not jar.is_file():
            folder.mkdir(parents=True, exist_ok=True)
            partial = folder / f"{name}.partial.jar"
            built = subprocess.run(["kotlinc", *map(str, sources), "-include-runtime", "-d", str(partial)],
                                   capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
            assert built.returncode == 0, built.stderr
            partial.rename(jar)
    return jar
