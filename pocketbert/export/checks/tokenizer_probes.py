"""What every exhaustive tokenizer check shares: the code space, the contexts each code point is probed in, the
normalizer tabulated per code point and the word splitter's class of each code point, both found by probing the
`tokenizers` library, and the halving that narrows a differing batch of probes down to its probes."""

from __future__ import annotations

from collections.abc import Callable

from pocketbert.core.errors import ExportError

CODE_SPACE = 0x110000
SURROGATES = range(0xD800, 0xE000)
CONTEXTS = {"alone": "{0}", "between words": "a {0} b", "inside a word": "a{0}b", "repeated": "{0}{0}{0}"}
PROBES_PER_SPLIT_TEXT = 20_000

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


def normalizer_rows(reference) -> dict[int, tuple[int, ...]]:
    """What the `tokenizers` Tokenizer `reference`'s normalizer makes of each code point, for those it changes."""
    normalize = reference.normalizer.normalize_str if reference.normalizer else (lambda s: s)
    rows = {}
    for c in code_points():
        out = normalize(chr(c))
        if out != chr(c):
            rows[c] = tuple(map(ord, out))
    return rows


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


def halved_down(items: list, differs) -> list[tuple]:
    """(item, what differs) for each item of `items` on which `differs` (a list -> what differs, or None) finds a
    difference: the whole list is checked, and halved down to single items where it differs."""
    what = differs(items)
    if what is None:
        return []
    if len(items) == 1:
        return [(items[0], what)]
    half = len(items) // 2
    return halved_down(items[:half], differs) + halved_down(items[half:], differs)
