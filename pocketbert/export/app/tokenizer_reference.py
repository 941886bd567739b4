"""The app tokenizer as a specification: BERT WordPiece read from tokenizer.tables alone (tokenizer_tables.py holds
the format). The Swift and Kotlin tokenizers transcribe these functions step by step, under the same names.

`python -m pocketbert.export.app.tokenizer_reference --tables PATH [--json-lines] [--max-length N] [--offsets]` is
the command-line program the app tokenizers' programs answer as (app_tokenizer_check.py drives them all)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from pocketbert.core.errors import ExportError

MAGIC = "pocketbert-tokenizer-tables 3"
PAGE_BITS = 8
PAGE_MASK = 0xFF
OTHER, WHITESPACE, PUNCTUATION = "o", "w", "p"
STARTER, REMOVED_FIRST = ".", "-"


class Token(NamedTuple):
    id: int
    start: int  # code-point offsets into the input text
    end: int


@dataclass(frozen=True)
class Encoding:
    ids: list[int]
    type_ids: list[int]
    attention_mask: list[int]


@dataclass(frozen=True)
class Tables:
    unk_id: int
    cls_id: int
    sep_id: int
    pad_id: int
    prefix: str
    max_word_chars: int
    max_length: int
    added: dict[str, int]  # an added token's exact content -> its id
    added_lengths: tuple[int, ...]  # the contents' lengths in code points, longest first
    added_starts: frozenset[str]  # the contents' first code points: nowhere else can one begin
    vocab: dict[str, int]
    map_pages: list[list[tuple[int, ...] | int]]  # an int: the code point plus it; a tuple: these code points
    map_index: list[int]
    class_pages: list[str]
    class_index: list[int]
    order_pages: list[list[str | tuple[tuple[int, int], ...]]]  # STARTER, REMOVED_FIRST or units (rank, count)
    order_index: list[int]


def read_tables(text: str) -> Tables:
    """The tables from the text of a tokenizer.tables file."""
    lines = text.split("\n")
    if lines[0] != MAGIC:
        raise ExportError(f"not a tokenizer.tables file (it begins {lines[0][:40]!r}): export it again")
    at = 1

    def field(name: str) -> str:
        nonlocal at
        key, _, value = lines[at].partition(" ")
        if key != name:
            raise ExportError(f"tokenizer.tables line {at + 1} is {key!r}, not {name!r}: export it again")
        at += 1
        return value

    def block(name: str) -> list[str]:
        nonlocal at
        count = int(field(name))
        at += count
        return lines[at - count:at]

    unk, cls, sep, pad = (int(field(name)) for name in ("unk", "cls", "sep", "pad"))
    prefix, max_word_chars, max_length = field("prefix"), int(field("max_word_chars")), int(field("max_length"))
    added = {}
    for line in block("added"):
        number, _, content = line.partition(" ")
        added["".join(chr(int(h, 16)) for h in content.split(","))] = int(number)
    added_lengths = tuple(sorted({len(content) for content in added}, reverse=True))
    added_starts = frozenset(content[0] for content in added)
    vocab = {token: i for i, token in enumerate(block("vocab"))}
    map_pages = [[_map_entry(entry) for entry in line.split(" ")] for line in block("map_pages")]
    map_index = [int(n) for n in field("map_index").split(" ")]
    class_pages = block("class_pages")
    class_index = [int(n) for n in field("class_index").split(" ")]
    order_pages = [[_order_entry(entry) for entry in line.split(" ")] for line in block("order_pages")]
    order_index = [int(n) for n in field("order_index").split(" ")]
    return Tables(unk, cls, sep, pad, prefix, max_word_chars, max_length, added, added_lengths, added_starts, vocab,
                  map_pages, map_index, class_pages, class_index, order_pages, order_index)


def load(path: Path) -> Tables:
    return read_tables(Path(path).read_text(encoding="utf-8"))


def _map_entry(entry: str) -> tuple[int, ...] | int:
    if entry == "-":
        return ()
    if entry.startswith("="):
        return tuple(int(h, 16) for h in entry[1:].split(","))
    return int(entry)


def _order_entry(entry: str) -> str | tuple[tuple[int, int], ...]:
    if entry in (STARTER, REMOVED_FIRST):
        return entry
    return tuple((int(rank), int(count)) for rank, _, count in (unit.partition(":") for unit in entry.split(",")))


def mapped(tables: Tables, code: int) -> tuple[int, ...]:
    """Step 1: the code points `code` becomes."""
    entry = tables.map_pages[tables.map_index[code >> PAGE_BITS]][code & PAGE_MASK]
    return (code + entry,) if isinstance(entry, int) else entry


def order_entry(tables: Tables, code: int) -> str | tuple[tuple[int, int], ...]:
    return tables.order_pages[tables.order_index[code >> PAGE_BITS]][code & PAGE_MASK]


def normalized(tables: Tables, text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Step 1 on text[start:end]: its normalized code points, each with the index of the input code point whose
    place it holds. Each code point's units (its decomposition's parts, each giving some of its mapped code points)
    are put in canonical order: every run of units of nonzero rank sorted by rank, stably. Then the units are read
    in order: a code point's first unit takes the next input code point's place, its other units the place of the
    one taken last (tokenizers' alignments, so offsets are tokenizer.json's where marks move)."""
    units, places = [], []  # units: (rank, the code points it gives, whether it takes the next place)
    for source in range(start, end):
        code = ord(text[source])
        entry = order_entry(tables, code)
        if entry == REMOVED_FIRST:
            continue
        places.append(source)
        codes = mapped(tables, code)
        if entry == STARTER:
            units.append((0, codes, True))
            continue
        at = 0
        for k, (rank, count) in enumerate(entry):
            units.append((rank, codes[at:at + count], k == 0))
            at += count
    run = 0
    while run < len(units):
        if units[run][0] == 0:
            run += 1
            continue
        after = run
        while after < len(units) and units[after][0] != 0:
            after += 1
        units[run:after] = sorted(units[run:after], key=lambda unit: unit[0])
        run = after
    out, taken = [], 0
    for _, codes, takes in units:
        taken += takes
        out += [(code, places[max(taken - 1, 0)]) for code in codes]
    return out


