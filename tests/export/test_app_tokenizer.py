"""tokenizer.tables and the Python reference that reads it: equal to tokenizer.json (the `tokenizers` library) on
every code point in four contexts, for the real all-MiniLM vocabulary and a fitted one, with the same offsets; the
added tokens ([SEP], [MASK] ... typed in a text) split out of the raw text as tokenizer.json splits them, overlapping
ones included; added tokens the app tokenizer cannot match as tokenizers does refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pocketbert.core.errors import ExportError
from pocketbert.export.app import app_tokenizer_check, tokenizer_reference, tokenizer_tables
from pocketbert.export.checks.tokenizer_probes import CODE_SPACE, FLAG_SEQUENCES, SURROGATES, halved_down
from tests.helpers import APP_TOKENIZER_MAX_LENGTH as MAX_LENGTH
from tests.helpers import FITTED_IDS, MIN_PAIR_PROBES, OVERLAPPING_PLAIN_TOKENS, OVERLAPPING_SPECIAL_TOKENS, write_app_tokenizer
from tests.helpers import PAIR_CUTS, PAIR_TEXTS, write_overlapping_added_tokens

SCALAR_VALUES = CODE_SPACE - len(SURROGATES)
REFERENCE_CONTEXT = "inside a word"  # where splitting, pieces and unknown words all meet
VARIED_TEXTS = [
    "Café naïve résumé, señor Müller", "中国电影 很好看 and 日本語のテキスト", "great😀 movie 👍🏽 👩‍👩‍👧 ok",
    "wonder\u200bful act\u200cing a\u200db", "e\u0301 o\u0308\u0304 x\u0301y \u0301start", "İstanbul ıi İI",
    "ΟΔΟΣ ὈΔΥΣΣΕΎΣ σοφός", "tab\tnew\nline\r\x00end\x07 \x1f\x7f\x85", "a" + "b" * 120 + " c",
    "unbelievably antidisestablishmentarianism", "한국어 텍스트", "ﬁne ﬂour Ⅻ ½", "\U0001F3F4\U000E0067\U000E0062"
    "\U000E0065\U000E006E\U000E0067\U000E007F flag", "", "   ", "x" * 101, "5€ 3.5 1,000 $%&",
]
# Where the text holds an added token's content: split out (the id in the middle), or not (another case, cut short).
ADDED_TOKEN_SPLITS = {"good [SEP] film": ("[SEP]", 1), "a[MASK]b": ("[MASK]", 1), "[CLS][SEP]": ("[SEP]", 1),
                      "[[SEP]]": ("[SEP]", 1), "😀[PAD]é": ("[PAD]", 1), "[sep] [Sep] [SEP": ("[SEP]", 0),
                      "x[UNK]y [UNK]": ("[UNK]", 2)}
OVERLAP_SAMPLE = 500
# A kept mark of a high canonical class (U+1D165 MUSICAL SYMBOL COMBINING STEM, 216) before a stripped one of a lower
# class (U+0334, 1): the normalizer sorts the stripped mark first, and the kept one takes its place: [UNK] (0, 3).
OVERTAKEN = ("a\U0001D165\u0334", [(0, 3)])


def tokenizer_data(wordpiece_tokenizer, fitted: bool) -> dict:
    from pocketbert.train.vocabulary.tokenizer import fitted_tokenizer

    tokenizer = fitted_tokenizer(wordpiece_tokenizer, FITTED_IDS) if fitted else wordpiece_tokenizer
    return json.loads(tokenizer.backend_tokenizer.to_str())


@pytest.fixture(scope="module", params=["full", "fitted"])
def app_tokenizer(request, tmp_path_factory, wordpiece_tokenizer) -> dict[str, Path]:
    return write_app_tokenizer(tmp_path_factory.mktemp(request.param), wordpiece_tokenizer,
                               request.param == "fitted")


def reference_and_tables(paths: dict[str, Path]):
    from tokenizers import Tokenizer

    reference = Tokenizer.from_file(str(paths["json"]))
    reference.no_truncation()
    reference.no_padding()
    return reference, tokenizer_reference.load(paths["tables"])


def differs(reference, tables):
    def what(chunk: list[str]) -> str | None:
        text = " ".join(chunk)
        want = reference.encode(text, add_special_tokens=False)
        got = tokenizer_reference.tokenize(tables, text)
        if want.ids != [t.id for t in got]:
            return "ids"
        if want.offsets != [(t.start, t.end) for t in got]:
            return "offsets"
        return None
    return what


@pytest.mark.slow
def test_reference_equals_tokenizers_on_every_code_point(app_tokenizer):
    """The Python reference, as a pocketbert-tokenize program, through the check the Swift and Kotlin programs
    take: every scalar value inside a word (ids and offsets), the golden texts, a random sample. The Swift and
    Kotlin programs, which read the same tables, take all 4 contexts; pure Python pays ~25 s of CPU a context."""
    result = app_tokenizer_check.check(tokenizer_reference.program(), app_tokenizer["json"], app_tokenizer["tables"],
                                       app_tokenizer["golden"], contexts=(REFERENCE_CONTEXT,))
    assert result["probes"] == SCALAR_VALUES + len(FLAG_SEQUENCES)
    assert result["pair_probes"] >= MIN_PAIR_PROBES
    assert result["golden_texts"] >= 10 and result["random_texts"] == app_tokenizer_check.RANDOM_TEXTS
    assert result["added_token_texts"] >= len(ADDED_TOKEN_SPLITS)
    assert result["mismatch_count"] == 0, result["first_mismatches"]


@pytest.mark.slow
def test_reference_offsets_and_framing_equal_tokenizers(app_tokenizer):
    reference, tables = reference_and_tables(app_tokenizer)
    assert [m for text in VARIED_TEXTS for m in halved_down([text], differs(reference, tables))] == []
    reference.enable_truncation(16)
    for text in VARIED_TEXTS:
        encoding = tokenizer_reference.encode(tables, text, 16)
        assert encoding.ids == reference.encode(text).ids
        assert encoding.ids[0] == tables.cls_id and encoding.ids[-1] == tables.sep_id
    reference.no_truncation()
    pair = tokenizer_reference.encode_pair(tables, "Où est le café?", "Le café 😀 est près de la Seine.", MAX_LENGTH)
    want = reference.encode("Où est le café?", "Le café 😀 est près de la Seine.")
    assert (pair.ids, pair.type_ids) == (want.ids, want.type_ids)
    # QA's answer is the context's own text: the word pieces' code-point span, accents and case kept
    tokens = tokenizer_reference.tokenize(tables, VARIED_TEXTS[0])
    assert tokenizer_reference.substring(VARIED_TEXTS[0], tokens[0].start, tokens[-1].end) == VARIED_TEXTS[0]


@pytest.mark.slow
def test_reference_splits_out_added_tokens_as_tokenizers_does(app_tokenizer):
    reference, tables = reference_and_tables(app_tokenizer)
    contents = [token.content for token in reference.get_added_tokens_decoder().values()]
    texts = [*ADDED_TOKEN_SPLITS, *app_tokenizer_check.added_token_texts(contents)]
    assert [m for text in texts for m in halved_down([text], differs(reference, tables))] == []
    for text, (content, times) in ADDED_TOKEN_SPLITS.items():
        ids = [t.id for t in tokenizer_reference.tokenize(tables, text)]
        assert ids.count(reference.token_to_id(content)) == times, text
    reference.enable_truncation(16)
    for text in [*ADDED_TOKEN_SPLITS, "[SEP] " * 40]:
        assert tokenizer_reference.encode(tables, text, 16).ids == reference.encode(text).ids
    reference.no_truncation()
    pair = tokenizer_reference.encode_pair(tables, "who [MASK]?", "[CLS] she did [SEP]", MAX_LENGTH)
    want = reference.encode("who [MASK]?", "[CLS] she did [SEP]")
    assert (pair.ids, pair.type_ids) == (want.ids, want.type_ids)


def test_reference_pairs_equal_tokenizers_whole_and_never_outgrow_a_cut(app_tokenizer):
    """encode_pair, the specification the Swift and Kotlin encodePair follow: whole, tokenizer.json's pair encoding;
    cut, at most max_length ids, [CLS] first [SEP] second [SEP] with each side a prefix of its whole pieces and the
    first at most max_length - 3 of them. Its `--pairs` program gives the same."""
    reference, tables = reference_and_tables(app_tokenizer)
    for first, second in PAIR_TEXTS:
        want = reference.encode(first, second)
        whole = tokenizer_reference.encode_pair(tables, first, second, sys.maxsize)  # None: the tables' cut
        assert (whole.ids, whole.type_ids) == (want.ids, want.type_ids), (first, second)
        a, b = whole.type_ids.count(0) - 2, whole.type_ids.count(1) - 1
        for cut in filter(None, PAIR_CUTS):
            pair = tokenizer_reference.encode_pair(tables, first, second, cut)
            kept_a, kept_b = pair.type_ids.count(0) - 2, pair.type_ids.count(1) - 1
            assert len(pair.ids) <= cut and kept_a == min(a, cut - 3) and kept_b == min(b, cut - 3 - kept_a)
            assert pair.ids == [tables.cls_id, *whole.ids[1:1 + kept_a], tables.sep_id,
                                *whole.ids[a + 2:a + 2 + kept_b], tables.sep_id]
    for cut in PAIR_CUTS:
        assert app_tokenizer_check.pair_mismatches(tokenizer_reference.program(), app_tokenizer["tables"], PAIR_TEXTS,
                                                   cut) == []


@pytest.fixture(scope="module")
def overlapping(tmp_path_factory, wordpiece_tokenizer) -> dict[str, Path]:
    return write_overlapping_added_tokens(tmp_path_factory.mktemp("overlapping"), wordpiece_tokenizer)


@pytest.mark.slow
def test_reference_takes_the_leftmost_then_longest_of_overlapping_added_tokens(overlapping):
    reference, tables = reference_and_tables(overlapping)
    contents = [token.content for token in reference.get_added_tokens_decoder().values()]
    assert set(OVERLAPPING_SPECIAL_TOKENS + OVERLAPPING_PLAIN_TOKENS) <= set(tables.added) == set(contents)
    texts = [*app_tokenizer_check.added_token_texts(contents),
             *app_tokenizer_check.random_sample(OVERLAP_SAMPLE, 0, contents)]
    assert [m for text in texts for m in halved_down([text], differs(reference, tables))] == []
    ids = {text: [t.id for t in tokenizer_reference.tokenize(tables, text)] for text in ("xabcdx", "[SEP]]]", "zzZZ")}
    assert reference.token_to_id("abc") in ids["xabcdx"] and reference.token_to_id("bcd") not in ids["xabcdx"]
    assert ids["[SEP]]]"][0] == reference.token_to_id("[SEP]]")
    assert ids["zzZZ"][0] == reference.token_to_id("zz")


@pytest.mark.parametrize("flag", sorted(tokenizer_tables.UNSUPPORTED_ADDED))
def test_tables_refuse_added_tokens_matched_otherwise(wordpiece_tokenizer, flag):
    data = tokenizer_data(wordpiece_tokenizer, fitted=False)
    data["added_tokens"] = [{**token, flag: token["content"] == "[MASK]"} for token in data["added_tokens"]]
    with pytest.raises(ExportError) as refused:
        tokenizer_tables.tables_text(data, MAX_LENGTH)
    assert "\n" not in str(refused.value) and "'[MASK]'" in str(refused.value)
    assert tokenizer_tables.UNSUPPORTED_ADDED[flag] in str(refused.value)


def test_tables_of_another_format_are_refused():
    with pytest.raises(ExportError, match="export it again"):
        tokenizer_reference.read_tables("pocketbert-tokenizer-tables 1\nunk 100\ncls 101\n")


def test_check_halves_down_to_the_differing_probes():
    lines = [["a", "b", "c"], ["d", "e"], ["f"]]
    seen = []

    def bad_letters(texts: list[str]) -> list[str | None]:
        seen.append(len(texts))
        return ["has e or f" if set(text) & {"e", "f"} else None for text in texts]

    assert app_tokenizer_check._halved_down(lines, bad_letters) == [("f", "has e or f"), ("e", "has e or f")]
    assert seen == [3, 2]  # one run of the program a round, not one a line


@pytest.mark.slow
def test_tables_store_identical_pages_once(wordpiece_tokenizer):
    data = tokenizer_data(wordpiece_tokenizer, fitted=False)
    text = tokenizer_tables.tables_text(data, MAX_LENGTH)
    tables = tokenizer_reference.read_tables(text)
    assert len(tables.map_index) == len(tables.class_index) == CODE_SPACE // 256
    assert len(set(map(tuple, tables.map_pages))) == len(tables.map_pages) < len(tables.map_index) // 4
    assert len(set(tables.class_pages)) == len(tables.class_pages)
    assert tokenizer_reference.mapped(tables, ord("A")) == (ord("a"),)
    assert tokenizer_reference.mapped(tables, 0x4E00) == (0x20, 0x4E00, 0x20)
    assert tokenizer_reference.mapped(tables, 0) == ()
    assert len(tables.vocab) == len(data["model"]["vocab"]) and tables.max_length == MAX_LENGTH
    assert tables.added == {token["content"]: token["id"] for token in data["added_tokens"]}
    assert tables.added["[SEP]"] == tables.sep_id and tables.added_lengths == (6, 5)


@pytest.mark.parametrize("part, replacement", [("pre_tokenizer", {"type": "Whitespace"}),
                                                ("normalizer", None),
                                                ("model", {"type": "BPE", "vocab": {}, "merges": []}),
                                                ("post_processor", {"type": "ByteLevel"})])
def test_tables_refuse_other_pipelines(wordpiece_tokenizer, part, replacement):
    data = {**tokenizer_data(wordpiece_tokenizer, fitted=False), part: replacement}
    with pytest.raises(ExportError) as refused:
        tokenizer_tables.bert_special_ids(data)
    assert "\n" not in str(refused.value) and "BERT WordPiece" in str(refused.value)


@pytest.mark.slow
def test_reference_follows_the_canonical_ordering_of_marks_and_fails_without_it(app_tokenizer):
    """On the pairs of marks (the code points whose order entry is not a starter's), the reference equals
    tokenizer.json; with every order entry made a starter's (marks read where they stand), it does not."""
    from dataclasses import replace

    from pocketbert.export.checks.tokenizer_probes import STARTER, pair_probes
    from pocketbert.export.text_in.tokenizer_check import pair_representatives

    reference, tables = reference_and_tables(app_tokenizer)
    text, offsets = OVERTAKEN
    assert [(t.start, t.end) for t in tokenizer_reference.tokenize(tables, text)] == offsets
    assert reference.encode(text, add_special_tokens=False).offsets == offsets
    marks = [c for c in pair_representatives(app_tokenizer["json"].read_text(encoding="utf-8"))
             if tokenizer_reference.order_entry(tables, c) != STARTER]
    probes = pair_probes(marks, {"between words": "a {0}{1} b"})  # inside a word, the next letter ends its span
    assert halved_down(probes, differs(reference, tables)) == []
    unordered = replace(tables, order_pages=[[STARTER] * (tokenizer_reference.PAGE_MASK + 1)],
                        order_index=[0] * len(tables.order_index))
    assert len(halved_down(probes, differs(reference, unordered))) > 0
