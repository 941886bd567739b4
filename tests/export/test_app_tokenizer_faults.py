"""The app folders' tokenizers, Swift and Kotlin, on a damaged tokenizer.tables and on bad input: every fault ends in an
error the app can catch (the command-line drivers: one line, exit 2, never a trap or a stack trace), and both
languages give the same verdict on each."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import write_app_tokenizer
from kotlin_build import TOKENIZE_MAIN, app_kotlin_jar

from pocketbert.export.app import app_programs

pytestmark = pytest.mark.slow

USAGE_EXIT = 2
CLI_TIMEOUT_S = 120
PAGE = 256


@pytest.fixture(scope="module")
def drivers(tmp_path_factory, private_cache) -> dict[str, list[str]]:
    """Each language's pocketbert-tokenize, where its toolchain is; a test needs both to compare their verdicts."""
    if app_programs.swift_executable() is None or shutil.which("kotlinc") is None:
        pytest.skip("the Swift toolchain and kotlinc are both needed to compare the two tokenizers' verdicts")
    swift = app_programs.swift_package_build() / ".build" / "release" / "pocketbert-tokenize"
    jar = app_kotlin_jar(tmp_path_factory.mktemp("kotlin"))
    return {"swift": [str(swift)], "kotlin": ["java", "-cp", str(jar), TOKENIZE_MAIN]}


@pytest.fixture(scope="module")
def tables(tmp_path_factory, wordpiece_tokenizer) -> bytes:
    return write_app_tokenizer(tmp_path_factory.mktemp("tables"), wordpiece_tokenizer, False)["tables"].read_bytes()


