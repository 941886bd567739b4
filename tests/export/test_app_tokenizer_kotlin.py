"""pocketbert's Kotlin tokenizer (export/app/kotlin/tokenizer) against tokenizer.json: every code point in each
context of the exhaustive app-tokenizer check, for the full all-MiniLM vocabulary and a fitted one; offsets of
accented, CJK and astral text and of added tokens typed in it; added tokens that overlap split as tokenizers splits
them; truncation that keeps the closing [SEP]; tables of another format refused."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers import OVERLAPPING_PLAIN_TOKENS, OVERLAPPING_SPECIAL_TOKENS, UNICODE_SCALAR_VALUES, write_app_tokenizer
from helpers import PAIR_CUTS, PAIR_TEXTS, write_overlapping_added_tokens
from kotlin_build import TOKENIZE_MAIN, app_kotlin_jar, needs_kotlinc

from pocketbert.export.app import app_tokenizer_check

# kotlinc takes 10-60 s; the exhaustive check sends ~4.5M probes
pytestmark = [pytest.mark.slow, needs_kotlinc]

TRUNCATED_LENGTH = 8
CLI_TIMEOUT_S = 120
TEXTS = ["Café naïve résumé à Zürich, déjà vu.", "東京と大阪、京都 and 北京!", "ok 😀👍🏽 fine", "e\u0301 n\u0303 Å Ω ﬁ ½",
         "tab\there\u00a0nbsp\u200bzero-width", "line\nbreak\r\nand NUL\u0000 in", "ＦＵＬＬＷＩＤＴＨ １２３",
         "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𐐀 Deseret", "a" * 120 + " longword", "Ἀθῆναι Ελλάδα Москва",
         "who [MASK] it?[SEP]a[CLS]b [sep] 😀[PAD]é [[UNK]]"]
OVERLAP_SAMPLE = 500


@pytest.fixture(scope="module")
def jar(tmp_path_factory) -> Path:
    return app_kotlin_jar(tmp_path_factory.mktemp("kotlin"))


@pytest.fixture(scope="module", params=["full", "fitted"])
def app_tokenizer(request, tmp_path_factory, wordpiece_tokenizer) -> dict[str, Path]:
    """tokenizer.json, tokenizer.tables and the golden file, written as the Python reference's tests write them: the
    check's answers from tokenizer.json are computed once a session for both."""
    return write_app_tokenizer(tmp_path_factory.mktemp(request.param), wordpiece_tokenizer,
                               request.param == "fitted")


def tokenize(jar: Path, tables: Path, texts: list[str], *options: str) -> list:
    """The Kotlin CLI's answer for each text, its input sent as JSON lines."""
    done = subprocess.run(["java", "-cp", str(jar), TOKENIZE_MAIN, "--tables", str(tables), "--json-lines", *options],
                          input="".join(json.dumps(t) + "\n" for t in texts), capture_output=True, text=True,
                          encoding="utf-8", timeout=CLI_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def reference(tokenizer_json: Path):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_json))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def test_every_code_point_in_every_context_is_cut_as_tokenizer_json_cuts_it(jar, app_tokenizer):
    from pocketbert.export.checks.tokenizer_probes import CONTEXTS

    result = app_tokenizer_check.check(["java", "-cp", str(jar), TOKENIZE_MAIN], app_tokenizer["json"],
                                       app_tokenizer["tables"], app_tokenizer["golden"])
    assert result["mismatch_count"] == 0, result["first_mismatches"]
    assert result["probes"] >= len(CONTEXTS) * UNICODE_SCALAR_VALUES
    assert result["random_texts"] > 0 and result["golden_texts"] > 0 and result["added_token_texts"] > 0


def test_overlapping_added_tokens_split_leftmost_then_longest(jar, tmp_path, wordpiece_tokenizer):
    from pocketbert.export.app import app_tokenizer_check

    paths = write_overlapping_added_tokens(tmp_path, wordpiece_tokenizer)
    result = app_tokenizer_check.check(["java", "-cp", str(jar), TOKENIZE_MAIN], paths["json"], paths["tables"],
                                       contexts=(), random_texts=OVERLAP_SAMPLE)
    assert result["added_token_texts"] >= len(OVERLAPPING_SPECIAL_TOKENS + OVERLAPPING_PLAIN_TOKENS) ** 2
    assert result["mismatch_count"] == 0, result["first_mismatches"]


def test_tables_of_another_format_are_refused(jar, app_tokenizer, tmp_path):
    lines = app_tokenizer["tables"].read_text(encoding="utf-8").split("\n")
    (tmp_path / "old.tables").write_text("\n".join(["pocketbert-tokenizer-tables 1", *lines[1:]]), encoding="utf-8")
    done = subprocess.run(["java", "-cp", str(jar), TOKENIZE_MAIN, "--tables", str(tmp_path / "old.tables")],
                          input="text\n", capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
    assert done.returncode != 0 and "tokenizer.tables is format 1, this tokenizer reads 3" in done.stderr


def test_offsets_of_accented_cjk_and_astral_text_are_the_tokenizers_code_point_offsets(jar, app_tokenizer):
    expected = reference(app_tokenizer["json"]).encode_batch(TEXTS, add_special_tokens=False)
    for text, got, want in zip(TEXTS, tokenize(jar, app_tokenizer["tables"], TEXTS, "--offsets"), expected,
                               strict=True):
        assert got["ids"] == want.ids, text
        assert [tuple(o) for o in got["offsets"]] == want.offsets, text
        # code-point offsets cut the words out of the Python string, astral characters included
        assert all(text[s:e] for s, e in got["offsets"])


def test_truncation_keeps_the_closing_sep(jar, app_tokenizer):
    tokenizer = reference(app_tokenizer["json"])
    long_texts = [t for t in TEXTS if len(tokenizer.encode(t).ids) > TRUNCATED_LENGTH]
    assert long_texts
    tokenizer.enable_truncation(TRUNCATED_LENGTH)
    sep = tokenizer.token_to_id("[SEP]")
    truncated = tokenize(jar, app_tokenizer["tables"], long_texts, "--max-length", str(TRUNCATED_LENGTH))
    for text, ids in zip(long_texts, truncated, strict=True):
        assert ids == tokenizer.encode(text).ids and ids[-1] == sep and len(ids) == TRUNCATED_LENGTH
    whole = tokenize(jar, app_tokenizer["tables"], long_texts)  # no --max-length: nothing is cut
    assert all(len(ids) > TRUNCATED_LENGTH and ids[-1] == sep for ids in whole)


def test_kotlin_pairs_are_the_references_whole_and_cut(jar, app_tokenizer):
    """encodePair through the program's --pairs: the Python reference's encode_pair, the first text cut too, so the
    ids never outgrow maxLength."""
    for cut in PAIR_CUTS:
        assert app_tokenizer_check.pair_mismatches(["java", "-cp", str(jar), TOKENIZE_MAIN], app_tokenizer["tables"],
                                                   PAIR_TEXTS, cut) == []
