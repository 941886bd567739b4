"""Reading files from disk: the one place where bytes become text and JSON, and where every way a file can be
broken (not UTF-8, not gzip, cut short, not JSON, nested too deep, a key given twice) becomes one line of the
caller's error class, naming the file and what to do.

Typed readers (data rows, manifests, task files, phone results) build on these; none calls json.loads itself.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pocketbert.core.errors import PocketbertError

# gzip.open raises BadGzipFile (an OSError) for bytes that are not gzip, EOFError for a file cut short and
# zlib.error for damaged blocks, all while reading. Left alone, click turns EOFError into "aborted" (exit 130).
GZIP_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)


class DuplicateKeyError(ValueError):
    """A JSON object names one key twice: json keeps the last silently, which hides an edit gone wrong."""


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise DuplicateKeyError(key)
        seen[key] = value
    return seen


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999: valid JSON, but no float holds it
        raise ValueError(f"the number {text[:20]} is too large")
    return value


def parse_json(text: str, where: str, error: type[PocketbertError], advice: str) -> Any:
    """The value of a JSON text; anything else is `error` with one line: where, what is wrong, `advice`."""
    try:
        return json.loads(text, object_pairs_hook=_refuse_duplicates, parse_constant=_refuse_constant,
                          parse_float=_finite_float)
    except DuplicateKeyError as exc:
        raise error(f"{where}: the key '{exc}' appears twice in one object; keep one and {advice}") from None
    except json.JSONDecodeError as exc:
        raise error(f"{where} is not valid JSON ({exc.msg} at line {exc.lineno}); {advice}") from None
    except ValueError as exc:  # NaN / Infinity: Python's extension, not JSON
        raise error(f"{where} is not valid JSON ({exc}); {advice}") from None
    except RecursionError:
        raise error(f"{where} is JSON nested too deeply to read; {advice}") from None


def open_text(path: Path):
    """A text handle on a file (.gz decompressed), UTF-8 with or without a byte-order mark, newlines as written."""
    path = Path(path)
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


@contextmanager
def reading(path: Path, error: type[PocketbertError]) -> Iterator[None]:
    """Decoding and decompression failures while reading `path`, as one line of `error`."""
    try:
        yield
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text (byte {exc.start} of a block: {exc.reason}); save it as UTF-8") from None
    except GZIP_ERRORS as exc:
        raise error(f"{path}: not a complete gzip file ({type(exc).__name__}: {exc}); re-download or re-compress "
                    "it, or remove the .gz suffix if it is plain text") from None


def read_text(path: Path, error: type[PocketbertError], what: str = "file") -> str:
    path = Path(path)
    if not path.is_file():
        raise error(f"{path} does not exist or is not a file; check the path to the {what}")
    with reading(path, error), open_text(path) as handle:
        return handle.read()


def read_json(path: Path, error: type[PocketbertError], advice: str, what: str = "file") -> Any:
    """The JSON value in a file (.gz too), or one line of `error`."""
    return parse_json(read_text(path, error, what), str(path), error, advice)


def read_json_object(path: Path, error: type[PocketbertError], advice: str, what: str = "file") -> dict:
    value = read_json(path, error, advice, what)
    if not isinstance(value, dict):
        raise error(f"{path}: expected a JSON object, found {type(value).__name__}; {advice}")
    return value


def dumps_strict(value: Any, **kwargs) -> str:
    """JSON text that any reader accepts: a non-finite number is written as null (JSON has no Infinity or NaN)."""
    return json.dumps(_finite(value), allow_nan=False, **kwargs)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
