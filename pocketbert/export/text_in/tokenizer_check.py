"""The exhaustive check of a text-in tokenizer graph: every Unicode scalar value, in four contexts, and each pair of
the code points that stand for their classes, in three (tokenizer_probes.pair_probes), give the ids (and, for a
pair, token types; with offsets, each token's span) tokenizer.json gives.

The probes are checked many to a text (separated by spaces, so each is whole words of its own) on a graph built
as the shipped one but with a window no text fills; a text that differs is halved down to its probes. The result
is cached under the cache folder, keyed by the tokenizer's rules, the graph's code and the ops' version: a second
export of the same tokenizer reads it.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pocketbert.export.text_in import text_normalization, text_tokenizer
from pocketbert.export.text_in.session import text_session
from pocketbert.export.checks import tokenizer_probes
from pocketbert.export.checks.tokenizer_probes import CONTEXTS, code_points, halved_down, probes

# A run of the graph costs some fixed time besides its words: a QA pair's check ran 24 -> 17 us a probe from 100
# to 400 probes a text, a single text's 23 -> 18 or 15 at both (two sittings; AMD EPYC, one thread). A text that
# differs is halved down to its probes, so the failing check's texts cost a few runs more each.
PROBES_PER_TEXT = 400
WORKERS = 2
NAMED_MISMATCHES = 5
CACHE_FOLDER = "tokenizer-checks"
PAIRS_CACHE_FOLDER = "tokenizer-pair-probes"



def check(tokenizer_json: Path, text_inputs: tuple[str, ...], offsets: bool, use_cache: bool = True,
          contexts: tuple[str, ...] = tuple(CONTEXTS)) -> dict:
    """The check's result for the graph export builds from tokenizer.json, every code point in each of `contexts`
    (names of CONTEXTS): probes, texts, mismatch_count, the first mismatches (the probe and what differs), seconds;
    from the cache when this tokenizer was checked in those contexts."""
    data = json.loads(Path(tokenizer_json).read_text(encoding="utf-8"))
    chosen = {name: CONTEXTS[name] for name in contexts}
    if not use_cache:
        return {**_counted(run_check(data, text_inputs, offsets, every_probe(data, chosen)), data),
                "contexts": list(chosen), "cached": False}
    built = []

    def build() -> dict:
        built.append(True)
        return {**_counted(run_check(data, text_inputs, offsets, every_probe(data, chosen)), data),
                "contexts": list(chosen)}

    result = text_tokenizer.cached_or_built(_cache_file(data, text_inputs, offsets, chosen), json.loads, build,
                                            keep=lambda found: found["mismatch_count"] == 0)
    return {**result, "cached": not built}


# A check split across processes (a parallel export, job_graph.py): each part checks one range of the probes, whole
# texts of them, so the merged result holds the very texts, mismatches and order of one process's check.

def cached(tokenizer_json: Path, text_inputs: tuple[str, ...], offsets: bool, contexts: tuple[str, ...]) -> dict | None:
    """check()'s result where the cache holds it, else None (nothing is built)."""
    data = json.loads(Path(tokenizer_json).read_text(encoding="utf-8"))
    path = _cache_file(data, text_inputs, offsets, {name: CONTEXTS[name] for name in contexts})
    try:
        return {**json.loads(path.read_text(encoding="utf-8")), "cached": True}
    except (OSError, ValueError):
        return None


