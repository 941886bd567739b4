"""Kotlin sources compiled by Debian's kotlinc into one jar with the Kotlin runtime, once per test session and source
set (export/app/app_programs.py: the jar is kept under the cache folder, POCKETBERT_CACHE, one per test session,
keyed by the sources' hash; kotlinc takes tens of seconds a compile)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


KOTLINC_MISSING = "kotlinc not installed: apt-get install kotlin (Debian; .ci/run does, as root)"
needs_kotlinc = pytest.mark.skipif(shutil.which("kotlinc") is None, reason=KOTLINC_MISSING)

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
    """`sources` compiled into `name`.jar with the Kotlin runtime, as the export compiles its tokenizer (run it
    with `java -cp JAR MAIN_CLASS`); a compile error fails the test with the compiler's line."""
    from pocketbert.core.errors import ExportError
    from pocketbert.export.app import app_programs

    try:
        return app_programs.kotlin_jar(sources, name)
    except ExportError as exc:
        pytest.fail(str(exc))