def run(driver: list[str], tables: Path, stdin: str, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([*driver, "--tables", str(tables), *options], input=stdin.encode("utf-8"),
                          capture_output=True, timeout=CLI_TIMEOUT_S)


def refused_in_one_line(done: subprocess.CompletedProcess, *words: str) -> str:
    err = done.stderr.decode("utf-8", "replace")
    lines = [line for line in err.splitlines() if line.strip()]
    assert done.returncode == USAGE_EXIT, (done.returncode, err[-2000:])
    assert len(lines) == 1, err[-2000:]
    assert all(word in lines[0] for word in words), lines[0]
    return lines[0]


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _set_field(data: bytes, key: str, value: str) -> bytes:
    lines = _lines(data)
    k = next(i for i, line in enumerate(lines) if line.startswith(key.encode() + b" "))
    lines[k] = f"{key} {value}".encode()
    return b"\n".join(lines)


def _set_map_entry(data: bytes, code: int, entry: str, table: str = "map") -> bytes:
    """The entry of `code` in the map (or the order) table (its page's line, its place in it) replaced."""
    lines = _lines(data)
    first = next(i for i, line in enumerate(lines) if line.startswith(f"{table}_pages ".encode())) + 1
    index = next(line for line in lines if line.startswith(f"{table}_index ".encode())).split()[1:]
    k = first + int(index[code // PAGE])
    entries = lines[k].split(b" ")
    entries[code % PAGE] = entry.encode()
    lines[k] = b" ".join(entries)
    return b"\n".join(lines)


# What each damage is, and words both languages' refusal holds.
DAMAGED_TABLES = {
    "CRLF line ends": (lambda d: d.replace(b"\n", b"\r\n"), ["CRLF"]),
    "another format version": (lambda d: b"pocketbert-tokenizer-tables 4" + d[d.index(b"\n"):], ["format 4"]),
    "not tables at all": (lambda d: b"hello\nworld\n", ["not a tokenizer.tables file"]),
    "cut in half": (lambda d: d[:len(d) // 2], ["tokenizer.tables"]),
    "a negative vocabulary count": (lambda d: _set_field(d, "vocab", "-5"), ["vocab"]),
    "a huge vocabulary count": (lambda d: _set_field(d, "vocab", "2000000000"), ["vocab"]),
    "a negative added-token count": (lambda d: _set_field(d, "added", "-1"), ["added"]),
    "a huge map page count": (lambda d: _set_field(d, "map_pages", "99999999"), ["map_pages"]),
    "a negative class page count": (lambda d: _set_field(d, "class_pages", "-3"), ["class_pages"]),
    "a max_length below 2": (lambda d: _set_field(d, "max_length", "-7"), ["max_length"]),
    "a count that is no number": (lambda d: _set_field(d, "vocab", "many"), ["vocab"]),
    "a shift out of the code space": (lambda d: _set_map_entry(d, 0x41, "-100"), ["code space"]),
    "a shift beyond any code point": (lambda d: _set_map_entry(d, 0x41, "2147483647"), ["map entry"]),
    "an expansion that is no code point": (lambda d: _set_map_entry(d, 0x41, "=zz"), ["map entry"]),
    "an order entry that is no unit": (lambda d: _set_map_entry(d, 0x301, "zz", "order"), ["order entry"]),
    "an order rank below zero": (lambda d: _set_map_entry(d, 0x301, "-3:0", "order"), ["order entry"]),
    "order units that give more than the map": (lambda d: _set_map_entry(d, 0xE9, "0:1,5:4", "order"),
                                                ["code point 233", "units of 5", "maps it to 1"]),
    "a code point removed first that the map keeps": (lambda d: _set_map_entry(d, 0x41, "-", "order"),
                                                      ["code point 65", "units of 0", "maps it to 1"]),
    "a negative order page count": (lambda d: _set_field(d, "order_pages", "-2"), ["order_pages"]),
}


@pytest.mark.parametrize("damage", list(DAMAGED_TABLES))
def test_a_damaged_tables_file_is_refused_by_both_in_one_line(drivers, tables, tmp_path, damage):
    change, words = DAMAGED_TABLES[damage]
    path = tmp_path / "tokenizer.tables"
    path.write_bytes(change(tables))
    said = {language: refused_in_one_line(run(driver, path, "a text\n"), *words)
            for language, driver in drivers.items()}
    assert said["swift"].removeprefix("error: ") == said["kotlin"].removeprefix("error: ")  # one contract, one message


# JSON-lines input the drivers refuse, each with words of the refusal.
BAD_JSON_LINES = {
    '"unterminated': "not a JSON string",
    '"ends in an escaped quote\\"': "a backslash at the end",
    '"an "unescaped" quote"': "an unescaped quote",
    '"unknown \\q escape"': "an unknown escape",
    '"short \\u12"': "a short \\u escape",
    '"a lone high \\ud800 surrogate"': "a lone surrogate",
    '"a lone low \\udc00 surrogate"': "a lone surrogate",
    '"a high \\ud83d then no low"': "a lone surrogate",
    "no quotes": "not a JSON string",
}


@pytest.mark.parametrize("line", list(BAD_JSON_LINES))
def test_a_bad_json_line_is_refused_by_both_in_one_line(drivers, tables, tmp_path, line):
    path = tmp_path / "tokenizer.tables"
    path.write_bytes(tables)
    for driver in drivers.values():
        refused_in_one_line(run(driver, path, line + "\n", "--json-lines"), BAD_JSON_LINES[line])


def test_good_json_lines_give_both_the_same_ids(drivers, tables, tmp_path):
    path = tmp_path / "tokenizer.tables"
    path.write_bytes(tables)
    good = ' "a pair \\ud83d\\ude00 and \\u00e9\\n" \r\n"tab\\tquote\\"slash\\/"\n"\\u0000"\n'
    out = {}
    for language, driver in drivers.items():
        done = run(driver, path, good, "--json-lines")
        assert done.returncode == 0, done.stderr.decode()
        out[language] = done.stdout
    assert out["swift"] == out["kotlin"] and out["swift"].count(b"\n") == 3


@pytest.mark.parametrize("length", ["-1", "0", "1", "x"])
def test_a_max_length_below_two_is_refused_by_both(drivers, tables, tmp_path, length):
    path = tmp_path / "tokenizer.tables"
    path.write_bytes(tables)
    for driver in drivers.values():
        refused_in_one_line(run(driver, path, "text\n", "--max-length", length), "--max-length")
