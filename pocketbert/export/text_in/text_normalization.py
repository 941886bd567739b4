"""What the tokenizer graph makes of each code point before its word-splitting ops see the text, derived for all
1,114,112 code points so that the graph's ops then split and piece the text as tokenizer.json does.

tokenizer.json's normalizer (clean-up, CJK padding, lower-casing, accent stripping) is tabulated code point by
code point. The extensions' ops then part from tokenizer.json on whole classes of code points, found here by
probing both on every code point the normalizer can put out:
- BasicTokenizer keeps inside a word hundreds of punctuation marks tokenizer.json's pre-tokenizer sets apart
  (fullwidth ，！？（）, Armenian, Arabic, Syriac, Ethiopic, Mongolian, supplemental punctuation ...): the table sets
  them apart with a space on each side;
- the ops drop, or split at, a few code points tokenizer.json keeps in a word: where no vocabulary token holds
  such a code point (every word with it is one [UNK] either way), the table puts in its place a stand-in code
  point the ops keep and the vocabulary lacks as well;
- the ops' own CJK rule is switched off: the normalizer's CJK padding, tabulated, is tokenizer.json's exactly.
A rule no table can express (a code point the ops misread that the vocabulary holds) is an ExportError that names
the code points: export then ships no text-in model for that tokenizer.

The table is paged (256 code points a page, identical pages stored once), and each entry is `absolute +
relative * code point`, so the identity and a shifted case mapping share pages across the whole code space.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace as replaced
from functools import cached_property

from pocketbert.core.errors import ExportError
from pocketbert.export.checks.tokenizer_probes import (CODE_SPACE, FLAG_SEQUENCES, KEEP, REMOVED_FIRST, SEPARATE,
                                                       SPLIT, canonical_order, code_points, normalizer_rows,
                                                       word_classes)
from pocketbert.export.text_in.session import text_session

PAGE_BITS = 8
PAGE = 1 << PAGE_BITS
SPACE = 0x20
NO_CODE_POINT = -1
MAX_EXPANSION = 4  # code points one code point may become; more would be a normalizer no BERT tokenizer has
RANK_SPAN = 256  # the graph sorts marks on (run, rank, place): ranks below it (Unicode has 55 canonical classes)
NAMED_IN_ERRORS = 8
TEXT_IN_REFUSED = "export this model's token-id graphs only"
PAGE_TABLES_KEPT = 8  # tables a process keeps: the page and order tables of four mappings (a few hundred KiB each)
_PAGE_TABLES: dict[tuple[str, bytes], tuple] = {}  # (page or order, the mapping's digest) -> its tables


@dataclass(frozen=True)
class CodePointMapping:
    """What each code point becomes (only those that change), and why, for reports and the golden file."""

    rows: dict[int, tuple[int, ...]]
    width: int
    spaced: tuple[int, ...] = ()  # punctuation the ops keep in a word, set apart with spaces
    stood_in: tuple[int, ...] = ()  # code points the ops misread, replaced by stand_in
    stand_in: int | None = None
    # the normalizer's canonical ordering of marks (tokenizer_probes.canonical_order, counted in this table's code
    # points): the entries that are not STARTER
    order: dict[int, str | tuple[tuple[int, int], ...]] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"width": self.width, "spaced": list(self.spaced), "stood_in": list(self.stood_in),
                "stand_in": self.stand_in, "rows": [[c, list(out)] for c, out in sorted(self.rows.items())],
                "order": [[c, entry if isinstance(entry, str) else [list(u) for u in entry]]
                          for c, entry in sorted(self.order.items())]}

    @classmethod
    def from_json(cls, data: dict) -> "CodePointMapping":
        return cls({int(c): tuple(map(int, out)) for c, out in data["rows"]}, int(data["width"]),
                   tuple(data["spaced"]), tuple(data["stood_in"]), data["stand_in"],
                   {int(c): entry if isinstance(entry, str) else tuple(tuple(map(int, u)) for u in entry)
                    for c, entry in data["order"]})

    def order_tables(self):
        """(page index [CODE_SPACE / PAGE] int32, ranks [pages * PAGE, units] int32, counts [pages * PAGE, units]
        int32): code point c's units in canonical order are row r = page_index[c >> 8] * 256 + (c & 255), each of
        rank ranks[r, k] (-1: no unit) giving counts[r, k] of c's code points. A STARTER is one unit of rank 0
        giving all of them (counted as `width`); a code point REMOVED_FIRST has no unit. Read only, kept as
        page_tables are."""
        return self._kept("order", self._derive_order_tables)

    def _derive_order_tables(self):
        import numpy as np

        units = max([len(entry) for entry in self.order.values() if not isinstance(entry, str)] + [1])
        ranks = np.full((CODE_SPACE, units), -1, dtype=np.int32)
        counts = np.zeros((CODE_SPACE, units), dtype=np.int32)
        ranks[:, 0], counts[:, 0] = 0, self.width
        for code, entry in self.order.items():
            made = len(self.rows.get(code, (code,)))
            if made != (0 if entry == REMOVED_FIRST else sum(count for _, count in entry)):
                continue  # the row decides: an entry that disagrees with it would hide a changed row
            ranks[code], counts[code] = -1, 0
            if entry == REMOVED_FIRST:
                continue
            for k, (rank, count) in enumerate(entry):
                ranks[code, k], counts[code, k] = rank, count
        pages = np.concatenate([ranks.reshape(-1, PAGE * units), counts.reshape(-1, PAGE * units)], axis=1)
        unique, page_index = distinct_pages(pages)
        half = PAGE * units
        return _read_only(page_index.astype(np.int32), unique[:, :half].reshape(-1, units).astype(np.int32),
                          unique[:, half:].reshape(-1, units).astype(np.int32))

    def apply(self, text: str) -> str:
        return "".join("".join(map(chr, self.rows.get(ord(c), (ord(c),)))) for c in text)

    def page_tables(self):
        """(page index [CODE_SPACE / PAGE] int32, absolute [pages * PAGE, width] int32, relative [pages * PAGE,
        width] int8): code point c becomes absolute[r] + relative[r] * c, r = page_index[c >> 8] * 256 + (c & 255),
        leaving out NO_CODE_POINT entries. Read only: kept for the process by the mapping's content, as each of an
        export's text-in models (and each export of one tokenizer) asks for the same tables."""
        return self._kept("page", self._derive_page_tables)

    def _kept(self, kind: str, derive: Callable[[], tuple]) -> tuple:
        key = (kind, self._content)
        if key not in _PAGE_TABLES:
            if len(_PAGE_TABLES) >= PAGE_TABLES_KEPT:
                _PAGE_TABLES.clear()
            _PAGE_TABLES[key] = derive()
        return _PAGE_TABLES[key]

    @cached_property
    def _content(self) -> bytes:
        """A digest of the mapping's fields, found once an instance (a tokenizer's rows run to a hundred thousand
        code points; pickling them takes a tenth of the time JSON does). Equal digests are equal mappings; an equal
        mapping whose rows were inserted in another order only derives its tables again."""
        import hashlib
        import pickle

        fields_in_order = tuple(getattr(self, f.name) for f in fields(self))
        return hashlib.sha256(pickle.dumps(fields_in_order, protocol=5)).digest()

    def _derive_page_tables(self):
        import numpy as np

        absolute = np.full((CODE_SPACE, self.width), NO_CODE_POINT, dtype=np.int32)
        relative = np.zeros((CODE_SPACE, self.width), dtype=np.int8)
        absolute[:, 0] = 0
        relative[:, 0] = 1
        for code, out in self.rows.items():
            absolute[code] = NO_CODE_POINT
            relative[code] = 0
            for k, value in enumerate(out):
                if value == code:
                    absolute[code, k], relative[code, k] = 0, 1
                else:
                    absolute[code, k] = value
        pages = np.concatenate([absolute.reshape(-1, PAGE * self.width),
                                relative.astype(np.int32).reshape(-1, PAGE * self.width)], axis=1)
        unique, page_index = distinct_pages(pages)
        half = PAGE * self.width
        return _read_only(page_index.astype(np.int32), unique[:, :half].reshape(-1, self.width).astype(np.int32),
                          unique[:, half:].reshape(-1, self.width).astype(np.int8))


