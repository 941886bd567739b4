"""What every exhaustive tokenizer check shares: the code space, the contexts each code point is probed in, the
normalizer tabulated per code point, its canonical ordering of marks and the word splitter's class of each code
point, all found by probing the `tokenizers` library, the pairs of code points probed side by side, the halving that
narrows a differing batch of probes down to its probes, and the refusal that names them."""

from __future__ import annotations

import functools
from collections.abc import Callable

from pocketbert.core.errors import ExportError

CODE_SPACE = 0x110000
SURROGATES = range(0xD800, 0xE000)
CONTEXTS = {"alone": "{0}", "between words": "a {0} b", "inside a word": "a{0}b", "repeated": "{0}{0}{0}"}
PROBES_PER_SPLIT_TEXT = 20_000
NAMED_CODE_POINTS = 8  # of each mismatching probe an error names

KEEP, SPLIT, SEPARATE, DROP = "kept in the word", "set apart", "a word boundary", "dropped"

# England, Scotland, Wales: a black flag, tag letters and a cancel tag.
FLAG_SEQUENCES = tuple("\U0001F3F4" + "".join(chr(0xE0000 + ord(ch)) for ch in region) + "\U000E007F"
                       for region in ("gbeng", "gbsct", "gbwls"))


def code_points():
    """Every Unicode scalar value (surrogates are no characters)."""
    return (c for c in range(CODE_SPACE) if c not in SURROGATES)


def probes(contexts: dict[str, str] | None = None) -> list[str]:
    """Every scalar value in each context, and the flag tag sequences."""
    contexts = CONTEXTS if contexts is None else contexts
    return [form.format(chr(c)) for form in contexts.values() for c in code_points()] + list(FLAG_SEQUENCES)


# normalizer_rows' tables by the normalizer's settings: an export derives the text-in graph's table, the app
# tokenizer's tables and the pair probes from one tokenizer.json, each from these rows (a second each of a million
# calls into the library), and the vocabulary plays no part in them.
_ROWS_BY_NORMALIZER: dict[bytes, dict[int, tuple[int, ...]]] = {}


def normalizer_rows(reference) -> dict[int, tuple[int, ...]]:
    """What the `tokenizers` Tokenizer `reference`'s normalizer makes of each code point, for those it changes
    (found once a process for each normalizer)."""
    normalizer = reference.normalizer
    key = normalizer.__getstate__() if normalizer else b""
    if key not in _ROWS_BY_NORMALIZER:
        normalize = normalizer.normalize_str if normalizer else (lambda s: s)
        rows = {}
        for c in code_points():
            out = normalize(chr(c))
            if out != chr(c):
                rows[c] = tuple(map(ord, out))
        _ROWS_BY_NORMALIZER[key] = rows
    return dict(_ROWS_BY_NORMALIZER[key])


def word_classes(words_of: Callable[[str], list[str]], probe_codes: list[int], what_to_do: str) -> dict[int, str]:
    """How a word splitter treats each code point o in the word x<o>y: kept, set apart, a boundary or dropped;
    ExportError (ending in `what_to_do`) for a code point it treats otherwise."""
    classes = {}
    for start in range(0, len(probe_codes), PROBES_PER_SPLIT_TEXT):
        chunk = probe_codes[start:start + PROBES_PER_SPLIT_TEXT]
        words, i = words_of(" ".join(f"x{chr(o)}y" for o in chunk)), 0
        for o in chunk:
            ahead = words[i:i + 3]
            if ahead[:1] == [f"x{chr(o)}y"]:
                classes[o], i = KEEP, i + 1
            elif ahead[:1] == ["xy"]:
                classes[o], i = DROP, i + 1
            elif ahead == ["x", chr(o), "y"]:
                classes[o], i = SPLIT, i + 3
            elif ahead[:2] == ["x", "y"]:
                classes[o], i = SEPARATE, i + 2
            else:
                raise ExportError(f"the word splitter reads U+{o:04X} in a way no table can follow ({ahead!r}): "
                                  f"{what_to_do}")
    return classes


