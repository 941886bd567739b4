"""The code-point table's pages are stored once each, in the order np.unique gives: the tokenizer graph's bytes do not
depend on how the distinct pages are found."""

from __future__ import annotations

import numpy as np
import pytest

from pocketbert.export.text_in.text_normalization import distinct_pages

PAGES, COLUMNS = 600, 1024  # the shape of the real tables: thousands of pages, a page of 256 entries times units


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_distinct_pages_are_what_np_unique_gives(seed):
    rng = np.random.default_rng(seed)
    kinds = rng.integers(-3, 3, size=(40, COLUMNS), dtype=np.int32)  # negative entries stand for "no code point"
    kinds[1, -1] = kinds[0, -1] + 1  # two kinds that differ in their last column alone
    kinds[1, :-1] = kinds[0, :-1]
    pages = kinds[rng.integers(0, len(kinds), size=PAGES)]
    unique, index = distinct_pages(pages)
    want_unique, want_index = np.unique(pages, axis=0, return_inverse=True)
    assert np.array_equal(unique, want_unique)
    assert np.array_equal(index, want_index.reshape(-1))
    assert np.array_equal(unique[index], pages)


def test_one_page_and_identical_pages():
    page = np.arange(COLUMNS, dtype=np.int32)[None]
    for pages in (page, np.repeat(page, 5, axis=0)):
        unique, index = distinct_pages(pages)
        assert unique.shape == (1, COLUMNS) and index.tolist() == [0] * len(pages)


@pytest.mark.slow  # builds the tables of the whole code space four times
def test_the_table_speed_script_times_both_deduplications_and_compares_their_tables(monkeypatch):
    """scripts/text_in_table_speed.py on a small mapping: both ways give the same tables, and a way that gives
    other tables stops the script."""
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "scripts"))
    import text_in_table_speed

    from pocketbert.export.text_in.text_normalization import CodePointMapping

    mapping = CodePointMapping({0x41: (0x61,), 0xC0: (0x61,), 0x3000: (), 0x4E00: (0x20, 0x4E00, 0x20)}, 3,
                               order={0x301: ((1, 1),)})
    figures = text_in_table_speed.compare(mapping)
    assert figures["rows"] == 4 and figures["np_unique_s"] > 0 and figures["distinct_pages_s"] > 0
    assert figures["shapes"][0] == [0x110000 >> 8]

    right = text_in_table_speed.by_np_unique

    def wrong(pages):
        unique, index = right(pages)
        return unique[::-1], index

    monkeypatch.setattr(text_in_table_speed, "by_np_unique", wrong)
    with pytest.raises(SystemExit, match="other tables"):
        text_in_table_speed.compare(mapping)
