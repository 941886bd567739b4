"""The Swift QA check (tests/swift/QaAnswerCheck) with the generated QaAnswer.swift in its sources, built by the Swift
toolchain once per test session and source set: its package and the PocketBertTokenizer package it depends on are
copied, in their places relative to each other, into the cache folder (POCKETBERT_CACHE, one per test session) under
a hash of their sources and the routine, as export/app/app_programs.py builds the tokenizer's program."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from pocketbert.export.app import app_programs

REPO = Path(__file__).resolve().parents[1]
QA_ANSWER_CHECK = REPO / "tests" / "swift" / "QaAnswerCheck"
QA_ANSWER_CHECK_NAME = "QaAnswerCheck"  # its executable target, where the routine goes

needs_swift = pytest.mark.skipif(app_programs.swift_executable() is None,
                                 reason="no Swift toolchain: put Swift 6 on PATH (/opt/swift/usr/bin)")


def _package_files(package: Path) -> list[Path]:
    return sorted(path for path in package.rglob("*.swift") if ".build" not in path.relative_to(package).parts)


def qa_answer_check() -> Path:
    """The built QaAnswerCheck executable (run it with the plain golden file and tokenizer.tables); a compile error
    fails the test with the compiler's line."""
    from pocketbert.core.run.cache_dir import cache_root
    from pocketbert.core.errors import ExportError
    from pocketbert.export.app import qa_postprocess
    from pocketbert.export.app.swift_package import SWIFT_PACKAGE, package_files

    swift = app_programs.swift_executable()
    routine = qa_postprocess.render("swift")
    sources = [*package_files(), *_package_files(QA_ANSWER_CHECK)]
    key = hashlib.sha256((app_programs._digest(sources, REPO) + routine).encode()).hexdigest()[:16]
    folder = cache_root() / app_programs.CACHE_FOLDER / f"swift-qa-answer-check-{key}"
    check = folder / QA_ANSWER_CHECK.relative_to(REPO)

    def build(into: Path) -> None:
        for package in (SWIFT_PACKAGE, QA_ANSWER_CHECK):  # the check's Package.swift names the tokenizer's place
            for path in (package_files() if package == SWIFT_PACKAGE else _package_files(package)):
                target = into / path.relative_to(REPO)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
        (check / "Sources" / QA_ANSWER_CHECK_NAME / "QaAnswer.swift").write_text(routine, encoding="utf-8")
        app_programs._run_build([swift, "build", "-c", "release", "--package-path", str(check)], None,
                                "the Swift QA check")

    try:
        return app_programs._built(folder, build) / check.relative_to(folder) / ".build" / "release" / \
            QA_ANSWER_CHECK_NAME
    except ExportError as exc:
        pytest.fail(str(exc))