def require_equal(result: dict, what: str, remedy: str) -> None:
    """ExportError naming the first mismatches of a tokenizer check's `result`, when there are any: `what` (the
    program checked) differs from tokenizer.json, and `remedy` says what to do."""
    if result["mismatch_count"]:
        named = "; ".join(f"{' '.join(m['code_points'][:NAMED_CODE_POINTS])} ({m['differs']})"
                          for m in result["first_mismatches"])
        raise ExportError(f"{what} differs from tokenizer.json on {result['mismatch_count']} of "
                          f"{result['probes'] + result.get('pair_probes', 0)} probes, first {named}: {remedy}")


def halved_down(items: list, differs, what: str | None = None) -> list[tuple]:
    """(item, what differs) for each item of `items` on which `differs` (a list -> what differs, or None) finds a
    difference: the whole list is checked (unless `what` says what differs on it), and halved down to single items
    where it differs. Each item named was found to differ alone."""
    what = differs(items) if what is None else what
    if what is None:
        return []
    if len(items) == 1:
        return [(items[0], what)]
    half = len(items) // 2
    first, second = halved_down(items[:half], differs), items[half:]
    # A whole that differs beside a first half that does not: the difference lies in the second half, which is
    # halved without checking it whole again (a lone difference costs one run a halving, not two). Should it come
    # from the two halves together, the items checked alone below find none, as they would have.
    return first + halved_down(second, differs, what if not first and len(second) > 1 else None)


# Canonical ordering. A normalizer that decomposes (NFD, as BERT's accent stripping does) sorts each run of
# combining marks by canonical class, across code points, and tokenizers' offsets follow the sorted marks: a kept mark
# that a lower-class mark overtakes takes the place, and so the offset, of the code point that mark came from.
# Each code point's entry: STARTER (one unit of class 0 giving all its code points: nearly all), REMOVED_FIRST (gone
# before the ordering, so the marks around it meet: clean-up of control characters) or its units, each
# (rank: 0 for a starter, else the canonical class's place in the order; how many of its normalized code points it
# gives). Ranks are found by probing the library's own decomposition, never from the host's Unicode data.
STARTER, REMOVED_FIRST = ".", "-"
ORDER_PROBES = ("\u0345", "\u0334")  # marks that sort after, and before, every other combining mark
# out of order and in order: a normalizer that orders marks makes the first the second (or strips both)
ORDER_CHECK = ("\u0301\u0316", "\u0316\u0301")
ORDER_PROBE_CHUNK = 50_000


def canonical_order(reference, rows: dict[int, tuple[int, ...]],
                    made: Callable[[str], str] | None = None) -> dict[int, str | tuple[tuple[int, int], ...]]:
    """The ordering entries of tokenizers' Tokenizer `reference` that are not STARTER; empty where its normalizer does
    not order marks. rows: what each code point becomes (normalizer_rows(reference), or a table built on it) and
    made(unit): what a unit becomes in that table (default: the normalizer's output)."""
    if reference.normalizer is None or not _orders(reference.normalizer.normalize_str):
        return {}
    decomposed, ranks = _decomposition_ranks()
    normalize = reference.normalizer.normalize_str
    made = made or normalize
    entries = {}
    for c in code_points():
        units = decomposed.get(c, chr(c))
        if not any(u in ranks for u in units):
            continue
        given = [made(u) for u in units]
        if "".join(given) != "".join(map(chr, rows.get(c, (c,)))):
            raise ExportError(f"tokenizer.json's normalizer makes of U+{c:04X} what its decomposition's parts do not "
                              "make apart: the tables cannot follow its canonical ordering")
        entries[c] = tuple((ranks.get(u, 0), len(g)) for u, g in zip(units, given))
    entries.update(dict.fromkeys(_removed_first(reference, rows, decomposed, ranks), REMOVED_FIRST))
    return entries


