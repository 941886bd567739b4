"""What building the text-in graph's code-point tables costs: the page and order tables of the packaged uncased
tokenizer with the pages deduplicated by np.unique(axis=0) and by text_normalization.distinct_pages, in one process,
each from a fresh mapping; the tables must be equal.

    python scripts/text_in_table_speed.py > results/text_in/table_speed.json
"""

from __future__ import annotations

import json
import sys
import time
from datetime import date
from pathlib import Path

from pocketbert.core.students.models import PACKAGED_TEACHER, resolve_model_source
from pocketbert.export.text_in import text_normalization
from pocketbert.export.text_in.text_tokenizer import mapping_for
from pocketbert.mobile_bench.timing.host import host_info


def by_np_unique(pages):
    """The deduplication the tables used before distinct_pages."""
    import numpy as np

    unique, index = np.unique(pages, axis=0, return_inverse=True)
    return unique, index.reshape(-1)


def timed_tables(mapping, deduplicate) -> tuple[float, tuple]:
    """Seconds for both tables of a fresh copy of `mapping` (nothing kept from before), and the tables."""
    text_normalization._PAGE_TABLES.clear()
    fresh = text_normalization.CodePointMapping.from_json(mapping.to_json())
    chosen, text_normalization.distinct_pages = text_normalization.distinct_pages, deduplicate
    try:
        started = time.perf_counter()
        tables = fresh.page_tables() + fresh.order_tables()
        return time.perf_counter() - started, tables
    finally:
        text_normalization.distinct_pages = chosen
        text_normalization._PAGE_TABLES.clear()


def compare(mapping) -> dict:
    import numpy as np

    before_s, before = timed_tables(mapping, by_np_unique)
    after_s, after = timed_tables(mapping, text_normalization.distinct_pages)
    if not all(np.array_equal(a, b) for a, b in zip(before, after)):
        raise SystemExit("error: the two deduplications gave other tables")
    return {"rows": len(mapping.rows), "order_entries": len(mapping.order),
            "shapes": [list(t.shape) for t in after], "np_unique_s": round(before_s, 2),
            "distinct_pages_s": round(after_s, 2), "ratio_before_over_after": round(before_s / after_s, 2)}


def main() -> dict:
    data = json.loads((Path(resolve_model_source(PACKAGED_TEACHER)) / "tokenizer.json").read_text(encoding="utf-8"))
    return {"date": date.today().isoformat(), "cpu": host_info()["cpu"], "threads": 1,
            "tokenizer": "packaged uncased WordPiece", **compare(mapping_for(data))}


if __name__ == "__main__":
    if len(sys.argv) != 1:
        sys.exit("error: this script takes no arguments; usage: python scripts/text_in_table_speed.py")
    print(json.dumps(main(), indent=1))