def distinct_pages(pages):
    """(the distinct rows of the 2-D int array `pages`, sorted; each row's index among them): what
    np.unique(pages, axis=0, return_inverse=True) gives, found by each row's bytes. np.unique compares rows of
    thousands of columns field by field, which took seconds a table, and every text-in graph asks for two."""
    import numpy as np

    first: dict[bytes, int] = {}
    rows, found = [], np.empty(len(pages), dtype=np.intp)
    for k, row in enumerate(pages):
        key = row.tobytes()
        if key not in first:
            first[key] = len(rows)
            rows.append(k)
        found[k] = first[key]
    distinct = pages[rows]
    order = np.lexsort(distinct.T[::-1])  # lexsort's last key sorts first: column 0 decides first
    place = np.empty(len(order), dtype=np.intp)
    place[order] = np.arange(len(order))
    return distinct[order], place[found]


def _read_only(*tables):
    for table in tables:
        table.setflags(write=False)
    return tables



def derive(data: dict, misread_in_words: Callable[[CodePointMapping, list[int]], list[int]]) -> CodePointMapping:
    """The mapping for tokenizer.json `data`. misread_in_words(mapping, code points) runs the graph built with a
    mapping on each code point inside a word and returns those it tokenizes otherwise than tokenizer.json."""
    from tokenizers import Tokenizer

    reference = Tokenizer.from_str(json.dumps(data))
    rows = normalizer_rows(reference)
    reach_ops = sorted({c for c in code_points() if c not in rows} | {o for out in rows.values() for o in out})
    reference_class = word_classes(lambda text: [w for w, _ in reference.pre_tokenizer.pre_tokenize_str(text)]
                                   if reference.pre_tokenizer else text.split(" "), reach_ops, TEXT_IN_REFUSED)
    ops_class = word_classes(_basic_tokenizer_words(), reach_ops, TEXT_IN_REFUSED)
    in_vocabulary = _vocabulary_code_points(data)
    stand_in = _stand_in(reach_ops, rows, reference_class, ops_class, in_vocabulary)

    replace, spaced, stood_in, impossible = {}, [], [], []
    for o in reach_ops:
        want, got = reference_class[o], ops_class[o]
        if want == got:
            continue
        if want == SPLIT and got == KEEP:
            replace[o], _ = (SPACE, o, SPACE), spaced.append(o)
        elif want == SEPARATE:
            replace[o] = (SPACE,)
        elif o in in_vocabulary or stand_in is None:
            impossible.append(o)
        else:
            replace[o] = (SPACE, stand_in, SPACE) if want == SPLIT else (stand_in,)
            stood_in.append(o)
    _refuse(impossible, "the graph's ops split or drop where tokenizer.json does not, and the vocabulary holds them")
    mapping = _with_replacements(rows, replace, spaced, stood_in, stand_in)

    misread = misread_in_words(mapping, list(code_points()))
    fixable = [c for c in misread if stand_in is not None
               and all(o not in in_vocabulary for o in rows.get(c, (c,)) if o != SPACE)]
    _refuse(sorted(set(misread) - set(fixable)), "the graph's WordPiece op reads them otherwise than tokenizer.json")
    if not fixable:
        return _ordered(reference, mapping)
    for o in {o for c in fixable for o in rows.get(c, (c,)) if o != SPACE}:
        replace[o] = (SPACE, stand_in, SPACE) if reference_class[o] == SPLIT else (stand_in,)
    mapping = _with_replacements(rows, replace, spaced, stood_in + sorted(set(fixable)), stand_in)
    _refuse(misread_in_words(mapping, fixable), "a stand-in code point does not make the WordPiece op read them as "
                                                "tokenizer.json does")
    return _ordered(reference, mapping)


