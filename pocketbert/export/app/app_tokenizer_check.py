"""The exhaustive check of an app's own tokenizer program (Swift, Kotlin: any command that speaks the
pocketbert-tokenize protocol) against tokenizer.json (the `tokenizers` library).

The program is sent every Unicode scalar value in four contexts (and the flag tag sequences) and each pair of the
code points that stand for their classes in three (tokenizer_probes.pair_probes: marks that the normalizer's
canonical ordering moves, stripped marks, punctuation, CJK, whitespace and control characters side by side), many
probes to a JSON line, with --offsets: each line's ids and code-point offsets must be tokenizer.json's. A line that
differs is halved, and the halves sent again in one run, down to its probes. Then the golden file's texts (encode()
at the golden max_length: the golden ids), a seeded sample of random texts and the texts that hold tokenizer.json's
added tokens ([SEP], [MASK] ... as typed, in other case, overlapping, inside words; random texts hold them too):
offsets, and encode() truncated and not.
"""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
import time
from pathlib import Path

from pocketbert.core.errors import ExportError
from pocketbert.export.checks import tokenizer_probes
from pocketbert.export.checks.tokenizer_probes import CONTEXTS, pair_probes, probes
from pocketbert.export.text_in.tokenizer_check import pair_representatives

PROBES_PER_LINE = 1000
RANDOM_TEXTS = 2000
RANDOM_SEED = 0
TRUNCATED_AT = 16
NAMED_MISMATCHES = 5
PROGRAM_SECONDS = 600
CACHE_FOLDER = "app-tokenizer-checks"
# Random texts mix the code points hand-written tokenizers get wrong with any scalar value at all.
RANDOM_PIECES = ["the", "un", "believ", "able", "Café", "naïve", "e\u0301", "o\u0308\u0304", "İ", "ı", "ΟΔΟΣ", "ς",
                 "中", "国", "日本", "한국", "😀", "👍🏽", "👩\u200d👩\u200d👧", "\u200b", "\u200c", "\u200d", "\t",
                 "\n", "\r", "\x00", "\x07", "\x85", "\u00a0", "\u3000", "!", ",", ".", "'", "$", "€", "½", "ﬁ",
                 "x" * 101, "Ⅻ", "\ufeff", "\U0001F3F4\U000E0067\U000E0062\U000E0065\U000E006E\U000E0067\U000E007F"]
SURROGATE_START, SURROGATE_END = 0xD800, 0xE000


def check(command: list[str], tokenizer_json: Path, tables: Path, golden: Path | None = None,
          contexts: tuple[str, ...] = tuple(CONTEXTS), probes_per_line: int = PROBES_PER_LINE,
          random_texts: int = RANDOM_TEXTS, seed: int = RANDOM_SEED) -> dict:
    """probes, mismatch_count, the first mismatches (the probe, its code points, what differs) and seconds of
    `command` (the program, before its --tables argument) against tokenizer.json."""
    from tokenizers import Tokenizer

    started = time.perf_counter()
    data = Path(tokenizer_json).read_text(encoding="utf-8")
    reference = Tokenizer.from_str(data)
    reference.no_truncation()
    reference.no_padding()
    program = [*command, "--tables", str(tables), "--json-lines"]

    def expected(texts: list[str]) -> list[str]:
        return [_offsets_line(w) for w in reference.encode_batch(texts, add_special_tokens=False)]

    def with_offsets(texts: list[str], want: list[str] | None = None) -> list[str | None]:
        """What differs on each text, ids and offsets of tokenize()."""
        want = expected(texts) if want is None else want
        return [None if _digest(g) == _digest(w) else f"gave {g[:200]}, tokenizer.json {w[:200]}"
                for g, w in zip(_run(program + ["--offsets"], texts), want)]

    contents = [token.content for token in reference.get_added_tokens_decoder().values()]
    singles = probes({name: CONTEXTS[name] for name in contexts})
    pairs = pair_probes(pair_representatives(data))
    every = singles + pairs
    texts = [" ".join(every[k:k + probes_per_line]) for k in range(0, len(every), probes_per_line)]
    digests = _cached_digests(data, contexts, probes_per_line, lambda: [_digest(line) for line in expected(texts)])
    got = _run(program + ["--offsets"], texts)
    differing = [every[k * probes_per_line:(k + 1) * probes_per_line] for k, line in enumerate(got)
                 if _digest(line) != digests[k]]
    found = _halved_down(differing, with_offsets)
    sample = random_sample(random_texts, seed, [*RANDOM_PIECES, *contents, *(c.lower() for c in contents)])
    added = added_token_texts(contents)
    checked = sample + added
    found += [(text, what) for text, what in zip(checked, with_offsets(checked)) if what]
    found += _encoded(program, reference, checked, None) + _encoded(program, reference, checked, TRUNCATED_AT)
    golden_texts = []
    if golden is not None:
        golden_data = json.loads(Path(golden).read_text(encoding="utf-8"))
        golden_texts = golden_data["texts"]
        got = _run(program + ["--max-length", str(golden_data["max_length"])], [row["text"] for row in golden_texts])
        found += [(row["text"], _differs(json.loads(g), row["ids"])) for row, g in zip(golden_texts, got)
                  if _differs(json.loads(g), row["ids"])]
    return {"probes": len(singles), "pair_probes": len(pairs), "random_texts": len(sample),
            "added_token_texts": len(added), "golden_texts": len(golden_texts),
            "lines": len(texts), "mismatch_count": len(found),
            "first_mismatches": [{"probe": p, "code_points": [f"U+{ord(c):04X}" for c in p], "differs": d}
                                 for p, d in found[:NAMED_MISMATCHES]],
            "seconds": round(time.perf_counter() - started, 1)}


