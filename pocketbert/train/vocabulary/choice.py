"""Which rows of the vocabulary a fitted student keeps.

Always: the special tokens and every single-character piece, with and without the continuation prefix. WordPiece
cuts a word by the longest piece that matches at each point, so with every character there alone a word is never
[UNK] for want of a piece: the fitted tokenizer gives [UNK] only where the full one does. Then the pieces the
counted text holds at least min_count times, and, under a cap on the rows, the most common of them in the source
where each is most common (counting.PieceCounts.shares).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from pocketbert.core.errors import ConfigError


@dataclass(frozen=True)
class KeptRows:
    """The kept token ids, ascending: a kept id's row in the fitted table is its place in `ids`."""

    ids: list[int]
    rows_before: int
    forced: int           # special tokens and single-character pieces
    by_count: int         # pieces kept for occurring at least min_count times
    over_cap: int         # pieces that occurred often enough, left out by the cap
    min_count: int
    max_rows: int | None

    def record(self) -> dict:
        """For the fitted student's manifest (the ids themselves are its tokenizer's vocabulary)."""
        return {k: v for k, v in asdict(self).items() if k != "ids"} | {"rows_after": len(self.ids)}


def forced_ids(vocab: dict[str, int], special_ids: list[int], prefix: str) -> set[int]:
    """The special tokens and every piece of one character, alone or after the continuation prefix."""
    single = {i for token, i in vocab.items() if len(token) == 1 or (token.startswith(prefix)
                                                                    and len(token) == len(prefix) + 1)}
    return single | set(special_ids)


def choose_rows(counts: np.ndarray, forced: set[int], min_count: int, max_rows: int | None,
                rank: np.ndarray | None = None) -> KeptRows:
    """The forced ids and those counted at least min_count times, under max_rows those of the highest `rank` first
    (default: the counts; ties: the lower id, so that a fit is the same on every machine). A setting that would keep
    nothing beyond the forced rows is a ConfigError."""
    rows_before = len(counts)
    if max_rows is not None and max_rows <= len(forced):
        raise ConfigError(f"vocabulary.max_rows {max_rows} leaves no room beside the {len(forced)} rows every "
                          "fitted vocabulary keeps (special tokens and single characters): raise it, or leave it "
                          "unset")
    frequent = [int(i) for i in np.flatnonzero(counts >= min_count) if int(i) not in forced]
    if not frequent:
        raise ConfigError(f"vocabulary.min_count {min_count}: no word piece of the recipe's text occurs that "
                          f"often beyond the {len(forced)} rows always kept; lower it, or export the full vocabulary")
    order = counts if rank is None else rank
    frequent.sort(key=lambda i: (-float(order[i]), i))
    room = len(frequent) if max_rows is None else max_rows - len(forced)
    kept = sorted(forced | set(frequent[:room]))
    return KeptRows(kept, rows_before, len(forced), min(room, len(frequent)), max(0, len(frequent) - room),
                    min_count, max_rows)