def code_class(tables: Tables, code: int) -> str:
    return tables.class_pages[tables.class_index[code >> PAGE_BITS]][code & PAGE_MASK]


def split_added(tables: Tables, text: str) -> list[tuple[int | None, int, int]]:
    """Step 0, on the raw text: (id, start, end) for each added token's exact content it holds ("[SEP]", not
    "[sep]"), (None, start, end) for the text between. At the first place where a content begins, the longest one
    that begins there; the search goes on after it, so matches never overlap."""
    parts, between, at = [], 0, 0
    while at < len(text):
        length = 0
        if text[at] in tables.added_starts:
            length = next((n for n in tables.added_lengths if at + n <= len(text) and text[at:at + n] in tables.added),
                          0)
        if length == 0:
            at += 1
            continue
        if between < at:
            parts.append((None, between, at))
        parts.append((tables.added[text[at:at + length]], at, at + length))
        at = between = at + length
    if between < len(text):
        parts.append((None, between, len(text)))
    return parts


def split_words(tables: Tables, text: str, start: int = 0, end: int | None = None) -> list[list[tuple[int, int]]]:
    """Steps 1 and 2 on text[start:end] (a part between added tokens): the words, each a list of (code point, index
    of the input code point it came from)."""
    words, word = [], []
    for code, source in normalized(tables, text, start, len(text) if end is None else end):
        kind = code_class(tables, code)
        if kind == OTHER:
            word.append((code, source))
            continue
        if word:
            words.append(word)
            word = []
        if kind == PUNCTUATION:
            words.append([(code, source)])
    if word:
        words.append(word)
    return words