def pair_mismatches(command: list[str], tables: Path, pairs: list[tuple[str, str]],
                    max_length: int | None) -> list[dict]:
    """Each pair (question, context) on which the program's `--pairs` encoding differs from the Python reference's
    encode_pair (which cuts the first text to max_length - 3 pieces, the second to what room is left; None: no
    cut, as the program without --max-length): the pair, what the program gave and what the reference gives."""
    from pocketbert.export.app import tokenizer_reference

    reference = tokenizer_reference.load(tables)
    cut = ["--max-length", str(max_length)] if max_length is not None else []
    lines = _run([*command, "--tables", str(tables), "--json-lines", "--pairs", *cut],
                 [text for pair in pairs for text in pair], answers=len(pairs))
    found = []
    for (first, second), line in zip(pairs, lines):
        want = tokenizer_reference.encode_pair(reference, first, second,
                                               sys.maxsize if max_length is None else max_length)
        got = json.loads(line)
        if (got["ids"], got["type_ids"]) != (want.ids, want.type_ids):
            found.append({"pair": [first, second], "got": got, "want": {"ids": want.ids, "type_ids": want.type_ids}})
    return found


def _offsets_line(encoding) -> str:
    """tokenize()'s answer as the protocol writes it, without spaces."""
    return (f'{{"ids":{json.dumps(encoding.ids, separators=(",", ":"))},'
            f'"offsets":{json.dumps(encoding.offsets, separators=(",", ":"))}}}')


def _digest(line: str) -> str:
    """A line's digest, spaces aside (a program may write its JSON with spaces: numbers and keys hold none)."""
    return hashlib.blake2b("".join(line.split()).encode(), digest_size=12).hexdigest()


def _cached_digests(data: str, contexts: tuple[str, ...], probes_per_line: int, build) -> list[str]:
    """tokenizer.json's answers to the probe lines, as digests: computed once a machine for each tokenizer (the
    Swift and the Kotlin checks, each export of it, share them)."""
    from importlib.metadata import version

    from pocketbert.core.run.cache_dir import cache_root
    from pocketbert.export.checks import tokenizer_probes
    from pocketbert.export.text_in.text_tokenizer import cached_or_built, tokenizer_rules

    key = hashlib.sha256(b"\0".join([tokenizer_rules(json.loads(data)).encode(), json.dumps([list(contexts),
                                      probes_per_line]).encode(), Path(__file__).read_bytes(),
                                      Path(tokenizer_probes.__file__).read_bytes(),
                                      version("tokenizers").encode()])).hexdigest()[:32]
    return cached_or_built(cache_root() / CACHE_FOLDER / f"{key}.json", lambda text: json.loads(text)["digests"],
                           lambda: build(), dump=lambda digests: {"digests": digests})


def cached_check(command: list[str], tokenizer_json: Path, tables: Path, golden: Path, name: str,
                 contexts: tuple[str, ...] = tuple(CONTEXTS)) -> dict:
    """check()'s result for `command` (a program built under its sources' hash, which its path holds) on these
    files: run once a machine, then read back, as each export of one tokenizer is checked again."""
    from pocketbert.core.run.cache_dir import cache_root
    from pocketbert.export.text_in.text_tokenizer import cached_or_built

    key = hashlib.sha256(b"\0".join([name.encode(), json.dumps([_as_cached(command), list(contexts)]).encode(),
                                      Path(__file__).read_bytes(),
                                      *(Path(p).read_bytes() for p in (tokenizer_json, tables, golden))])).hexdigest()
    built = []

    def run() -> dict:
        built.append(True)
        return check(command, tokenizer_json, tables, golden, contexts)

    result = cached_or_built(cache_root() / CACHE_FOLDER / f"result-{key[:32]}.json", json.loads, run)
    return {**result, "cached": not built}


