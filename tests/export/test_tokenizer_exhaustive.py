"""The text-in tokenizer graph against tokenizer.json: the code-point table's classes, the exhaustive check failing
when one entry of the table is changed, random Unicode texts and QA pairs (ids, types, offsets), and a tokenizer the
graph cannot express refused. (The exhaustive check passing on an export is asserted in
end_to_end/test_sentiment_end_to_end.py.)"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pocketbert.core.tasks.registry import text_in_string
from pocketbert.core.errors import ExportError
from pocketbert.export.checks import tokenizer_probes
from pocketbert.export.text_in import text_normalization, tokenizer_check
from pocketbert.export.text_in.session import text_session
from pocketbert.export.text_in.text_tokenizer import PREFIX, mapping_for, probe_graph

# the tokenizer graph's code-point table is derived once a session (~30 s)
pytestmark = pytest.mark.slow
FULLWIDTH_COMMA, ZERO_WIDTH_SPACE, PRIVATE_USE, PRIVATE_USE_PLANE_15 = 0xFF0C, 0x200B, 0xE000, 0xF0000
PROPERTY_EXAMPLES = 120


@pytest.fixture(scope="module")
def tokenizer_data(wordpiece_tokenizer, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tokenizer")
    wordpiece_tokenizer.save_pretrained(folder)
    return json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def mapping(tokenizer_data):
    return mapping_for(tokenizer_data)


@pytest.fixture(scope="module")
def reference(tokenizer_data):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(json.dumps(tokenizer_data))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


@pytest.fixture(scope="module")
def pair_session(tokenizer_data, mapping):
    graph = probe_graph(tokenizer_data, ("question", "context"), True, mapping)
    return text_session(graph.SerializeToString())


def test_the_table_covers_the_classes_the_ops_read_otherwise(mapping):
    assert mapping.rows[FULLWIDTH_COMMA] == (0x20, FULLWIDTH_COMMA, 0x20)  # BasicTokenizer keeps it in a word
    assert mapping.rows[ZERO_WIDTH_SPACE] == ()  # tokenizer.json removes it
    assert mapping.rows[PRIVATE_USE_PLANE_15] == ()  # beyond the Basic Multilingual Plane too
    assert mapping.rows[0x10400] == (0x10428,)  # Deseret capital letter, lower-cased
    assert mapping.rows[0x20000] == (0x20, 0x20000, 0x20)  # CJK extension B, set apart as the normalizer does
    assert mapping.stand_in is not None and all(mapping.rows[c] in ((mapping.stand_in,),
                                                                    (0x20, mapping.stand_in, 0x20))
                                                for c in mapping.stood_in if c in mapping.rows)
    page_index, absolute, relative = mapping.page_tables()
    for code in (0x41, FULLWIDTH_COMMA, 0x10400, 0x20000, 0x1F600):
        row = page_index[code >> text_normalization.PAGE_BITS] * text_normalization.PAGE + (code & 0xFF)
        got = [int(a) + int(r) * code for a, r in zip(absolute[row], relative[row]) if int(a) + int(r) * code >= 0]
        assert tuple(got) == mapping.rows.get(code, (code,)), hex(code)


@pytest.mark.parametrize("code, new_row", [
    (0x41, (0x62,)),  # "A" lower-cased to "b"
    (FULLWIDTH_COMMA, (FULLWIDTH_COMMA,)),  # punctuation left inside the word
    (PRIVATE_USE, (PRIVATE_USE,)),  # a code point tokenizer.json removes, kept
])
def test_the_check_fails_when_one_table_entry_changes(tokenizer_data, mapping, code, new_row):
    broken = replace(mapping, rows={**mapping.rows, code: new_row})
    block = [chr(c) for c in range(code & ~0xFF, (code | 0xFF) + 1) if c not in tokenizer_probes.SURROGATES]
    probes = [form.format(ch) for form in tokenizer_check.CONTEXTS.values() for ch in block]
    result = tokenizer_check.run_check(tokenizer_data, ("text",), False, probes, broken)
    assert result["mismatch_count"] >= 1
    assert any(f"U+{code:04X}" in m["code_points"] for m in result["first_mismatches"])
    assert tokenizer_check.run_check(tokenizer_data, ("text",), False, probes, mapping)["mismatch_count"] == 0
    with pytest.raises(ExportError, match=f"U\\+{code:04X}"):
        tokenizer_check.require_equal(result)


def test_the_exhaustive_check_finds_one_changed_entry_among_every_code_point(tokenizer_data, mapping):
    broken = replace(mapping, rows={**mapping.rows, PRIVATE_USE_PLANE_15 + 7: (0x61,)})
    probes = tokenizer_check.probes({"inside a word": tokenizer_check.CONTEXTS["inside a word"]})
    result = tokenizer_check.run_check(tokenizer_data, ("text",), False, probes, broken)
    assert result["mismatch_count"] == 1
    assert result["first_mismatches"][0]["code_points"] == ["U+0061", f"U+{PRIVATE_USE_PLANE_15 + 7:04X}", "U+0062"]


@settings(max_examples=PROPERTY_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=st.text(max_size=40), context=st.text(max_size=120))
def test_random_unicode_pairs_tokenize_as_tokenizer_json(reference, pair_session, tokenizer_data, question, context):
    # as for single texts below: a special token's text in the input is the one known difference, pinned by
    # test_a_special_tokens_text_in_the_input_is_read_as_text_by_the_graph
    assume(not any(token["content"] in text for token in tokenizer_data["added_tokens"] for text in (question, context)))
    feeds = {"question": text_in_string(question), "context": text_in_string(context)}
    ids, types, offsets = pair_session.run([PREFIX + n for n in ("input_ids", "token_type_ids", "offset_mapping")],
                                           feeds)
    want = reference.encode(question.replace("\0", ""), context.replace("\0", ""))
    assert ids.tolist() == want.ids
    assert types.tolist() == want.type_ids
    assert offsets.tolist() == [list(o) for o in want.offsets]


# a word with a piece missing from the vocabulary (tokenizer.json makes it one [UNK]), one of code points the
# normalizers remove or replace, an accented one
ODD_WORDS = ("great\U0001F600", "\ufffd\x07", "naïve")
PLAIN_WORDS = ("the", "un", "able", "中", "film")


@pytest.mark.parametrize("count", range(1, len(PLAIN_WORDS) + 1))
def test_each_word_of_a_two_word_call_keeps_its_own_ids_and_offsets(reference, pair_session, count):
    """The word loop hands BertTokenizer two words a call: texts of odd and even word counts, an odd word in each
    place, as the question and as the context: ids, types and offsets as tokenizer.json gives them."""
    names = [PREFIX + n for n in ("input_ids", "token_type_ids", "offset_mapping")]
    for place in range(count):
        for odd in ODD_WORDS:
            words = list(PLAIN_WORDS[:count])
            words[place] = odd
            text = " ".join(words)
            for question, context in ((text, "a b c"), ("a", text)):
                ids, types, offsets = pair_session.run(names, {"question": text_in_string(question),
                                                               "context": text_in_string(context)})
                want = reference.encode(question, context)
                assert ids.tolist() == want.ids, (question, context)
                assert types.tolist() == want.type_ids and offsets.tolist() == [list(o) for o in want.offsets]


@settings(max_examples=PROPERTY_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=160))
def test_random_unicode_texts_tokenize_as_tokenizer_json(reference, tokenizer_data, mapping, text):
    # A special token's text in the input is the one known difference (docs/export.md, text-in models): the test
    # below pins it, so a change to either side is seen.
    assume(not any(token["content"] in text for token in tokenizer_data["added_tokens"]))
    session = _single_session(tokenizer_data, mapping)
    ids, = session.run([PREFIX + "input_ids"], {"text": text_in_string(text)})
    assert ids.tolist() == reference.encode(text).ids


def test_a_special_tokens_text_in_the_input_is_read_as_text_by_the_graph(reference, tokenizer_data, mapping):
    session = _single_session(tokenizer_data, mapping)
    text = "a [CLS] b"
    ids, = session.run([PREFIX + "input_ids"], {"text": text_in_string(text)})
    plain = reference.encode("a [ cls ] b").ids  # the same text with the brackets' pieces apart
    assert ids.tolist() == plain and reference.encode(text).ids.count(101) == 2  # tokenizer.json: the special id


_SESSIONS = {}


def _single_session(tokenizer_data, mapping):
    if "single" not in _SESSIONS:
        graph = probe_graph(tokenizer_data, ("text",), False, mapping)
        _SESSIONS["single"] = text_session(graph.SerializeToString())
    return _SESSIONS["single"]


def test_a_tokenizer_whose_words_the_ops_cannot_split_is_refused(tokenizer_data):
    whitespace_only = {**tokenizer_data, "pre_tokenizer": {"type": "WhitespaceSplit"}}
    with pytest.raises(ExportError, match=r"cannot express .*U\+0021"):
        mapping_for(whitespace_only)


def test_hard_cases_cover_each_special_class_and_tokenize_as_tokenizer_json(reference, tokenizer_data, mapping):
    cases = text_normalization.hard_cases(mapping)
    assert {"punctuation the ops keep in a word", "code point the ops misread", "code point the normalizer removes",
            "CJK beyond the Basic Multilingual Plane", "flag tag sequence"} <= {name for name, _ in cases}
    session = _single_session(tokenizer_data, mapping)
    for name, text in cases:
        ids, = session.run([PREFIX + "input_ids"], {"text": text_in_string(text)})
        assert ids.tolist() == reference.encode(text).ids, name


def test_the_recipe_names_every_context_the_check_has_and_each_choice_is_cached_apart(tokenizer_data):
    from pocketbert.core.config.recipe import TOKENIZER_CHECK_CONTEXTS, ExportSection

    assert TOKENIZER_CHECK_CONTEXTS == tuple(tokenizer_check.CONTEXTS)
    assert ExportSection().tokenizer_check_contexts == list(tokenizer_check.CONTEXTS)  # the default: all of them
    one = {"inside a word": tokenizer_check.CONTEXTS["inside a word"]}
    entries = {tokenizer_check._cache_file(tokenizer_data, ("text",), False, contexts)
               for contexts in (one, tokenizer_check.CONTEXTS, {"alone": tokenizer_check.CONTEXTS["alone"]})}
    assert len(entries) == 3  # a check of fewer contexts is never read as the whole one's
    assert len(tokenizer_check.probes(one)) == len(tokenizer_check.probes()) - \
        (len(tokenizer_check.CONTEXTS) - 1) * sum(1 for _ in tokenizer_probes.code_points())


def test_the_graph_follows_the_canonical_ordering_of_marks_and_fails_without_it(tokenizer_data, mapping):
    """On the pairs of marks the graph gives tokenizer.json's ids, types and offsets, alone and as a QA pair; built
    with no ordering (every mark read where it stands), the check finds the kept marks' offsets wrong."""
    from pocketbert.export.checks.tokenizer_probes import pair_probes
    from pocketbert.export.text_in.tokenizer_check import pair_representatives

    marks = [c for c in pair_representatives(json.dumps(tokenizer_data)) if c in mapping.order]
    probes = pair_probes(marks, {"between words": "a {0}{1} b"})  # inside a word, the next letter ends its span
    for inputs in (("text",), ("question", "context")):
        assert tokenizer_check.run_check(tokenizer_data, inputs, True, probes, mapping)["mismatch_count"] == 0
    unordered = tokenizer_check.run_check(tokenizer_data, ("text",), True, probes, replace(mapping, order={}))
    assert unordered["mismatch_count"] > 0
    assert all(m["differs"] == "offsets" for m in unordered["first_mismatches"])