def word_pieces(tables: Tables, word: list[tuple[int, int]]) -> list[Token]:
    """Step 3 and 4: greedy longest match from the left; a word too long, or with a position no piece matches, is
    one unk spanning the whole word."""
    whole = [Token(tables.unk_id, word[0][1], word[-1][1] + 1)]
    if len(word) > tables.max_word_chars:
        return whole
    chars = "".join(chr(code) for code, _ in word)
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = chars[start:end] if start == 0 else tables.prefix + chars[start:end]
            found = tables.vocab.get(piece)
            if found is not None:
                pieces.append(Token(found, word[start][1], word[end - 1][1] + 1))
                break
            end -= 1
        if end == start:
            return whole
        start = end
    return pieces


def tokenize(tables: Tables, text: str) -> list[Token]:
    """The added tokens `text` holds and the word pieces of the text between them; no [CLS] or [SEP] around."""
    tokens = []
    for added, start, end in split_added(tables, text):
        if added is not None:
            tokens.append(Token(added, start, end))
            continue
        tokens += [token for word in split_words(tables, text, start, end) for token in word_pieces(tables, word)]
    return tokens


def encode(tables: Tables, text: str, max_length: int | None = None) -> Encoding:
    """Step 5: [cls] + the first max_length - 2 pieces + [sep] (max_length None: the tables' max_length)."""
    limit = tables.max_length if max_length is None else max_length
    ids = [tables.cls_id, *(t.id for t in tokenize(tables, text)[:max(limit - 2, 0)]), tables.sep_id]
    return Encoding(ids, [0] * len(ids), [1] * len(ids))


def encode_pair(tables: Tables, first: str, second: str, max_length: int | None = None) -> Encoding:
    """[cls] first [sep] second [sep], type ids 0 then 1; the first text cut to max_length - 3 pieces, the second
    to what room is left."""
    limit = tables.max_length if max_length is None else max_length
    a = [t.id for t in tokenize(tables, first)][:max(limit - 3, 0)]
    b = [t.id for t in tokenize(tables, second)][:max(limit - 3 - len(a), 0)]
    ids = [tables.cls_id, *a, tables.sep_id, *b, tables.sep_id]
    return Encoding(ids, [0] * (len(a) + 2) + [1] * (len(b) + 1), [1] * len(ids))


def substring(text: str, start: int, end: int) -> str:
    """The text between two code-point offsets (Python strings index code points already)."""
    return text[start:end]


def program() -> list[str]:
    """The command that runs main() from this checkout, whatever the working folder (app_tokenizer_check's
    `command`)."""
    root = str(Path(__file__).resolve().parents[3])
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {root!r}); "
            "from pocketbert.export.app.tokenizer_reference import main; main()"]


def main(argv: list[str] | None = None) -> None:
    """The pocketbert-tokenize protocol: one JSON line out per line in."""
    parser = argparse.ArgumentParser(prog="pocketbert-tokenize")
    parser.add_argument("--tables", required=True, type=Path)
    parser.add_argument("--json-lines", action="store_true")
    parser.add_argument("--max-length", type=int)
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--offsets", action="store_true")
    shown.add_argument("--pairs", action="store_true", help="lines come two by two: each pair's encode_pair")
    args = parser.parse_args(argv)
    tables = load(args.tables)
    stdin = open(sys.stdin.fileno(), encoding="utf-8", newline="\n", closefd=False)
    texts = [json.loads(line) if args.json_lines else line.rstrip("\n") for line in stdin]
    limit = args.max_length or sys.maxsize

    def answer(text: str) -> dict | list:
        if args.offsets:
            tokens = tokenize(tables, text)
            return {"ids": [t.id for t in tokens], "offsets": [[t.start, t.end] for t in tokens]}
        return encode(tables, text, limit).ids

    if args.pairs:
        if len(texts) % 2:
            parser.error("--pairs: the last first text has no second")
        pairs = (encode_pair(tables, first, second, limit) for first, second in zip(texts[::2], texts[1::2]))
        answers = [{"ids": p.ids, "type_ids": p.type_ids} for p in pairs]
    else:
        answers = [answer(text) for text in texts]
    out = [json.dumps(a, separators=(",", ":")) for a in answers]
    sys.stdout.write("".join(line + "\n" for line in out))


if __name__ == "__main__":
    main()