@functools.lru_cache(maxsize=1)
def _decomposition_ranks() -> tuple[dict[int, str], dict[str, int]]:
    """The library's canonical decomposition of each code point it changes, and each combining mark's rank, found
    once a process: they depend on the library alone, and every ordering table an export derives reads them."""
    from tokenizers.normalizers import NFD

    nfd = NFD().normalize_str
    decomposed = {c: nfd(chr(c)) for c in code_points()}
    decomposed = {c: d for c, d in decomposed.items() if d != chr(c)}
    stable = [chr(c) for c in code_points() if c not in decomposed]
    high, low = ORDER_PROBES
    moved = _overtaking(nfd, [f"a{high}{u}" for u in stable]) | _overtaking(nfd, [f"a{u}{low}" for u in stable])
    marks = {stable[k] for k in moved} | {high, low}

    def before(x: str, y: str) -> int:
        return -1 if nfd(y + x) == x + y else 1 if nfd(x + y) == y + x else 0

    ranks, rank, previous = {}, 0, None
    for mark in sorted(marks, key=functools.cmp_to_key(before)):
        rank += previous is None or before(previous, mark) < 0
        ranks[mark], previous = rank, mark
    return decomposed, ranks


def _orders(normalize) -> bool:
    return normalize(ORDER_CHECK[0]) in ("", ORDER_CHECK[1])


def _overtaking(nfd, texts: list[str]) -> set[int]:
    """The indexes of the three-code-point texts (a starter first) whose marks the decomposition reorders."""
    moved = set()
    for start in range(0, len(texts), ORDER_PROBE_CHUNK):
        chunk = texts[start:start + ORDER_PROBE_CHUNK]
        out = nfd("".join(chunk))
        moved |= {start + k for k, text in enumerate(chunk) if out[3 * k:3 * k + 3] != text}
    return moved


def _removed_first(reference, rows, decomposed, ranks) -> list[int]:
    """The code points the normalizer removes before it orders marks (the marks on either side then meet), probed as
    x<kept mark><c><lower mark>: the kept mark's token ends after the lower mark where c was removed first."""
    normalize = reference.normalizer.normalize_str
    kept = sorted((u for u in ranks if normalize(u) == u), key=ranks.get, reverse=True)
    stripped = sorted((u for u in ranks if normalize(u) == ""), key=ranks.get)
    if not kept or not stripped or ranks[stripped[0]] >= ranks[kept[0]]:
        return []  # no kept mark is ever overtaken: where the marks meet changes no offset
    mark, lower = kept[0], stripped[0]
    candidates = [c for c in code_points() if rows.get(c) == () and c not in decomposed and chr(c) not in ranks]
    encoded = reference.encode_batch([f"x{mark}{chr(c)}{lower}" for c in candidates], add_special_tokens=False)
    return [c for c, e in zip(candidates, encoded) if e.offsets and e.offsets[-1][1] == 4]


# Pairs: where normalization, ordering, stripping and splitting meet, two code points side by side. Every class of
# code point (its general category, what the normalizer makes of it, its ordering entry: marks of each rank kept or
# stripped, punctuation, CJK, whitespace, control characters ...) is represented by its first, middle and last
# code point, and each representative is probed beside each, in each pair context.
PAIR_CONTEXTS = {"alone": "{0}{1}", "between words": "a {0}{1} b", "inside a word": "a{0}{1}b"}
PAIR_REPRESENTATIVES = 3


def pair_representatives(reference) -> list[int]:
    """The code points that stand for their classes in the pair probes of tokenizers' Tokenizer `reference`. (The
    general category only chooses probes; what the probes must give is tokenizer.json's.)"""
    import unicodedata

    rows = normalizer_rows(reference)
    order = canonical_order(reference, rows)
    classes: dict[tuple, list[int]] = {}
    for c in code_points():
        out = rows.get(c, (c,))
        made = "itself" if out == (c,) else len(out)
        classes.setdefault((unicodedata.category(chr(c)), made, str(order.get(c, STARTER))), []).append(c)
    chosen = {members[k * (len(members) - 1) // max(PAIR_REPRESENTATIVES - 1, 1)]
              for members in classes.values() for k in range(PAIR_REPRESENTATIVES)}
    return sorted(chosen)


def pair_probes(representatives: list[int], contexts: dict[str, str] | None = None) -> list[str]:
    """Each representative beside each (both orders, and itself twice) in each pair context."""
    contexts = PAIR_CONTEXTS if contexts is None else contexts
    return [form.format(chr(a), chr(b)) for form in contexts.values() for a in representatives
            for b in representatives]
