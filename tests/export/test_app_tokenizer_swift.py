"""The Swift PocketBertTokenizer package: its XCTest cases, and its pocketbert-tokenize program against tokenizer.json
on every code point in four contexts, the golden texts, a random sample and the texts that hold added tokens, for the
full and a fitted vocabulary, and for added tokens that overlap.
Built once a session (release), in the tests' cache folder, keyed by the package sources' hash."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from pocketbert.export.app import app_programs, app_tokenizer_check, tokenizer_reference
from pocketbert.export.app.swift_package import SWIFT_PACKAGE
from tests.helpers import OVERLAPPING_PLAIN_TOKENS, OVERLAPPING_SPECIAL_TOKENS, write_app_tokenizer
from tests.helpers import PAIR_CUTS, PAIR_TEXTS, write_overlapping_added_tokens

pytestmark = pytest.mark.slow  # a build and two exhaustive checks
ACCENTED_E = 0xE9
OVERLAP_SAMPLE = 500
PACKAGE_TESTS = SWIFT_PACKAGE / "Tests" / "PocketBertTokenizerTests" / "BertTokenizerTests.swift"
MIN_PACKAGE_TESTS = 6  # the package's XCTest cases, the damaged tables' one among them


@pytest.fixture(scope="session")
def swift_package(private_cache) -> Path:
    """The package built as the export builds it (release, with its tests, in the cache under its sources' hash):
    one build a session, shared by the test processes and the session's exports."""
    try:
        return app_programs.swift_package_build()
    except app_programs.ToolchainMissing as exc:
        pytest.skip(f"{exc}: the Swift tokenizer is not built")


def cli(package: Path) -> list[str]:
    return [str(package / ".build" / "release" / "pocketbert-tokenize")]


def test_swift_package_tests_pass(swift_package):
    done = subprocess.run([app_programs.swift_executable(), "test", "-c", "release", "--skip-build"], cwd=swift_package,
                          capture_output=True, text=True, timeout=app_programs.BUILD_TIMEOUT_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    written = len(re.findall(r"^    func test\w+\(", PACKAGE_TESTS.read_text(encoding="utf-8"), flags=re.M))
    assert written >= MIN_PACKAGE_TESTS
    assert f"Executed {written} tests, with 0 failures" in done.stdout + done.stderr  # every one the file holds ran


@pytest.mark.parametrize("vocabulary", ["full", "fitted"])
def test_swift_tokenizer_equals_tokenizers_on_every_code_point(swift_package, vocabulary, tmp_path,
                                                               wordpiece_tokenizer):
    paths = write_app_tokenizer(tmp_path, wordpiece_tokenizer, vocabulary == "fitted")
    result = app_tokenizer_check.check(cli(swift_package), paths["json"], paths["tables"], paths["golden"])
    assert result["probes"] > 4_000_000 and result["golden_texts"] >= 10 and result["added_token_texts"] > 0
    assert result["mismatch_count"] == 0, result["first_mismatches"]


def test_swift_pairs_are_the_references_whole_and_cut(swift_package, tmp_path, wordpiece_tokenizer):
    """encodePair through the program's --pairs: the Python reference's encode_pair, the first text cut too."""
    paths = write_app_tokenizer(tmp_path, wordpiece_tokenizer, fitted=False)
    for cut in PAIR_CUTS:
        assert app_tokenizer_check.pair_mismatches(cli(swift_package), paths["tables"], PAIR_TEXTS, cut) == []


@pytest.mark.slow
def test_swift_tokenizer_takes_the_leftmost_then_longest_of_overlapping_added_tokens(swift_package, tmp_path,
                                                                                    wordpiece_tokenizer):
    paths = write_overlapping_added_tokens(tmp_path, wordpiece_tokenizer)
    result = app_tokenizer_check.check(cli(swift_package), paths["json"], paths["tables"], contexts=(),
                                       random_texts=OVERLAP_SAMPLE)
    assert result["added_token_texts"] >= len(OVERLAPPING_SPECIAL_TOKENS + OVERLAPPING_PLAIN_TOKENS) ** 2
    assert result["mismatch_count"] == 0, result["first_mismatches"]


def test_swift_check_names_the_code_point_a_wrong_table_misreads(swift_package, tmp_path, wordpiece_tokenizer):
    paths = write_app_tokenizer(tmp_path, wordpiece_tokenizer, fitted=False)
    tables = tokenizer_reference.load(paths["tables"])
    page = tables.map_index[0]
    lines = paths["tables"].read_text(encoding="utf-8").split("\n")
    row = lines.index("map_pages " + str(len(tables.map_pages))) + 1 + page
    entries = lines[row].split(" ")
    assert entries[ACCENTED_E] != "0"  # é becomes e: the wrong table keeps it
    entries[ACCENTED_E] = "0"
    lines[row] = " ".join(entries)
    paths["tables"].write_text("\n".join(lines), encoding="utf-8")
    result = app_tokenizer_check.check(cli(swift_package), paths["json"], paths["tables"], contexts=("alone",),
                                       random_texts=0)
    assert result["mismatch_count"] == 1
    assert result["first_mismatches"][0]["code_points"] == [f"U+{ACCENTED_E:04X}"]
