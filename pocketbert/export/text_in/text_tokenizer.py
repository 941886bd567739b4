"""A WordPiece tokenizer as an ONNX graph (onnxruntime-extensions ops), giving tokenizer.json's ids and, on demand,
each token's code-point offsets in its text.

Only ops of the extensions' groups the published Android package carries (onnxruntime-extensions-android: the
BERT and GPT-2 tokenizer groups) and standard ONNX ops are used:
- normalizing: GPT2Tokenizer with one token per byte and no merges turns the text into its UTF-8 bytes; standard
  ops decode them into code points, map each through a table of all 1,114,112 code points (text_in/
  text_normalization.py: tokenizer.json's own normalizer, and what makes the ops below split and piece words as
  tokenizer.json does) and encode the result; BpeDecoder turns those bytes back into a string;
- BasicTokenizer splits the normalized string into words (at spaces; punctuation apart);
- a Loop runs BertTokenizer on two words at a time (its pair: [CLS] a [SEP] b [SEP]), reframed after the loop so
  that each word's ids stand between a [CLS] and a [SEP]. Run on a whole text, its WordPiece keeps the pieces it
  matched before a piece missing from the vocabulary ("great😀" -> great [UNK]); tokenizer.json makes such a word
  one [UNK], and so do the nodes after the loop, on every word at once from the frames. The loop stops once the
  window is full, so a long text costs a window of it;
- offsets: the extensions' own offset_mapping is computed from token lengths, not from the text, so GPT2Tokenizer
  gives each word's size in bytes, and the nodes after the loop take each word to start at the first byte after the
  previous word that is not a space (only spaces lie between two words), give its pieces the normalized code points
  they cover, and the table says which code point of the text each came from;
- Slice and Concat truncate as tokenizer.json does: [CLS] first and [SEP] last also when truncated; for a pair,
  only the second text (the QA context) is cut.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

from pocketbert.core.errors import ExportError, require
from pocketbert.export.text_in.session import text_session
from pocketbert.export.checks.tokenizer_probes import halved_down
from pocketbert.export.text_in.text_normalization import (NO_CODE_POINT, OPS_SETTINGS, PAGE, RANK_SPAN,
                                                         CodePointMapping, derive)

CONTRIB = "ai.onnx.contrib"
PREFIX = "tokenizer/"
# GPT2Tokenizer always knows this special token (id 256 in the byte vocabulary): where a text spells it, its bytes
# are put back.
GPT2_SPECIAL = "<|endoftext|>"
GPT2_SPECIAL_ID = 256
MISSING = -1  # a byte that matches nothing: the end of every text's bytes
BMP = 0x10000
MIN_OPSET = 13  # ReduceSum with its axes as an input
MAPPING_CACHE_FOLDER = "tokenizer-tables"
RULE_KEYS = ("normalizer", "pre_tokenizer", "model", "added_tokens", "post_processor")  # truncation etc. aside
WORDS_PER_PROBE_TEXT = 200  # loop-carried outputs grow by copying: short texts run fastest
UNBOUNDED = 1 << 40  # a probe graph's window: never reached
PROBE_THREADS = 2
GOLDEN_OPSET = 17  # the tokenizer graph checked on its own
# Word sizes for offsets come from GPT2Tokenizer this many words a call, after the word loop (which so runs
# BertTokenizer alone): a call's tokens are padded to its longest word, so an overlong word costs this many times its
# bytes (x 8), not a whole text's worth.
WORDS_PER_SIZE_CALL = 16
# BertTokenizer takes two texts at most (a pair: [CLS] a [SEP] b [SEP]); two words a call halve the word loop's
# iterations, which cost more than the op's work on a word.
WORDS_PER_CALL = 2


@lru_cache(maxsize=1)
def _byte_vocabulary() -> str:
    """GPT-2's byte-level vocabulary reduced to one token per byte (id = the byte's value), as JSON."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    shown = {b: chr(b) for b in printable} | {b: chr(256 + k) for k, b in enumerate(others)}
    return json.dumps({shown[b]: b for b in range(256)} | {GPT2_SPECIAL: GPT2_SPECIAL_ID}, ensure_ascii=False)


def cache_entry(folder: str, *parts: bytes) -> Path:
    """The cache file for `parts` as this version of the tokenizer graph's code, the ops and tokenizers read them."""
    import hashlib
    from importlib.metadata import version

    from pocketbert.core.run.cache_dir import cache_root
    from pocketbert.export.text_in import text_normalization

    code = Path(__file__).read_bytes() + Path(text_normalization.__file__).read_bytes()
    key = hashlib.sha256(b"\0".join([*parts, code, version("onnxruntime-extensions").encode(),
                                     version("tokenizers").encode()])).hexdigest()[:32]
    return cache_root() / folder / f"{key}.json"