def _as_cached(command: list[str]) -> list[str]:
    """The command as the check's cache entry names it: a program built inside the cache folder (app_programs.py,
    under its sources' hash) by its place there, so that the same program reached through another cache root (the
    GPU check's dry run, which links the export's cache folders into its own) reads the same entries."""
    from pocketbert.core.run.cache_dir import cache_root

    root = cache_root()

    def named(part: str) -> str:
        try:
            return Path(part).relative_to(root).as_posix()
        except ValueError:
            return part

    return [named(part) for part in command]


def require_equal(result: dict, program: str) -> None:
    """ExportError naming the first mismatches, when there are any."""
    tokenizer_probes.require_equal(result, program,
                                   "fix it against pocketbert/export/app/tokenizer_reference.py")


def added_token_texts(contents: list[str]) -> list[str]:
    """Texts that hold added tokens' contents as a user types them: each alone, in other case, repeated, inside a
    word and at either end of one, beside its own first or last code point, cut short, beside accents, CJK and
    emoji; and each pair of them side by side."""
    def around(c: str) -> list[str]:
        return [c, c.lower(), c.upper(), f"good {c} film", f"a{c}b", f"{c}end", f"start{c}", c * 3, f"{c} {c} {c}",
                c[0] + c, c + c[-1], c[:-1] + c, c[:-1], c[1:], f"{c[:-1]} {c}", f"über{c}中", f"😀{c}́"]

    texts = [text for c in contents for text in around(c)]
    texts += [f"{a}{b}" for a in contents for b in contents] + [f"x{a} {b}y" for a in contents for b in contents]
    return list(dict.fromkeys(texts))


def random_sample(count: int, seed: int, pieces: list[str] = RANDOM_PIECES) -> list[str]:
    """Seeded texts of pieces, spaces and arbitrary scalar values."""
    rng = random.Random(seed)

    def any_scalar() -> str:
        code = rng.randrange(0x110000 - (SURROGATE_END - SURROGATE_START))
        return chr(code + (SURROGATE_END - SURROGATE_START) if code >= SURROGATE_START else code)

    def piece() -> str:
        roll = rng.random()
        return any_scalar() if roll < 0.2 else " " if roll < 0.4 else rng.choice(pieces)

    return ["".join(piece() for _ in range(rng.randrange(0, 40))) for _ in range(count)]


def _encoded(program: list[str], reference, texts: list[str], max_length: int | None) -> list[tuple[str, str]]:
    """encode()'s ids, truncated at max_length or not."""
    args = ["--max-length", str(max_length)] if max_length else []
    got = [json.loads(line) for line in _run(program + args, texts)]
    if max_length:
        reference.enable_truncation(max_length)
    want = reference.encode_batch(texts)
    reference.no_truncation()
    return [(text, what) for text, g, w in zip(texts, got, want) if (what := _differs(g, w.ids))]


def _halved_down(lines: list[list[str]], differs) -> list[tuple[str, str]]:
    """(probe, what differs) for each probe of a line that differs: differing lines are halved, and all the halves
    sent in one run, until each differing line is one probe."""
    found = []
    while lines:
        verdicts = differs([" ".join(line) for line in lines])
        found += [(line[0], what) for line, what in zip(lines, verdicts) if what and len(line) == 1]
        lines = [half for line, what in zip(lines, verdicts) if what and len(line) > 1
                 for half in (line[:len(line) // 2], line[len(line) // 2:])]
    return found


def _differs(got, want) -> str | None:
    if got == want:
        return None
    return f"gave {json.dumps(got)[:200]}, tokenizer.json {json.dumps(want)[:200]}"


def _run(program: list[str], texts: list[str], answers: int | None = None) -> list:
    """One JSON line per text from one run of the program (`answers` lines in all, when not one per text)."""
    if not texts:
        return []
    sent = "".join(json.dumps(text, ensure_ascii=False) + "\n" for text in texts)
    try:
        done = subprocess.run(program, input=sent.encode("utf-8"), capture_output=True, timeout=PROGRAM_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ExportError(f"the tokenizer program {program[0]} did not run ({exc}): build it first") from exc
    if done.returncode != 0:
        raise ExportError(f"the tokenizer program {program[0]} failed: {done.stderr.decode(errors='replace')[-300:]}")
    lines = done.stdout.decode("utf-8").splitlines()
    expected = len(texts) if answers is None else answers
    if len(lines) != expected:
        raise ExportError(f"the tokenizer program {program[0]} answered {len(lines)} lines to {len(texts)}: it must "
                          f"write {expected} JSON lines")
    return lines