def _ordered(reference, mapping: CodePointMapping) -> CodePointMapping:
    """The mapping with the normalizer's canonical ordering, counted in the mapping's own code points."""
    try:
        order = canonical_order(reference, mapping.rows, lambda unit: mapping.apply(unit))
    except ExportError as exc:
        raise ExportError(f"the text-in tokenizer graph cannot express this tokenizer.json ({exc}): "
                          f"{TEXT_IN_REFUSED} (--only onnx,onnx-int8,...)") from exc
    _refuse([c for c, entry in order.items() if not isinstance(entry, str) and max(r for r, _ in entry) >= RANK_SPAN],
            f"its normalizer orders marks in more than {RANK_SPAN} ranks")
    return replaced(mapping, order=order)



def _with_replacements(rows: dict, replace: dict, spaced: list, stood_in: list, stand_in) -> CodePointMapping:
    """The normalizer's rows with each code point they put out replaced as `replace` says."""
    final = {}
    for c in code_points():
        out = rows.get(c, (c,))
        new = tuple(x for o in out for x in replace.get(o, (o,)))
        if new != (c,):
            final[c] = new
    width = max([len(v) for v in final.values()] + [1])
    if width > MAX_EXPANSION:
        wide = [c for c, v in final.items() if len(v) > MAX_EXPANSION]
        _refuse(wide, f"they become more than {MAX_EXPANSION} code points")
    return CodePointMapping(final, width, tuple(spaced), tuple(stood_in), stand_in)


