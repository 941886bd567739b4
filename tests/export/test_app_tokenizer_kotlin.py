"""pocketbert's Kotlin tokenizer (export/app/kotlin/tokenizer) against tokenizer.json: every code point in each
context of the exhaustive app-tokenizer check, for the full all-MiniLM vocabulary and a fitted one; offsets of
accented, CJK and astral text; and truncation that keeps the closing [SEP]."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers import UNICODE_SCALAR_VALUES
from kotlin_build import TOKENIZE_MAIN, app_kotlin_jar, needs_kotlinc

pytestmark = [pytest.mark.slow, needs_kotlinc]  # kotlinc takes 30-60 s; the exhaustive check runs ~4.5M probes

# The fitted tokenizer has the full one's normalizer and pre-tokenizer (the same code-point tables): only WordPiece's
# matches change, which a code point alone and inside a word reach. Two contexts keep make test's budget (all four
# took 97 s on 2 cores and also gave 0 mismatches).
FITTED_CONTEXTS = ("alone", "inside a word")
FITTED_STEP = 5  # the fitted vocabulary keeps every fifth piece beside the single characters and special tokens
TRUNCATED_LENGTH = 8
CLI_TIMEOUT_S = 120
TEXTS = ["Café naïve résumé à Zürich, déjà vu.", "東京と大阪、京都 and 北京!", "ok 😀👍🏽 fine", "e\u0301 n\u0303 Å Ω ﬁ ½",
         "tab\there\u00a0nbsp\u200bzero-width", "line\nbreak\r\nand NUL\u0000 in", "ＦＵＬＬＷＩＤＴＨ １２３",
         "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𐐀 Deseret", "a" * 120 + " longword", "Ἀθῆναι Ελλάδα Москва"]


@pytest.fixture(scope="module")
def jar(tmp_path_factory) -> Path:
    return app_kotlin_jar(tmp_path_factory.mktemp("kotlin"))


def tables_for(tokenizer, folder: Path, max_length: int = 128) -> tuple[Path, Path]:
    """tokenizer.json and the tokenizer.tables the export writes from it."""
    from pocketbert.export.app import tokenizer_tables

    tokenizer.save_pretrained(folder)
    tokenizer_json = folder / "tokenizer.json"
    return tokenizer_json, tokenizer_tables.write_tables(tokenizer_json, folder / "tokenizer.tables", max_length)


@pytest.fixture(scope="module")
def full(wordpiece_tokenizer, tmp_path_factory) -> tuple[Path, Path]:
    return tables_for(wordpiece_tokenizer, tmp_path_factory.mktemp("full-vocabulary"))


@pytest.fixture(scope="module")
def fitted(wordpiece_tokenizer, tmp_path_factory) -> tuple[Path, Path]:
    from pocketbert.export.vocabulary.choice import forced_ids
    from pocketbert.export.vocabulary.tokenizer import fitted_tokenizer, wordpiece_vocabulary

    vocab, prefix = wordpiece_vocabulary(wordpiece_tokenizer)
    forced = forced_ids(vocab, wordpiece_tokenizer.all_special_ids, prefix)
    kept = sorted(forced | set(range(0, len(vocab), FITTED_STEP)))
    return tables_for(fitted_tokenizer(wordpiece_tokenizer, kept), tmp_path_factory.mktemp("fitted-vocabulary"))


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


@pytest.mark.parametrize("vocabulary", ["full", "fitted"])
def test_every_code_point_in_every_context_is_cut_as_tokenizer_json_cuts_it(vocabulary, jar, request):
    from pocketbert.export.app import app_tokenizer_check
    from pocketbert.export.tokenizer_probes import CONTEXTS

    tokenizer_json, tables = request.getfixturevalue(vocabulary)
    contexts = tuple(CONTEXTS) if vocabulary == "full" else FITTED_CONTEXTS
    result = app_tokenizer_check.check(["java", "-cp", str(jar), TOKENIZE_MAIN], tokenizer_json, tables,
                                       contexts=contexts)
    assert result["mismatch_count"] == 0, result["first_mismatches"]
    assert result["probes"] >= len(contexts) * UNICODE_SCALAR_VALUES and result["random_texts"] > 0


def test_offsets_of_accented_cjk_and_astral_text_are_the_tokenizers_code_point_offsets(jar, full, fitted):
    for tokenizer_json, tables in (full, fitted):
        expected = reference(tokenizer_json).encode_batch(TEXTS, add_special_tokens=False)
        for text, got, want in zip(TEXTS, tokenize(jar, tables, TEXTS, "--offsets"), expected, strict=True):
            assert got["ids"] == want.ids, text
            assert [tuple(o) for o in got["offsets"]] == want.offsets, text
            # code-point offsets cut the words out of the Python string, astral characters included
            assert all(text[s:e] for s, e in got["offsets"])


def test_truncation_keeps_the_closing_sep(jar, full):
    tokenizer_json, tables = full
    tokenizer = reference(tokenizer_json)
    long_texts = [t for t in TEXTS if len(tokenizer.encode(t).ids) > TRUNCATED_LENGTH]
    assert long_texts
    tokenizer.enable_truncation(TRUNCATED_LENGTH)
    sep = tokenizer.token_to_id("[SEP]")
    for text, ids in zip(long_texts, tokenize(jar, tables, long_texts, "--max-length", str(TRUNCATED_LENGTH))):
        assert ids == tokenizer.encode(text).ids and ids[-1] == sep and len(ids) == TRUNCATED_LENGTH
    whole = tokenize(jar, tables, long_texts)  # no --max-length: nothing is cut
    assert all(len(ids) > TRUNCATED_LENGTH and ids[-1] == sep for ids in whole)