def part_ranges(total: int, text_inputs: tuple[str, ...], parts: int) -> list[tuple[int, int]]:
    """`parts` ranges of `total` probes (code points in each context, in order), as near equal as whole texts
    allow: each range starts where one of run_check's texts starts."""
    size = PROBES_PER_TEXT * len(text_inputs)
    texts = -(-total // size)
    bounds = [min(total, size * (texts * k // parts)) for k in range(parts + 1)]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def every_probe(data: dict, contexts: dict[str, str]) -> list[str]:
    """Every code point in each of `contexts`, then the pair probes of tokenizer.json `data`."""
    return probes(contexts) + tokenizer_probes.pair_probes(pair_representatives(json.dumps(data)))


def _counted(result: dict, data: dict) -> dict:
    """A check of every_probe's probes with its count split as the app tokenizers' checks give it: `probes` the
    code points in their contexts, `pair_probes` the pairs."""
    pairs = len(tokenizer_probes.pair_probes(pair_representatives(json.dumps(data))))
    return {**result, "probes": result["probes"] - pairs, "pair_probes": pairs}


def pair_representatives(data: str) -> list[int]:
    """tokenizer_probes.pair_representatives of tokenizer.json `data` (its text), found once a machine."""
    from tokenizers import Tokenizer

    def found() -> list[int]:
        reference = Tokenizer.from_str(data)
        reference.no_truncation()
        reference.no_padding()
        return tokenizer_probes.pair_representatives(reference)

    path = text_tokenizer.cache_entry(PAIRS_CACHE_FOLDER, text_tokenizer.tokenizer_rules(json.loads(data)).encode(),
                                      Path(tokenizer_probes.__file__).read_bytes())
    return text_tokenizer.cached_or_built(path, lambda text: json.loads(text)["codes"], found,
                                          dump=lambda codes: {"codes": codes})


def probe_count(tokenizer_json: Path, contexts: tuple[str, ...]) -> int:
    data = json.loads(Path(tokenizer_json).read_text(encoding="utf-8"))
    return len(every_probe(data, {name: CONTEXTS[name] for name in contexts}))


def check_part(tokenizer_json: Path, text_inputs: tuple[str, ...], offsets: bool, contexts: tuple[str, ...],
               start: int, stop: int, workers: int) -> dict:
    """run_check on the probes start:stop, every mismatch kept (merged names the first of all parts')."""
    data = json.loads(Path(tokenizer_json).read_text(encoding="utf-8"))
    every = every_probe(data, {name: CONTEXTS[name] for name in contexts})
    return run_check(data, text_inputs, offsets, every[start:stop], workers=workers, named=None)


def merged(parts: list[dict], seconds: float) -> dict:
    """The parts' results (in probe order) as one run_check of all their probes gives it."""
    mismatches = [m for part in parts for m in part["first_mismatches"]]
    return {**parts[0], "probes": sum(p["probes"] for p in parts), "texts": sum(p["texts"] for p in parts),
            "mismatch_count": sum(p["mismatch_count"] for p in parts),
            "first_mismatches": mismatches[:NAMED_MISMATCHES], "seconds": round(seconds, 1),
            "workers": sum(p["workers"] for p in parts)}


def merge_parts(tokenizer_json: Path, text_inputs: tuple[str, ...], offsets: bool, contexts: tuple[str, ...],
                parts: list[dict], seconds: float) -> dict:
    """The parts merged as check() gives the whole, written to the cache as check() writes it."""
    data = json.loads(Path(tokenizer_json).read_text(encoding="utf-8"))
    chosen = {name: CONTEXTS[name] for name in contexts}
    whole = {**_counted(merged(parts, seconds), data), "contexts": list(chosen)}
    result = text_tokenizer.cached_or_built(_cache_file(data, text_inputs, offsets, chosen), json.loads,
                                            lambda: whole, keep=lambda found: found["mismatch_count"] == 0)
    return {**result, "cached": False}


def run_check(data: dict, text_inputs: tuple[str, ...], offsets: bool, probe_texts: list[str],
              mapping: text_normalization.CodePointMapping | None = None, workers: int = WORKERS,
              named: int | None = NAMED_MISMATCHES) -> dict:
    """Check `probe_texts` on the graph built from `data` (with `mapping`, when given, in place of the derived
    one), with `workers` threads; the first `named` mismatches named (None: all)."""
    from tokenizers import Tokenizer

    from pocketbert.core.tasks.registry import text_in_string

    started = time.perf_counter()
    reference = Tokenizer.from_str(json.dumps(data))
    reference.no_truncation()
    reference.no_padding()
    graph = text_tokenizer.probe_graph(data, text_inputs, offsets, mapping)
    session = text_session(graph.SerializeToString(), threads=1)
    names = [text_tokenizer.PREFIX + n for n in ("input_ids", "token_type_ids", "offset_mapping")[:3 if offsets else 2]]
    pair = len(text_inputs) == 2

    def what_differs(chunk: list[str], second: list[str] | None = None) -> str | None:
        """What differs on the text of `chunk` (a pair: `chunk` as the question, `second` as the context, or
        `chunk` as both)."""
        texts = [" ".join(chunk)] + ([" ".join(chunk if second is None else second)] if pair else [])
        feeds = {name: text_in_string(text) for name, text in zip(text_inputs, texts)}
        ids, types, *spans = (x.tolist() for x in session.run(names, feeds))
        # the model is fed its texts without NUL (text_in_string): tokenizer.json is asked about the same texts
        want = reference.encode(*(text.replace("\0", "") for text in texts))
        if ids != want.ids:
            return "ids"
        if types != want.type_ids:
            return "token types"
        if spans and spans[0] != [list(o) for o in want.offsets]:
            return "offsets"
        return None

    def mismatches_in(chunk: list[str]) -> list[tuple[str, str]]:
        """A pair carries half the probes as its question, half as its context; a text that differs is halved down
        to its probes (each checked as both question and context)."""
        half = len(chunk) // 2
        differs = what_differs(chunk[:half], chunk[half:]) if pair else what_differs(chunk)
        if differs is None:
            return []
        # a single text was just checked as halved_down checks it; a pair's was split otherwise
        return halved_down(chunk, what_differs, None if pair else differs) or [(" ".join(chunk), differs)]

    size = PROBES_PER_TEXT * len(text_inputs)
    chunks = [probe_texts[k:k + size] for k in range(0, len(probe_texts), size)]
    with ThreadPoolExecutor(workers) as pool:
        found = [m for part in pool.map(mismatches_in, chunks) for m in part]
    return {"mode": "pair" if pair else "single", "offsets": offsets, "probes": len(probe_texts),
            "code_points": sum(1 for _ in code_points()),
            "texts": len(chunks), "mismatch_count": len(found),
            "first_mismatches": [{"probe": p, "code_points": [f"U+{ord(c):04X}" for c in p], "differs": d}
                                 for p, d in found[:named]],
            "seconds": round(time.perf_counter() - started, 1), "workers": workers}


def require_equal(result: dict) -> None:
    """ExportError naming the first mismatches, when there are any."""
    tokenizer_probes.require_equal(result, "the text-in tokenizer graph",
                                   "export this model's token-id graphs only")


def _cache_file(data: dict, text_inputs: tuple[str, ...], offsets: bool, contexts: dict[str, str]) -> Path:
    return text_tokenizer.cache_entry(CACHE_FOLDER, text_tokenizer.tokenizer_rules(data).encode(),
                                      Path(__file__).read_bytes(), Path(tokenizer_probes.__file__).read_bytes(),
                                      json.dumps([len(text_inputs), offsets, sorted(contexts)]).encode())