def _refuse(code_points_: list[int], why: str) -> None:
    if code_points_:
        named = ", ".join(f"U+{c:04X}" for c in code_points_[:NAMED_IN_ERRORS])
        more = f" and {len(code_points_) - NAMED_IN_ERRORS} more" if len(code_points_) > NAMED_IN_ERRORS else ""
        raise ExportError(f"the text-in tokenizer graph cannot express this tokenizer.json on {named}{more} ({why}): "
                          "export this model's token-id graphs only (--only onnx,onnx-int8,...)")



def _basic_tokenizer_words() -> Callable[[str], list[str]]:
    """The extensions' BasicTokenizer with the settings the graph runs it with."""
    from onnx import TensorProto, helper


    node = helper.make_node("BasicTokenizer", ["text"], ["words"], domain="ai.onnx.contrib", **OPS_SETTINGS)
    graph = helper.make_graph([node], "basic_tokenizer", [helper.make_tensor_value_info("text", TensorProto.STRING, [])],
                              [helper.make_tensor_value_info("words", TensorProto.STRING, [None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("ai.onnx.contrib", 1)], ir_version=8)
    session = text_session(model.SerializeToString())
    import numpy as np

    return lambda text: list(session.run(None, {"text": np.array(text, dtype=object)})[0])


# The ops' own lower-casing, accent stripping and CJK rule are off: the table does tokenizer.json's.
OPS_SETTINGS = {"do_lower_case": 0, "strip_accents": 0, "tokenize_chinese_chars": 0, "tokenize_punctuation": 1,
                "remove_control_chars": 0}


def _vocabulary_code_points(data: dict) -> set[int]:
    model = data.get("model") or {}
    prefix = model.get("continuing_subword_prefix", "##")
    return {ord(ch) for token in model.get("vocab", {})
            for ch in (token[len(prefix):] if token.startswith(prefix) and token != prefix else token)}


def _stand_in(reach_ops: list[int], rows: dict, reference_class: dict, ops_class: dict, in_vocabulary: set):
    """The first code point both sides keep in a word, the normalizer leaves as it is and no token holds."""
    for o in reach_ops:
        if (o > 0x7F and o not in rows and o not in in_vocabulary and reference_class[o] == KEEP
                and ops_class[o] == KEEP):
            return o
    return None


def hard_cases(mapping: CodePointMapping) -> list[tuple[str, str]]:
    """(what it probes, text): one text per class of code point the graph treats specially, for the golden file."""
    def first(codes, where=lambda c: True):
        return next((c for c in codes if where(c)), None)

    removed = first(sorted(mapping.rows), lambda c: c > 0x7F and mapping.rows[c] == ())
    cjk = first(sorted(mapping.rows), lambda c: c >= 0x10000 and len(mapping.rows[c]) == 3
                and mapping.rows[c][0] == SPACE == mapping.rows[c][2] and c not in mapping.spaced)
    wide = first(sorted(mapping.rows), lambda c: c > 0x7F and len(mapping.rows[c]) >= 2 and SPACE not in mapping.rows[c])
    changed_above = first(sorted(mapping.rows), lambda c: c >= 0x10000 and len(mapping.rows[c]) == 1)
    cases = [("punctuation the ops keep in a word", mapping.spaced[:1]),
             ("more of it", mapping.spaced[len(mapping.spaced) // 2:len(mapping.spaced) // 2 + 1]),
             ("code point the ops misread", mapping.stood_in[:1]),
             ("code point the normalizer removes", [removed] if removed is not None else []),
             ("CJK beyond the Basic Multilingual Plane", [cjk] if cjk is not None else []),
             ("code point that becomes several", [wide] if wide is not None else []),
             ("letter beyond the Basic Multilingual Plane the normalizer changes",
              [changed_above] if changed_above is not None else [])]
    return [(name, f"a{chr(codes[0])}b and {chr(codes[0])} then {chr(codes[0]) * 3}.") for name, codes in cases
            if codes] + [("flag tag sequence", f"go {FLAG_SEQUENCES[0]} team{FLAG_SEQUENCES[1]}")]

