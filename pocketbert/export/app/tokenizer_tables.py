"""tokenizer.tables: a BERT WordPiece tokenizer.json tabulated for the apps' own tokenizers (Swift, Kotlin), found by
probing the `tokenizers` library on every code point, never from the host's Unicode data.

The file is UTF-8 text with `\\n` line ends, line by line:

    pocketbert-tokenizer-tables 3
    unk <id>
    cls <id>
    sep <id>
    pad <id>
    prefix <continuing-subword prefix, e.g. ##>
    max_word_chars <int>          (WordPiece max_input_chars_per_word: longer words become one unk)
    max_length <int>              (the model's maximum sequence length)
    added <k>
    <k lines: `<id> h,h,...`: an added token ([CLS], [SEP], [MASK] ...), its id and its exact content as code points
     (hex); the text is split where it holds one, before the normalizer sees it>
    vocab <n>
    <n lines: token i, in id order; no token holds \\n or \\r>
    map_pages <p>
    <p lines: 256 space-separated entries for code points page*256 .. page*256+255:
       an integer d  -> the code point becomes the single code point c+d (0 = itself);
       `-`           -> the code point is removed;
       `=h,h,...`    -> the code point becomes these code points (hex), e.g. `=20,4E00,20` for CJK padding>
    map_index <one line: 4352 space-separated page numbers, page k of the code space uses map_pages[number]>
    class_pages <q>
    <q lines: 256 characters each, one per code point: `o` other (part of a word), `w` whitespace (splits, dropped),
     `p` punctuation (a word of its own)>
    class_index <one line: 4352 space-separated page numbers>
    order_pages <r>
    <r lines: 256 space-separated entries: how the code point takes part in the normalizer's canonical ordering
     of combining marks (tokenizer_probes.canonical_order):
       `.`           -> one unit of class 0 giving all its mapped code points (nearly every code point);
       `-`           -> removed before the ordering: the marks on either side of it meet;
       `r:n,r:n,...` -> its decomposition's units in order, each its rank (0: a starter; marks sort by rank, stably)
                        and how many of its mapped code points it gives>
    order_index <one line: 4352 space-separated page numbers>

Identical pages are stored once. The map is the normalizer's output for each code point alone; the class is the
pre-tokenizer's for each code point the normalizer can put out. tokenizer_reference.py reads the file back and is
the specification the Swift and Kotlin tokenizers transcribe.
"""

from __future__ import annotations

import hashlib
import json
from importlib.metadata import version
from pathlib import Path

from pocketbert.core.run.cache_dir import cache_root
from pocketbert.core.errors import ExportError
from pocketbert.export.checks import tokenizer_probes
from pocketbert.export.checks.tokenizer_probes import (CODE_SPACE, DROP, KEEP, SEPARATE, SPLIT, STARTER,
                                                       canonical_order, code_points, normalizer_rows, word_classes)

MAGIC = "pocketbert-tokenizer-tables 3"
PAGE = 256
PAGES = CODE_SPACE // PAGE
CLASS_LETTERS = {KEEP: "o", SEPARATE: "w", SPLIT: "p"}
CACHE_FOLDER = "tokenizer-app-tables"
REFUSED = "the app tokenizer reads BERT WordPiece tokenizers only; use swift-transformers or the tokenizers library"
# An added token matched anywhere but in the raw text, or taking the spaces beside it, is tokenizers' to give.
UNSUPPORTED_ADDED = {"normalized": "matched on the normalized text", "lstrip": "taking the spaces on its left",
                     "rstrip": "taking the spaces on its right", "single_word": "matched as a whole word only"}


def bert_special_ids(data: dict) -> dict[str, int]:
    """unk, cls, sep, pad ids of a tokenizer.json that is the BERT WordPiece pipeline (BertNormalizer,
    BertPreTokenizer, WordPiece, [CLS] A [SEP] / [CLS] A [SEP] B [SEP]); ExportError for any other."""
    def part(key: str) -> dict:
        return data.get(key) or {}

    model = part("model")
    found = {"normalizer": part("normalizer").get("type"), "pre_tokenizer": part("pre_tokenizer").get("type"),
             "model": model.get("type")}
    wanted = {"normalizer": "BertNormalizer", "pre_tokenizer": "BertPreTokenizer", "model": "WordPiece"}
    for key, want in wanted.items():
        if found[key] != want:
            raise ExportError(f"tokenizer.json's {key} is {found[key]}, not {want}: {REFUSED}")
    vocab = model.get("vocab") or {}
    cls, sep = _template_specials(part("post_processor"), vocab)
    unk = vocab.get(model.get("unk_token", "[UNK]"))
    pad = (data.get("padding") or {}).get("pad_id", vocab.get("[PAD]"))
    if unk is None or pad is None:
        raise ExportError(f"tokenizer.json's vocabulary lacks its unknown or padding token: {REFUSED}")
    return {"unk": int(unk), "cls": cls, "sep": sep, "pad": int(pad)}


