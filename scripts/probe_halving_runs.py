"""What narrowing a failing text-in tokenizer check down to its probes costs: pocketbert's halving
(tokenizer_probes.halved_down) against checking both halves of every differing text, on checks that fail by design,
the same probes and graph, in one process.

    python scripts/probe_halving_runs.py > results/text_in/probe_halving_2026-12-03.json

The checks: the MiniLM tokenizer's graph with one table entry changed ("A" read as "b", and a private-use code point
of plane 15 read as "a": every code point inside a word), and built without its canonical ordering of marks (the
pairs of marks, with offsets). Graph runs and characters fed are counted; seconds are one thread's, each the fastest
of the passes, the two halvings taking turns.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import replace
from datetime import date
from pathlib import Path

from pocketbert.core.students.models import PACKAGED_TEACHER, load_tokenizer, resolve_model_source
from pocketbert.export.checks import tokenizer_probes
from pocketbert.export.checks.tokenizer_probes import pair_probes
from pocketbert.export.text_in import text_tokenizer, tokenizer_check

PASSES = 2
PRIVATE_USE_PLANE_15 = 0xF0000


def both_halves(items: list, differs, what: str | None = None) -> list[tuple]:
    """The halving that checks each half of a differing list whatever the other half gave, and the whole list even
    where the caller found what differs on it (`what` is not read)."""
    what = differs(items)
    if what is None:
        return []
    if len(items) == 1:
        return [(items[0], what)]
    half = len(items) // 2
    return both_halves(items[:half], differs) + both_halves(items[half:], differs)


def counted_sessions(counts: dict):
    """tokenizer_check's session maker, counting each run of the graph and the characters it is fed."""
    make = tokenizer_check.text_session

    def session(*args, **kwargs):
        inner = make(*args, **kwargs)

        class Counted:
            def run(self, names, feeds):
                counts["runs"] += 1
                counts["characters"] += sum(len(str(value[0])) for value in feeds.values())
                return inner.run(names, feeds)
        return Counted()
    return session


def failing_checks(data: dict) -> dict:
    """name -> (text inputs, offsets, probes, the mapping the graph is built with)."""
    mapping = text_tokenizer.mapping_for(data)
    block = [chr(c) for c in range(0x100)]
    marks = [c for c in tokenizer_check.pair_representatives(json.dumps(data)) if c in mapping.order]
    return {
        "'A' read as 'b': code points U+0000-U+00FF in every context": (
            ("text",), False, [form.format(ch) for form in tokenizer_check.CONTEXTS.values() for ch in block],
            replace(mapping, rows={**mapping.rows, 0x41: (0x62,)})),
        "U+F0007 read as 'a': every code point inside a word": (
            ("text",), False, tokenizer_check.probes({"inside a word": tokenizer_check.CONTEXTS["inside a word"]}),
            replace(mapping, rows={**mapping.rows, PRIVATE_USE_PLANE_15 + 7: (0x61,)})),
        "no canonical ordering: the pairs of marks between words, with offsets": (
            ("text",), True, pair_probes(marks, {"between words": "a {0}{1} b"}), replace(mapping, order={})),
    }


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        load_tokenizer(resolve_model_source(PACKAGED_TEACHER)).save_pretrained(folder)
        data = json.loads((Path(folder) / "tokenizer.json").read_text(encoding="utf-8"))
    counts = {"runs": 0, "characters": 0}
    tokenizer_check.text_session = counted_sessions(counts)
    halvings = {"pocketbert": tokenizer_probes.halved_down, "both halves": both_halves}
    rows = {}
    for name, (inputs, offsets, probes, mapping) in failing_checks(data).items():
        row = {}
        for _ in range(PASSES):
            for label, halving in halvings.items():
                tokenizer_check.halved_down = halving
                counts.update(runs=0, characters=0)
                started = time.perf_counter()
                result = tokenizer_check.run_check(data, inputs, offsets, probes, mapping, workers=1)
                seconds = time.perf_counter() - started
                previous = row.get(label, {}).get("seconds", seconds)
                row[label] = {"mismatches": result["mismatch_count"], "graph_runs": counts["runs"],
                              "characters_fed": counts["characters"], "seconds": round(min(previous, seconds), 2)}
        rows[name] = {"probes": len(probes), **row}
    print(json.dumps({"date": date.today().isoformat(), "passes": PASSES, "checks": rows}, indent=1))


if __name__ == "__main__":
    main()