def write_cache_entry(path: Path, value: dict) -> None:
    """Written whole or not at all; a cache folder that cannot be written costs the work again next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(value), encoding="utf-8")
        temporary.replace(path)
    except OSError:
        pass


def cached_or_built(path: Path, read, build, keep=lambda value: True, dump=lambda value: value):
    """read(text) of the cache file at `path`, or build(), written there as dump(value) when keep(value). One
    process builds while another that wants the same entry waits for it (two exports at once, two test workers),
    where the cache folder can hold the lock; a damaged entry is built again."""
    from contextlib import nullcontext

    from pocketbert.core.run.cache_dir import building

    def cached():
        try:
            return read(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError, TypeError):
            return None  # none yet, or damaged

    value = cached()
    if value is not None:
        return value
    try:
        lock = building(path)
        lock.__enter__()
    except OSError:  # a cache folder that cannot be written: build without waiting for anyone
        lock = nullcontext()
    try:
        value = cached()
        if value is None:
            value = build()
            if keep(value):
                write_cache_entry(path, dump(value))
    finally:
        lock.__exit__(None, None, None)
    return value



@lru_cache(maxsize=4)
def _mapping(tokenizer_rules: str) -> CodePointMapping:
    """Derived once a machine for each tokenizer and version of this code: read from the cache folder after."""
    data = {"version": "1.0", "truncation": None, "padding": None, "decoder": None, **json.loads(tokenizer_rules)}
    return cached_or_built(cache_entry(MAPPING_CACHE_FOLDER, tokenizer_rules.encode()),
                           lambda text: CodePointMapping.from_json(json.loads(text)),
                           lambda: derive(data, lambda mapping, codes: misread_in_words(data, mapping, codes)),
                           dump=lambda mapping: mapping.to_json())


def mapping_for(data: dict) -> CodePointMapping:
    """The code-point table of tokenizer.json `data`, derived once a machine for the parts of it the table depends
    on (truncation, padding and the like change nothing)."""
    return _mapping(tokenizer_rules(data))


def tokenizer_rules(data: dict) -> str:
    """The parts of tokenizer.json that decide ids, types and offsets, as JSON in the file's own order: the key of
    what is derived from them (the same file spells the same text; sorting a 30,000-token vocabulary took four times
    as long as the dump, on every graph an export builds)."""
    return json.dumps({key: data.get(key) for key in RULE_KEYS}, ensure_ascii=False)


def misread_in_words(data: dict, mapping: CodePointMapping, codes: list[int]) -> list[int]:
    """The code points c for which the graph built with `mapping` gives the word x<c>y other ids than tokenizer.json
    (the texts are checked whole, and halved down to the code points where they differ)."""
    import numpy as np
    from tokenizers import Tokenizer

    reference = Tokenizer.from_str(json.dumps(data))
    reference.no_truncation()
    reference.no_padding()
    graph = probe_graph(data, ("text",), offsets=False, mapping=mapping)
    session = text_session(graph.SerializeToString(), threads=1)

    def differs(chunk: list[int]) -> str | None:
        text = " ".join(f"x{chr(c)}y" for c in chunk).replace("\0", "")
        got = session.run([PREFIX + "input_ids"], {"text": np.array([text], dtype=object)})[0].tolist()
        return "ids" if got != reference.encode(text).ids else None

    def narrowed(chunk: list[int]) -> list[int]:
        return [c for c, _ in halved_down(chunk, differs)]

    from concurrent.futures import ThreadPoolExecutor

    chunks = [codes[start:start + WORDS_PER_PROBE_TEXT] for start in range(0, len(codes), WORDS_PER_PROBE_TEXT)]
    with ThreadPoolExecutor(PROBE_THREADS) as pool:
        return [c for found in pool.map(narrowed, chunks) for c in found]


def _vocabulary(data: dict, mapping: CodePointMapping | None) -> tuple[str, dict, list[int]]:
    """The vocabulary one token a line in id order, the graph's constants, and each token's length in characters
    of the word it covers (0 for [UNK], which covers a whole word), from tokenizer.json."""
    model = data.get("model") or {}
    if model.get("type") != "WordPiece":
        raise ExportError("a text-in model needs a WordPiece tokenizer.json (BERT family); export this model's "
                          "token-id graphs only")
    vocab = model["vocab"]
    ordered = sorted(vocab.items(), key=lambda item: item[1])
    if [i for _, i in ordered] != list(range(len(ordered))):
        raise ExportError("tokenizer.json's vocabulary ids are not 0..n-1: re-save the tokenizer with transformers")
    unk_token = model.get("unk_token", "[UNK]")
    prefix = model.get("continuing_subword_prefix", "##")
    constants = {"unk": vocab[unk_token], "cls": vocab["[CLS]"], "sep": vocab["[SEP]"], "prefix": prefix,
                "mapping": mapping or mapping_for(data)}
    chars = [0 if token == unk_token else len(token[len(prefix):] if token.startswith(prefix) and token != prefix
                                                 else token) for token, _ in ordered]
    return "\n".join(token for token, _ in ordered), constants, chars


class _Nodes:
    """The nodes of one graph (the tokenizer's, or a loop body's), each output named uniquely under a tag."""

    def __init__(self, helper, tag: str):
        self.helper, self.tag, self.list, self.count = helper, tag, [], 0

    def __call__(self, op: str, inputs: list[str], n_out: int = 1, domain: str = "", **attributes):
        self.count += 1
        outputs = [f"{self.tag}{op.lower()}_{self.count}_{k}" for k in range(n_out)]
        self.list.append(self.helper.make_node(op, inputs, outputs, name=f"{self.tag}{op}_{self.count}",
                                               domain=domain, **attributes))
        return outputs[0] if n_out == 1 else outputs


class _Builder:
    """The tokenizer graph's nodes and initializers; loop bodies read the initializers from the outer scope."""

    def __init__(self, vocab: str, constants: dict, chars: list[int], offsets: bool):
        require("onnx", "export")
        from onnx import TensorProto, helper

        self.helper, self.T = helper, TensorProto
        self.vocab, self.constants = vocab, constants
        self.n = _Nodes(helper, PREFIX)
        self.initializers, self.subgraphs = [], 0
        for name, values in (("zero", [0]), ("one", [1]), ("minus_one", [-1]), ("unk", [constants["unk"]]),
                             ("cls", [constants["cls"]]), ("sep", [constants["sep"]]), ("no_ids", []),
                             ("missing", [MISSING]), ("special", [GPT2_SPECIAL_ID]),
                             ("special_bytes", list(GPT2_SPECIAL.encode())), ("first_continuation", [0x80]),
                             ("first_lead", [0xC0])):
            self.int64(name, values)
        for name, value in (("zero_scalar", 0), ("one_scalar", 1)):
            self.initializers.append(helper.make_tensor(PREFIX + name, TensorProto.INT64, [], [value]))
        self.initializers.append(helper.make_tensor(PREFIX + "true", TensorProto.BOOL, [], [True]))
        self.initializers.append(helper.make_tensor(PREFIX + "false", TensorProto.BOOL, [1], [False]))
        self.int64("max_index", [UNBOUNDED])
        self.int64("words_per_size_call", [WORDS_PER_SIZE_CALL])
        self.int64("words_per_call", [WORDS_PER_CALL])
        if offsets:
            self.int64("piece_chars", chars)
        for name, value in (("space", 0x20), ("lead3", 0xE0), ("lead4", 0xF0), ("p6", 64), ("p6x2", 0x80),
                            ("p12", 4096), ("p18", 262144), ("u800", 0x800), ("bmp", BMP),
                            ("no_code_point", NO_CODE_POINT), *((f"k{k}", k) for k in range(4))):
            self.int64(name, [value])
        self.int64("zeros3", [0, 0, 0])
        self.int64("k0123", [0, 1, 2, 3])
        from onnx import numpy_helper

        mapping = constants["mapping"]
        page_index, absolute, relative = mapping.page_tables()
        order_page_index, order_ranks, order_counts = mapping.order_tables()
        for name, array in (("page_index", page_index), ("absolute", absolute), ("relative", relative),
                            ("order_page_index", order_page_index), ("order_ranks", order_ranks),
                            ("order_counts", order_counts)):
            self.initializers.append(numpy_helper.from_array(array, PREFIX + name))
        self.int64("page", [PAGE])
        self.int64("width", [mapping.width])
        self.int64("last_column", [mapping.width - 1])
        self.int64("row_columns", list(range(mapping.width)))
        self.int64("first_unit", [1] + [0] * (order_ranks.shape[1] - 1))
        self.int64("rank_span", [RANK_SPAN])

    def int64(self, name: str, values: list[int]) -> str:
        self.initializers.append(self.helper.make_tensor(PREFIX + name, self.T.INT64, [len(values)], values))
        return PREFIX + name

    def subgraph(self, what: str) -> tuple[_Nodes, str]:
        self.subgraphs += 1
        tag = f"{PREFIX}{what}{self.subgraphs}/"
        return _Nodes(self.helper, tag), tag

    def calls_for(self, words: str, per_call: str, n: _Nodes) -> str:
        """The calls of `per_call` words that read `words` words (both [1] int64): their quotient rounded up."""
        return n("Div", [n("Add", [words, n("Sub", [per_call, PREFIX + "one"])]), per_call])

    def graph(self, nodes: _Nodes, name: str, inputs: list[tuple[str, int, list]],
              outputs: list[tuple[str, int, list]]):
        vi = self.helper.make_tensor_value_info
        return self.helper.make_graph(nodes.list, name, [vi(*i) for i in inputs], [vi(*o) for o in outputs])

    def branch(self, source: str, name: str):
        """A branch of an If that returns `source`, a 1-D int64 tensor of the outer scope."""
        nodes, tag = self.subgraph(name)
        out = nodes("Identity", [source])
        return self.graph(nodes, tag + name, [], [(out, self.T.INT64, [None])])

    def utf8(self, text: str, n: _Nodes, restore_special: bool) -> str:
        """A [1] string tensor -> its UTF-8 bytes (1-D int64). restore_special: spelled GPT2_SPECIAL comes back as
        its bytes (a word never holds it: BasicTokenizer splits its brackets and bar off)."""
        ids = n("GPT2Tokenizer", [text], domain=CONTRIB, vocab=_byte_vocabulary(), merges="#version: 0.2\n")
        flat = n("Reshape", [ids, PREFIX + "minus_one"])
        if not restore_special:
            return flat
        padded = n("Concat", [flat, PREFIX + "zero"], axis=0)  # never empty: ReduceMax needs an element
        spelled = n("Cast", [n("ReduceMax", [n("Cast", [n("Equal", [padded, PREFIX + "special"])], to=self.T.INT64)],
                               keepdims=0)], to=self.T.BOOL)
        body, tag = self.subgraph("restore_special")
        byte = body("Gather", [flat, body("Unsqueeze", [tag + "i", PREFIX + "zero"])], axis=0)
        is_special = body("Squeeze", [body("Equal", [byte, PREFIX + "special"]), PREFIX + "zero"])
        spelled_out = body("If", [is_special], then_branch=self.branch(PREFIX + "special_bytes", "spelled"),
                           else_branch=self.branch(byte, "byte"))
        acc = body("Concat", [tag + "acc", spelled_out], axis=0)
        keep = body("Identity", [tag + "cond"])
        T = self.T
        loop_body = self.graph(body, tag + "body", [(tag + "i", T.INT64, []), (tag + "cond", T.BOOL, []),
                                                    (tag + "acc", T.INT64, [None])],
                               [(keep, T.BOOL, []), (acc, T.INT64, [None])])
        then_nodes, then_tag = self.subgraph("bytes_restored")
        count = then_nodes("Squeeze", [then_nodes("Shape", [flat]), PREFIX + "zero"])
        restored = then_nodes("Loop", [count, PREFIX + "true", PREFIX + "no_ids"], body=loop_body)
        then_graph = self.graph(then_nodes, then_tag + "graph", [], [(restored, T.INT64, [None])])
        return n("If", [spelled], then_branch=then_graph, else_branch=self.branch(flat, "bytes_as_they_are"))

    def normalized(self, text: str) -> tuple[str, str, str | None]:
        """A [1] string tensor -> (the table's output as a [1] string tensor, its UTF-8 bytes, and for each of its
        code points the index of the text's code point it came from, one more at the end). The normalized string
        always ends with a space: the string decoder needs one byte at least."""
        n, T, zero, one = self.n, self.T, PREFIX + "zero", PREFIX + "one"
        utf8 = self.utf8(text, n, restore_special=True)
        # UTF-8 -> code points: each lead byte with the continuation bytes after it (at most three).
        padded = n("Concat", [utf8, PREFIX + "zeros3"], axis=0)
        leads = n("Squeeze", [n("NonZero", [self.starts_of_characters(utf8, n)]), zero])
        lead, *tail = (n("Gather", [padded, n("Add", [leads, PREFIX + f"k{k}"])], axis=0) for k in range(4))
        low6 = [n("Sub", [byte, PREFIX + "first_continuation"]) for byte in tail]
        two = n("Add", [n("Mul", [n("Sub", [lead, PREFIX + "first_lead"]), PREFIX + "p6"]), low6[0]])
        three = n("Add", [n("Add", [n("Mul", [n("Sub", [lead, PREFIX + "lead3"]), PREFIX + "p12"]),
                                    n("Mul", [low6[0], PREFIX + "p6"])]), low6[1]])
        four = n("Add", [n("Add", [n("Add", [n("Mul", [n("Sub", [lead, PREFIX + "lead4"]), PREFIX + "p18"]),
                                             n("Mul", [low6[0], PREFIX + "p12"])]),
                                   n("Mul", [low6[1], PREFIX + "p6"])]), low6[2]])
        code = n("Where", [n("Less", [lead, PREFIX + "first_continuation"]), lead,
                           n("Where", [n("Less", [lead, PREFIX + "lead3"]), two,
                                       n("Where", [n("Less", [lead, PREFIX + "lead4"]), three, four])])])
        # Each code point's row of the paged table: absolute + relative * code point.
        row = n("Add", [n("Mul", [n("Cast", [n("Gather", [PREFIX + "page_index",
                                                          n("Div", [code, PREFIX + "page"])], axis=0)], to=T.INT64),
                                  PREFIX + "page"]),
                        n("Mod", [code, PREFIX + "page"])])
        absolute = n("Cast", [n("Gather", [PREFIX + "absolute", row], axis=0)], to=T.INT64)
        relative = n("Cast", [n("Gather", [PREFIX + "relative", row], axis=0)], to=T.INT64)
        rows = n("Add", [absolute, n("Mul", [relative, n("Unsqueeze", [code, one])])])
        normalized, origin = self.canonically_ordered(code, rows)
        spaced = n("Concat", [self.encoded(normalized), PREFIX + "space"], axis=0)
        return self.decoded(spaced), spaced, origin

    def canonically_ordered(self, code: str, rows: str) -> tuple[str, str]:
        """(the normalized code points, and for each the index of the text's code point whose place it holds, one
        more at the end) from the text's code points and their table rows [n, width]. Each code point's units (the
        order table) are sorted as the normalizer orders marks: a stable sort of each run of units of nonzero rank
        by rank, here one TopK on (run, rank, place in the text). Read in that order, a code point's first unit
        takes the next place, its other units the place taken last (tokenizers' alignments: where a mark overtakes
        a kept mark, the kept mark's offset moves)."""
        n, T, zero, one = self.n, self.T, PREFIX + "zero", PREFIX + "one"
        minus_one, zero_scalar, one_scalar = PREFIX + "minus_one", PREFIX + "zero_scalar", PREFIX + "one_scalar"
        row = n("Add", [n("Mul", [n("Cast", [n("Gather", [PREFIX + "order_page_index",
                                                          n("Div", [code, PREFIX + "page"])], axis=0)], to=T.INT64),
                                  PREFIX + "page"]),
                        n("Mod", [code, PREFIX + "page"])])
        ranks = n("Cast", [n("Gather", [PREFIX + "order_ranks", row], axis=0)], to=T.INT64)  # [n, units]
        counts = n("Cast", [n("Gather", [PREFIX + "order_counts", row], axis=0)], to=T.INT64)
        has = n("GreaterOrEqual", [ranks, zero])
        flat_has = n("Reshape", [has, minus_one])
        places = n("Reshape", [n("NonZero", [n("Reshape", [n("Gather", [has, zero], axis=1), minus_one])]), minus_one])

        def units(grid: str) -> str:
            return n("Compress", [n("Reshape", [grid, minus_one]), flat_has], axis=0)

        count = n("Squeeze", [n("Shape", [code]), zero])
        owner = units(n("Expand", [n("Unsqueeze", [n("Range", [zero_scalar, count, one_scalar]), one]),
                                   n("Shape", [ranks])]))
        first = units(n("Expand", [n("Unsqueeze", [PREFIX + "first_unit", zero]), n("Shape", [ranks])]))
        rank, given = units(ranks), units(counts)
        skipped = units(n("CumSum", [counts, one_scalar], exclusive=1))
        # the sort key (run, rank, place): a run of marks belongs to the starter before it
        run = n("CumSum", [n("Cast", [n("Equal", [rank, zero])], to=T.INT64), zero_scalar])
        total = n("Shape", [rank])
        key = n("Add", [n("Mul", [n("Add", [n("Mul", [run, PREFIX + "rank_span"]), rank]), total]),
                        n("Range", [zero_scalar, n("Squeeze", [total, zero]), one_scalar])])
        _, order = n("TopK", [key, total], 2, largest=0, sorted=1)
        taken = n("CumSum", [n("Gather", [first, order], axis=0), zero_scalar])
        source = n("Gather", [places, n("Max", [n("Sub", [taken, one]), zero])], axis=0)
        # each unit's code points: its slice of its code point's row
        column = n("Add", [n("Unsqueeze", [n("Gather", [skipped, order], axis=0), one]),
                           n("Unsqueeze", [PREFIX + "row_columns", zero])])
        within = n("And", [n("Less", [n("Unsqueeze", [PREFIX + "row_columns", zero]),
                                      n("Unsqueeze", [n("Gather", [given, order], axis=0), one])]),
                           n("Less", [column, PREFIX + "width"])])
        at = n("Add", [n("Mul", [n("Unsqueeze", [n("Gather", [owner, order], axis=0), one]), PREFIX + "width"]),
                       n("Min", [column, PREFIX + "last_column"])])
        codes = n("Gather", [n("Reshape", [rows, minus_one]), n("Reshape", [at, minus_one])], axis=0)
        kept = n("And", [n("Reshape", [within, minus_one]),
                         n("Not", [n("Equal", [codes, PREFIX + "no_code_point"])])])
        sources = n("Reshape", [n("Expand", [n("Unsqueeze", [source, one]), n("Shape", [at])]), minus_one])
        origin = n("Concat", [n("Compress", [sources, kept], axis=0), n("Shape", [code])], axis=0)
        return n("Compress", [codes, kept], axis=0), origin

    def encoded(self, code: str) -> str:
        """Code points (1-D int64) -> their UTF-8 bytes."""
        n = self.n

        def byte(shift: str | None, lead: str | None) -> str:
            """(code >> 6*shift) & 63, plus the lead marker (or 0x80 for a continuation byte)."""
            value = n("Div", [code, PREFIX + shift]) if shift else code
            return n("Add", [n("Mod", [value, PREFIX + "p6"]), PREFIX + (lead or "first_continuation")])

        one_byte = code
        two = [n("Add", [n("Div", [code, PREFIX + "p6"]), PREFIX + "first_lead"]), byte(None, None)]
        three = [n("Add", [n("Div", [code, PREFIX + "p12"]), PREFIX + "lead3"]), byte("p6", None), byte(None, None)]
        four = [n("Add", [n("Div", [code, PREFIX + "p18"]), PREFIX + "lead4"]), byte("p12", None), byte("p6", None),
                byte(None, None)]
        size = n("Add", [n("Add", [n("Add", [PREFIX + "one", n("Cast", [n("GreaterOrEqual", [code, PREFIX + "p6x2"])],
                                                                 to=self.T.INT64)]),
                                   n("Cast", [n("GreaterOrEqual", [code, PREFIX + "u800"])], to=self.T.INT64)]),
                         n("Cast", [n("GreaterOrEqual", [code, PREFIX + "bmp"])], to=self.T.INT64)])
        columns = []
        for k in range(4):
            choices = [one_byte if k == 0 else PREFIX + "zero", two[k] if k < 2 else PREFIX + "zero",
                       three[k] if k < 3 else PREFIX + "zero", four[k]]
            column = choices[3]
            for width in (3, 2, 1):
                column = n("Where", [n("Equal", [size, PREFIX + f"k{width}"]), choices[width - 1], column])
            columns.append(n("Unsqueeze", [column, PREFIX + "one"]))
        matrix = n("Concat", columns, axis=1)
        used = n("Less", [n("Unsqueeze", [PREFIX + "k0123", PREFIX + "zero"]), n("Unsqueeze", [size, PREFIX + "one"])])
        return n("Compress", [n("Reshape", [matrix, PREFIX + "minus_one"]),
                              n("Reshape", [used, PREFIX + "minus_one"])], axis=0)

    def decoded(self, utf8: str) -> str:
        """UTF-8 bytes (1-D int64, not empty, no NUL: the decoder ends its string there) -> the string they spell,
        shape [1] (BpeDecoder with one token per byte)."""
        shown = json.loads(_byte_vocabulary())
        by_byte = {b: s for s, b in shown.items() if b < 256}
        return self.n("BpeDecoder", [utf8], domain=CONTRIB, id_vocab="\n".join(by_byte[b] for b in range(256)),
                      byte_decoder="\n".join(f"{ord(by_byte[b])}\t{b}" for b in range(256)))

    def starts_of_characters(self, utf8: str, n: _Nodes) -> str:
        """1 where a byte starts a code point (not a continuation byte 0b10xxxxxx), else 0."""
        starts = n("Or", [n("Less", [utf8, PREFIX + "first_continuation"]),
                          n("GreaterOrEqual", [utf8, PREFIX + "first_lead"])])
        return n("Cast", [starts], to=self.T.INT64)

    def word_pieces(self, text: str, limit: str, offsets: bool) -> tuple[str, str | None, str | None]:
        """A [1] string tensor -> the WordPiece ids of its words, no special tokens, read until `limit` ([1], >= 0)
        pieces are reached (1-D int64); with offsets, each piece's first code point and the one past its end.

        The loop does only what needs a few words at a time: BertTokenizer on them (its [CLS] and [SEP] kept, they
        mark where each word's ids begin and end); everything else runs once on all the words read (word_sizes,
        words_to_pieces)."""
        n = self.n
        zero, one = PREFIX + "zero", PREFIX + "one"
        text, text_bytes, origin = self.normalized(text)
        words = n("BasicTokenizer", [n("Squeeze", [text, zero])], domain=CONTRIB, **OPS_SETTINGS)
        framed = self.read_words(n("Unsqueeze", [words, one]), n("Shape", [words]), limit)
        pieces, starts, ends = self.words_to_pieces(framed, (text_bytes, words) if offsets else None)
        if not offsets:
            return self.first(pieces, limit), None, None
        starts, ends = self.first(starts, limit), self.first(ends, limit)
        if origin is not None:  # normalized code points -> the text's own
            starts = n("Gather", [origin, starts], axis=0)
            ends = n("Add", [n("Gather", [origin, n("Max", [n("Sub", [ends, one]), zero])], axis=0), one])
        return self.first(pieces, limit), starts, ends

    def read_words(self, column: str, count: str, limit: str) -> str:
        """BertTokenizer on the words of `column` ([count, 1]) until `limit` ([1]) of them gave an id: each word's ids
        framed by [CLS] and [SEP], one after another (1-D int64).

        A word gives the window one id at least (a word with a missing piece is one [UNK]) unless the op's own
        clean-up empties it. So an outer loop reads in rounds, each round as many words as the window still needs
        (an inner loop, WORDS_PER_CALL words an iteration, that asks nothing a word), and stops when the words that
        gave an id fill the window or no word is left: one round unless some word gave none."""
        n, s, T = self.n, self.constants, self.T
        zero = PREFIX + "zero"
        outer, tag = self.subgraph("round")
        position, given = tag + "position", tag + "given"
        take = outer("Min", [outer("Sub", [limit, given]), outer("Sub", [count, position])])
        round_words = outer("Slice", [column, position, outer("Add", [position, take])])
        inner, inner_tag = self.subgraph("word")
        first = inner("Mul", [inner("Unsqueeze", [inner_tag + "i", zero]), PREFIX + "words_per_call"])
        last = inner("Add", [first, PREFIX + "words_per_call"])
        words = inner("Reshape", [inner("Slice", [round_words, first, last]), PREFIX + "minus_one"])
        # BertTokenizer's kernel writes all three of its outputs: asked for fewer, it crashes the process.
        ids, _, _ = inner("BertTokenizer", [words], 3, CONTRIB, vocab_file=self.vocab, do_lower_case=0,
                          strip_accents=0, tokenize_chinese_chars=OPS_SETTINGS["tokenize_chinese_chars"],
                          suffix_indicator=s["prefix"])
        inner_body = self.graph(inner, inner_tag + "body",
                                [(inner_tag + "i", T.INT64, []), (inner_tag + "cond", T.BOOL, []),
                                 (inner_tag + "acc", T.INT64, [None])],
                                [(inner_tag + "cond", T.BOOL, []),  # carried through: the trip count ends it
                                 (inner("Concat", [inner_tag + "acc", ids], axis=0), T.INT64, [None])])
        calls = self.calls_for(take, PREFIX + "words_per_call", outer)
        framed = self.one_frame_a_word(outer("Loop", [outer("Squeeze", [calls, zero]), "", PREFIX + "no_ids"],
                                             body=inner_body), outer)
        firsts = outer("Squeeze", [outer("NonZero", [outer("Equal", [framed, PREFIX + "cls"])]), zero])
        emptied = outer("ReduceSum", [outer("Cast", [outer("Equal", [
            outer("Gather", [framed, outer("Add", [firsts, PREFIX + "one"])], axis=0), PREFIX + "sep"])],
            to=T.INT64)], keepdims=1)
        given_after = outer("Sub", [outer("Add", [given, take]), emptied])
        position_after = outer("Add", [position, take])
        more = outer("Squeeze", [outer("And", [outer("Less", [given_after, limit]),
                                                 outer("Less", [position_after, count])]), zero])
        body = self.graph(outer, tag + "body",
                          [(tag + "r", T.INT64, []), (tag + "cond", T.BOOL, []), (tag + "acc", T.INT64, [None]),
                           (position, T.INT64, [1]), (given, T.INT64, [1])],
                          [(more, T.BOOL, []), (outer("Concat", [tag + "acc", framed], axis=0), T.INT64, [None]),
                           (position_after, T.INT64, [1]), (given_after, T.INT64, [1])])
        reads = n("Squeeze", [n("And", [n("Less", [zero, limit]), n("Less", [zero, count])]), zero])
        framed, _, _ = n("Loop", [n("Squeeze", [count, zero]), reads, PREFIX + "no_ids", zero, zero], 3, body=body)
        return framed

    def one_frame_a_word(self, paired: str, n: _Nodes) -> str:
        """BertTokenizer's answers to WORDS_PER_CALL words a call, [CLS] a [SEP] b [SEP] (a word its op's clean-up
        empties gives no id between its marks), one after another -> each word's ids framed by [CLS] and [SEP]: a
        [CLS] before the first id and after each [SEP] but the last (a word's own ids are never [CLS] or [SEP]:
        BasicTokenizer splits the brackets off a typed "[SEP]")."""
        ids = n("Compress", [paired, n("Not", [n("Equal", [paired, PREFIX + "cls"])])], axis=0)
        ends = n("Equal", [ids, PREFIX + "sep"])
        starts = n("Slice", [n("Concat", [n("Not", [PREFIX + "false"]), ends], axis=0), PREFIX + "zero",
                             n("Shape", [ids])])
        marks = n("Where", [starts, PREFIX + "cls", PREFIX + "missing"])
        side_by_side = n("Concat", [n("Unsqueeze", [marks, PREFIX + "one"]), n("Unsqueeze", [ids, PREFIX + "one"])],
                         axis=1)
        both = n("Reshape", [side_by_side, PREFIX + "minus_one"])
        return n("Compress", [both, n("Not", [n("Equal", [both, PREFIX + "missing"])])], axis=0)

    def word_sizes(self, words: str, count: str) -> str:
        """The size in bytes of each of the first `count` ([1]) words (1-D int64): GPT2Tokenizer, one token a byte,
        on WORDS_PER_SIZE_CALL words a call, their tokens padded to the longest of them (which bounds what one
        overlong word costs), counted by the attention mask."""
        n, T = self.n, self.T
        zero, one, chunk = PREFIX + "zero", PREFIX + "one", PREFIX + "words_per_size_call"
        calls = n("Squeeze", [self.calls_for(count, chunk, n), zero])
        b, tag = self.subgraph("sizes")
        start = b("Mul", [b("Unsqueeze", [tag + "i", zero]), chunk])
        part = b("Slice", [words, start, b("Min", [b("Add", [start, chunk]), count])])
        _, mask = b("GPT2Tokenizer", [part], 2, CONTRIB, vocab=_byte_vocabulary(), merges="#version: 0.2\n")
        sizes = b("ReduceSum", [mask, one], keepdims=0)
        inputs = [(tag + "i", T.INT64, []), (tag + "cond", T.BOOL, []), (tag + "acc", T.INT64, [None])]
        outputs = [(tag + "cond", T.BOOL, []), (b("Concat", [tag + "acc", sizes], axis=0), T.INT64, [None])]
        return n("Loop", [calls, "", PREFIX + "no_ids"], body=self.graph(b, tag + "body", inputs, outputs))

    def words_to_pieces(self, framed: str, text: tuple[str, str] | None):
        """The words' ids as BertTokenizer gave them, each word's framed by [CLS] and [SEP] (1-D int64) -> the ids
        without the frames, a word with a piece missing from the vocabulary one [UNK] as tokenizer.json makes it
        (run on a whole text, the op's WordPiece keeps the pieces it matched before the missing one: "great😀" ->
        great [UNK]). With `text`, the text's bytes and its words (as many of them sized in bytes as there are
        frames), also each id's first code point and the one past its end: a word starts at the first byte after
        the previous word that is no space (only spaces lie between two words), its pieces cover the code points
        their tokens spell, the last one to the word's end, and an [UNK] the whole word (the extensions' own
        offset_mapping is computed from token lengths, not from the text). (None, None) offsets without them."""
        n, T = self.n, self.T
        zero, one, zero_scalar = PREFIX + "zero", PREFIX + "one", PREFIX + "zero_scalar"

        def places(flags: str) -> str:  # where a bool vector is true, 1-D
            return n("Squeeze", [n("NonZero", [flags]), zero])

        is_cls = n("Equal", [framed, PREFIX + "cls"])
        is_sep = n("Equal", [framed, PREFIX + "sep"])
        word_of = n("Sub", [n("CumSum", [n("Cast", [is_cls], to=T.INT64), zero_scalar]), one])
        firsts, lasts = places(is_cls), places(is_sep)
        unknown = n("CumSum", [n("Cast", [n("Equal", [framed, PREFIX + "unk"])], to=T.INT64), zero_scalar])
        word_unknown = n("Greater", [n("Sub", [n("Gather", [unknown, lasts], axis=0),
                                               n("Gather", [unknown, firsts], axis=0)]), PREFIX + "zero"])
        in_unknown = n("Gather", [word_unknown, word_of], axis=0)
        # an unknown word keeps its [CLS] place, as its one [UNK]; any other its pieces
        keep = n("Or", [n("And", [in_unknown, is_cls]),
                        n("Not", [n("Or", [in_unknown, n("Or", [is_cls, is_sep])])])])
        values = n("Where", [in_unknown, n("Expand", [PREFIX + "unk", n("Shape", [framed])]), framed])
        pieces = n("Compress", [values, keep], axis=0)
        if text is None:
            return pieces, None, None
        text_bytes, words = text
        sizes = self.word_sizes(words, n("Shape", [firsts]))
        text_bytes = n("Concat", [text_bytes, PREFIX + "missing"], axis=0)
        chars_before = n("CumSum", [self.starts_of_characters(text_bytes, n), zero_scalar], exclusive=1)
        not_space = n("Not", [n("Equal", [text_bytes, PREFIX + "space"])])
        # each word's first byte: the non-space byte after as many of them as the words before it hold
        found = n("Gather", [places(not_space), n("CumSum", [sizes, zero_scalar], exclusive=1)], axis=0)
        word_start = n("Gather", [chars_before, found], axis=0)
        word_length = n("Sub", [n("Gather", [chars_before, n("Add", [found, sizes])], axis=0), word_start])
        chars = n("Where", [keep, n("Gather", [PREFIX + "piece_chars", values], axis=0), PREFIX + "zero"])
        reach = n("CumSum", [chars, zero_scalar])
        reach = n("Sub", [reach, n("Gather", [n("Gather", [reach, firsts], axis=0), word_of], axis=0)])
        start, length = (n("Gather", [x, word_of], axis=0) for x in (word_start, word_length))
        starts = n("Add", [start, n("Min", [n("Sub", [reach, chars]), length])])
        # the last id of a word: the one before its [SEP], or its [UNK]
        before_sep = n("Concat", [n("Slice", [is_sep, one, PREFIX + "max_index"]), PREFIX + "false"], axis=0)
        last = n("Or", [in_unknown, before_sep])
        ends = n("Where", [last, n("Add", [start, length]), n("Add", [start, n("Min", [reach, length])])])
        return pieces, n("Compress", [starts, keep], axis=0), n("Compress", [ends, keep], axis=0)

    def first(self, ids: str, count: str) -> str:
        """The first `count` ids (count >= 0)."""
        return self.n("Slice", [ids, PREFIX + "zero", count])

    def filled(self, like: str, value: int) -> str:
        return self.n("ConstantOfShape", [self.n("Shape", [like])],
                      value=self.helper.make_tensor("value", self.T.INT64, [1], [value]))

    def output(self, name: str, source: str) -> None:
        self.n.list.append(self.helper.make_node("Identity", [source], [PREFIX + name], name=f"{PREFIX}out_{name}"))