def _template_specials(processor: dict, vocab: dict) -> tuple[int, int]:
    """(cls, sep) of a BertProcessing or a TemplateProcessing that frames as BERT does."""
    if processor.get("type") == "BertProcessing":
        return int(processor["cls"][1]), int(processor["sep"][1])

    def shape(items: list) -> list:
        return [(("S", i["SpecialToken"]["id"], i["SpecialToken"]["type_id"]) if "SpecialToken" in i else
                 ("A", i["Sequence"]["id"], i["Sequence"]["type_id"])) for i in items]

    if processor.get("type") == "TemplateProcessing":
        single, pair = shape(processor.get("single", [])), shape(processor.get("pair", []))
        if len(single) == 3 and single[0][0] == "S" == single[2][0]:
            cls, sep = single[0][1], single[2][1]
            if (single == [("S", cls, 0), ("A", "A", 0), ("S", sep, 0)]
                    and pair == [("S", cls, 0), ("A", "A", 0), ("S", sep, 0), ("A", "B", 1), ("S", sep, 1)]):
                specials = processor.get("special_tokens", {})
                ids = [specials.get(name, {}).get("ids") or [vocab.get(name)] for name in (cls, sep)]
                if all(len(i) == 1 and i[0] is not None for i in ids):
                    return int(ids[0][0]), int(ids[1][0])
    raise ExportError(f"tokenizer.json's post-processor does not frame texts as [CLS] A [SEP] B [SEP]: {REFUSED}")


def tables_text(data: dict, max_length: int) -> str:
    """The tables of tokenizer.json `data` for a model that reads at most `max_length` tokens."""
    specials = bert_special_ids(data)
    model = data["model"]
    added = added_tokens(data)
    tokens = _vocabulary_lines(model["vocab"])
    maps, classes, order = code_point_tables(data)
    map_pages, map_index = _paged(maps)
    order_pages, order_index = _paged(order)
    class_pages, class_index = _paged([classes[k:k + PAGE] for k in range(0, CODE_SPACE, PAGE)], whole=True)
    lines = [MAGIC, *(f"{name} {specials[name]}" for name in ("unk", "cls", "sep", "pad")),
             f"prefix {model.get('continuing_subword_prefix', '##')}",
             f"max_word_chars {int(model.get('max_input_chars_per_word', 100))}", f"max_length {int(max_length)}",
             f"added {len(added)}", *(f"{i} " + ",".join(f"{ord(c):X}" for c in content) for i, content in added),
             f"vocab {len(tokens)}", *tokens,
             f"map_pages {len(map_pages)}", *map_pages, "map_index " + " ".join(map(str, map_index)),
             f"class_pages {len(class_pages)}", *class_pages, "class_index " + " ".join(map(str, class_index)),
             f"order_pages {len(order_pages)}", *order_pages, "order_index " + " ".join(map(str, order_index))]
    return "\n".join(lines) + "\n"


def write_tables(tokenizer_json: Path, out: Path, max_length: int | None = None) -> Path:
    """tokenizer.tables for tokenizer.json at `out`; max_length defaults to where tokenizer.json truncates."""
    data = json.loads(Path(tokenizer_json).read_text(encoding="utf-8"))
    if max_length is None:
        max_length = (data.get("truncation") or {}).get("max_length")
        if max_length is None:
            raise ExportError(f"{tokenizer_json} does not truncate: pass the model's max_length")
    Path(out).write_text(tables_text(data, int(max_length)), encoding="utf-8", newline="\n")
    return Path(out)


