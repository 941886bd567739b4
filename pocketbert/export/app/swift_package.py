"""Where the Swift PocketBertTokenizer package (shipped in the iOS folder) lies among the package data."""

from __future__ import annotations

from pathlib import Path

from pocketbert.core.run.run_files import SWIFT_TOKENIZER_PACKAGE

SWIFT_PACKAGE = Path(__file__).parent / "swift" / SWIFT_TOKENIZER_PACKAGE
SOURCE_SUFFIXES = (".swift",)


def package_files() -> list[Path]:
    """The package's files (Package.swift, sources, tests) in a stable order; build folders aside."""
    return sorted(path for path in SWIFT_PACKAGE.rglob("*") if path.is_file() and path.suffix in SOURCE_SUFFIXES
                  and ".build" not in path.parts)