def tokenizer_graph(tokenizer_json: Path, text_inputs: tuple[str, ...], max_length: int, opset: int, ir_version: int,
                    offsets: bool = False):
    """The tokenizer as an ONNX model: one string input per text (text, or question and context) ->
    tokenizer/input_ids, tokenizer/attention_mask, tokenizer/token_type_ids (1-D int64); with offsets also
    tokenizer/offset_mapping ([tokens, 2]: each token's code-point span in its own text, (0, 0) for [CLS] and [SEP])."""
    data = json.loads(Path(tokenizer_json).read_text(encoding="utf-8"))
    return _graph(data, text_inputs, max_length, opset, ir_version, offsets)


def probe_graph(data: dict, text_inputs: tuple[str, ...], offsets: bool, mapping: CodePointMapping | None = None,
                window: int = UNBOUNDED):
    """The graph export would build from tokenizer.json `data` (with `mapping` in place of the derived table, when
    given), with a window no text fills unless one is given: for checking it against tokenizer.json."""
    return _graph(data, text_inputs, window, GOLDEN_OPSET, 8, offsets, mapping)


def _graph(data: dict, text_inputs: tuple[str, ...], max_length: int, opset: int, ir_version: int, offsets: bool,
           mapping: CodePointMapping | None = None):
    if len(text_inputs) not in (1, 2):
        raise ExportError(f"a text-in model takes one text or a pair, not {len(text_inputs)}")
    if opset < MIN_OPSET:
        raise ExportError(f"a text-in model needs ONNX opset {MIN_OPSET} or later; this graph has {opset}: "
                          "re-export it with a newer opset")
    vocab, constants, chars = _vocabulary(data, mapping)
    b = _Builder(vocab, constants, chars, offsets)
    h, T, n = b.helper, b.T, b.n
    cls, sep, zero = PREFIX + "cls", PREFIX + "sep", PREFIX + "zero"
    if len(text_inputs) == 1:
        pieces, starts, ends = b.word_pieces(text_inputs[0], b.int64("room", [max_length - 2]), offsets)
        ids = n("Concat", [cls, pieces, sep], axis=0)
        types = b.filled(ids, 0)
        if offsets:
            starts, ends = (n("Concat", [zero, x, zero], axis=0) for x in (starts, ends))
    else:
        # A question longer than the window is cut to it (then no context fits): the model never sees more
        # than max_length tokens.
        pair_room = b.int64("pair_room", [max_length - 3])
        question, q_starts, q_ends = b.word_pieces(text_inputs[0], pair_room, offsets)
        room = n("Max", [n("Sub", [pair_room, n("Shape", [question])]), zero])  # what the question leaves
        context, c_starts, c_ends = b.word_pieces(text_inputs[1], room, offsets)
        first = n("Concat", [cls, question, sep], axis=0)
        second = n("Concat", [context, sep], axis=0)
        ids = n("Concat", [first, second], axis=0)
        types = n("Concat", [b.filled(first, 0), b.filled(second, 1)], axis=0)
        if offsets:
            starts, ends = (n("Concat", [zero, q, zero, c, zero], axis=0)
                            for q, c in ((q_starts, c_starts), (q_ends, c_ends)))
    b.output("input_ids", ids)
    b.output("attention_mask", b.filled(ids, 1))
    b.output("token_type_ids", types)
    outputs = [h.make_tensor_value_info(PREFIX + name, T.INT64, ["tokens"])
               for name in ("input_ids", "attention_mask", "token_type_ids")]
    if offsets:
        b.output("offset_mapping", n("Concat", [n("Unsqueeze", [x, PREFIX + "one"]) for x in (starts, ends)], axis=1))
        outputs.append(h.make_tensor_value_info(PREFIX + "offset_mapping", T.INT64, ["tokens", 2]))
    graph = h.make_graph(b.n.list, "wordpiece_tokenizer", [h.make_tensor_value_info(name, T.STRING, [1])
                                                           for name in text_inputs], outputs, b.initializers)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset), h.make_opsetid(CONTRIB, 1)],
                        ir_version=ir_version)