def added_tokens(data: dict) -> list[tuple[int, str]]:
    """(id, content) of each token tokenizer.json adds, by id, as the `tokenizers` library loads them (its ids, not
    the file's, where they differ); ExportError for one the app tokenizer cannot match as tokenizers does."""
    from tokenizers import Tokenizer

    loaded = Tokenizer.from_str(json.dumps({**data, "truncation": None, "padding": None})).get_added_tokens_decoder()
    for token in loaded.values():
        refused = [what for flag, what in UNSUPPORTED_ADDED.items() if getattr(token, flag)]
        if refused:
            raise ExportError(f"tokenizer.json's added token {token.content!r} is {refused[0]}, which the app "
                              f"folders' tokenizer does not implement: save it with normalized=False, lstrip, rstrip "
                              f"and single_word False, or use swift-transformers or the tokenizers library")
    contents = [token.content for token in loaded.values()]
    if len(set(contents)) != len(contents):
        raise ExportError("tokenizer.json adds one content under two ids: re-save the tokenizer")
    return sorted((int(i), token.content) for i, token in loaded.items())


def _vocabulary_lines(vocab: dict[str, int]) -> list[str]:
    by_id = sorted(vocab.items(), key=lambda item: item[1])
    if [i for _, i in by_id] != list(range(len(by_id))):
        raise ExportError("tokenizer.json's vocabulary ids are not 0..n-1 without gaps: re-save the tokenizer")
    bad = [token for token, _ in by_id if "\n" in token or "\r" in token or token == ""]
    if bad:
        raise ExportError(f"tokenizer.json's vocabulary holds {bad[0]!r} (empty, or a line break), which the tables "
                          "cannot write: use swift-transformers or the tokenizers library")
    return [token for token, _ in by_id]


def code_point_tables(data: dict) -> tuple[list[list[str]], str, list[list[str]]]:
    """(map entries by page: 256 strings each, a class letter per code point, ordering entries by page), probed once
    a machine for each normalizer and pre-tokenizer (kept in the cache folder)."""
    from pocketbert.export.text_in.text_tokenizer import cached_or_built

    rules = json.dumps({key: data.get(key) for key in ("normalizer", "pre_tokenizer")}, sort_keys=True)
    key = hashlib.sha256(b"\0".join([rules.encode(), Path(__file__).read_bytes(),
                                     Path(tokenizer_probes.__file__).read_bytes(),
                                     version("tokenizers").encode()])).hexdigest()[:32]
    found = cached_or_built(cache_root() / CACHE_FOLDER / f"{key}.json", json.loads, lambda: _probed(data))
    return found["maps"], found["classes"], found["order"]


def _probed(data: dict) -> dict:
    from tokenizers import Tokenizer

    reference = Tokenizer.from_str(json.dumps({**data, "truncation": None, "padding": None}))
    rows = normalizer_rows(reference)
    entries = [_map_entry(c, rows.get(c, (c,))) for c in range(CODE_SPACE)]
    classes = word_classes(lambda text: [w for w, _ in reference.pre_tokenizer.pre_tokenize_str(text)],
                           list(code_points()), REFUSED)
    dropped = [c for c, kind in classes.items() if kind == DROP]
    if dropped:
        raise ExportError(f"tokenizer.json's pre-tokenizer drops U+{dropped[0]:04X} inside a word: {REFUSED}")
    order = canonical_order(reference, rows)
    order_entries = [_order_entry(order.get(c, STARTER)) for c in range(CODE_SPACE)]
    return {"maps": [entries[k:k + PAGE] for k in range(0, CODE_SPACE, PAGE)],
            "classes": "".join(CLASS_LETTERS[classes[c]] if c in classes else "o" for c in range(CODE_SPACE)),
            "order": [order_entries[k:k + PAGE] for k in range(0, CODE_SPACE, PAGE)]}


def _order_entry(entry: str | tuple[tuple[int, int], ...]) -> str:
    return entry if isinstance(entry, str) else ",".join(f"{rank}:{count}" for rank, count in entry)


def _map_entry(code: int, out: tuple[int, ...]) -> str:
    if not out:
        return "-"
    if len(out) == 1:
        return str(out[0] - code)
    return "=" + ",".join(f"{o:X}" for o in out)


def _paged(pages: list, whole: bool = False) -> tuple[list[str], list[int]]:
    """(each distinct page's line, the page number each page of the code space uses)."""
    lines, numbers, index = [], {}, []
    for page in pages:
        line = page if whole else " ".join(page)
        if line not in numbers:
            numbers[line] = len(lines)
            lines.append(line)
        index.append(numbers[line])
    return lines, index
