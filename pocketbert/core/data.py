"""Datasets: named ones from a local data directory (else the Hugging Face hub), or any local file.

Sentiment files hold (text, label) rows: CSV/TSV with a header naming a `text` (or `sentence`) and a
`label` column, JSON Lines (optionally .gz) with those keys, or `text;label` lines. QA files are
SQuAD-format JSON. Every reader either returns clean examples or raises DataError naming file and line.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pocketbert.errors import ConfigError, DataError, require

DATA_DIR_ENV = "POCKETBERT_DATA_DIR"
IMDB_EVAL_SIZE = 2500  # IMDb ships only its train split here; this many reviews are held out for evaluation


@dataclass(frozen=True)
class TextExample:
    text: str
    label: int


@dataclass(frozen=True)
class QAExample:
    id: str
    question: str
    context: str
    answers: tuple[tuple[str, int], ...]  # (text, character start); empty for unanswerable


@dataclass
class TaskData:
    name: str
    task: str
    label_names: list[str]
    train: list
    eval: list
    sources: dict[str, Path] = field(default_factory=dict)


@dataclass(frozen=True)
class NamedDataset:
    task: str
    label_names: tuple[str, ...]
    train_file: str
    eval_file: str | None
    hub_id: str
    hub_eval_split: str


NAMED_DATASETS = {
    "sst2": NamedDataset("sentiment", ("negative", "positive"), "sst2/train.tsv", "sst2/dev.tsv",
                         "stanfordnlp/sst2", "validation"),
    "imdb": NamedDataset("sentiment", ("negative", "positive"), "imdb/train.jsonl.gz", None,
                         "stanfordnlp/imdb", "test"),
    "emotion": NamedDataset("sentiment", ("sadness", "joy", "love", "anger", "fear", "surprise"),
                            "emotion/train.txt", "emotion/val.txt", "dair-ai/emotion", "validation"),
    "squad": NamedDataset("qa", (), "squad/train.json", "squad/dev.json", "rajpurkar/squad", "validation"),
}


def default_data_dir() -> Path | None:
    value = os.environ.get(DATA_DIR_ENV)
    return Path(value) if value else None


# ---------------------------------------------------------------- sentiment readers

def _open_text(path: Path):
    try:
        if path.suffix == ".gz":
            return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", newline="")
        return open(path, encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise DataError(f"cannot open {path}: {exc.strerror}; check the path") from exc


def _file_kind(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    last = suffixes[-1] if suffixes else ""
    if last in (".tsv", ".csv", ".jsonl", ".txt", ".json"):
        return last[1:]
    raise DataError(f"{path}: unknown file type '{last or path.name}'; use .csv, .tsv, .jsonl(.gz), .txt or .json")


def _label_index(raw: Any, label_names: list[str] | None, where: str) -> int | str:
    """A label as an index into label_names; with no label set yet, the raw value (resolved later)."""
    if isinstance(raw, bool) or raw is None:
        raise DataError(f"{where}: missing or invalid label {raw!r}; every row needs a label")
    text = str(raw).strip()
    if text == "":
        raise DataError(f"{where}: empty label; every row needs a label")
    if label_names is None:
        return text
    if text in label_names:
        return label_names.index(text)
    try:
        index = int(float(text)) if float(text).is_integer() else None
    except ValueError:
        index = None
    if index is not None and 0 <= index < len(label_names):
        return index
    raise DataError(
        f"{where}: label '{text}' is not in the label set ({', '.join(label_names)}); "
        "fix the row or pass --labels with the full set"
    )


def _clean_text(raw: Any, where: str) -> str:
    if not isinstance(raw, str):
        raise DataError(f"{where}: text must be a string, got {type(raw).__name__}")
    text = raw.strip()
    if not text:
        raise DataError(f"{where}: empty text; remove the row or fill it in")
    return text


CSV_FIELD_LIMIT = 64 * 1024 * 1024  # characters; the csv module's default (131,072) rejects long reviews


def _rows_delimited(path: Path, delimiter: str):
    csv.field_size_limit(CSV_FIELD_LIMIT)
    with _open_text(path) as handle:
        reader = csv.reader(handle, delimiter=delimiter, quoting=csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL)
        try:
            header = next(reader)
        except StopIteration:
            raise DataError(f"{path}: the file is empty; it needs a header row and examples") from None
        except csv.Error as exc:
            raise DataError(f"{path}:1: {exc}; fix the header row") from exc
        names = [h.strip().lower() for h in header]
        text_col = next((names.index(c) for c in ("text", "sentence") if c in names), None)
        if text_col is None or "label" not in names:
            raise DataError(f"{path}:1: the header must name a 'text' (or 'sentence') column and a 'label' column")
        label_col = names.index("label")
        line = 1
        try:
            for row in reader:
                line += 1
                if not row or all(not c.strip() for c in row):
                    continue
                if len(row) != len(names):
                    raise DataError(f"{path}:{line}: {len(row)} columns where the header has {len(names)}; fix the row")
                yield f"{path}:{line}", row[text_col], row[label_col]
        except csv.Error as exc:
            raise DataError(f"{path}:{line + 1}: {exc}; fix the row") from exc


def _json_lines(path: Path):
    """(line number, parsed value) of each non-blank line of a JSON Lines file."""
    with _open_text(path) as handle:
        for line, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                yield line, json.loads(raw)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{line}: not valid JSON ({exc.msg}); each line must be one JSON object") from exc


def _rows_jsonl(path: Path):
    for line, obj in _json_lines(path):
        if not isinstance(obj, dict):
            raise DataError(f"{path}:{line}: each line must be a JSON object with 'text' and 'label'")
        text = obj.get("text", obj.get("sentence"))
        if text is None or "label" not in obj:
            raise DataError(f"{path}:{line}: the object needs a 'text' (or 'sentence') and a 'label' key")
        yield f"{path}:{line}", text, obj["label"]


def _rows_semicolon(path: Path):
    with _open_text(path) as handle:
        for line, raw in enumerate(handle, 1):
            raw = raw.rstrip("\r\n")
            if not raw.strip():
                continue
            if ";" not in raw:
                raise DataError(f"{path}:{line}: expected 'text;label'; fix the line")
            text, label = raw.rsplit(";", 1)
            yield f"{path}:{line}", text, label


def read_sentiment_file(path: Path, label_names: list[str] | None = None) -> tuple[list[TextExample], list[str]]:
    """Examples and the label names. Without label_names, the set is taken from the file itself."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path} does not exist; check the path or --data-dir")
    kind = _file_kind(path)
    rows = {
        "tsv": lambda: _rows_delimited(path, "\t"),
        "csv": lambda: _rows_delimited(path, ","),
        "jsonl": lambda: _rows_jsonl(path),
        "txt": lambda: _rows_semicolon(path),
    }.get(kind)
    if rows is None:
        raise DataError(f"{path}: a sentiment file must be .csv, .tsv, .jsonl(.gz) or .txt (text;label)")
    try:
        raw_examples = [(where, _clean_text(text, where), _label_index(label, label_names, where))
                        for where, text, label in rows()]
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start} of a block: {exc.reason}); save it as UTF-8") from None
    if not raw_examples:
        raise DataError(f"{path} holds no examples; check that it is the right file")
    if label_names is None:
        label_names = _infer_label_names([label for _, _, label in raw_examples])
        raw_examples = [(w, t, label_names.index(label)) for w, t, label in raw_examples]
    return [TextExample(text, label) for _, text, label in raw_examples], list(label_names)


def _infer_label_names(raw_labels: list[str]) -> list[str]:
    unique = set(raw_labels)
    if all(label.lstrip("-").isdigit() for label in unique):
        values = sorted(int(label) for label in unique)
        if values[0] < 0:
            raise DataError(f"negative label {values[0]}; integer labels must be 0, 1, 2, ...")
        return [str(i) for i in range(values[-1] + 1)]
    return sorted(unique)


# ---------------------------------------------------------------- QA reader

def read_squad_file(path: Path) -> list[QAExample]:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path} does not exist; check the path or --data-dir")
    try:
        with _open_text(path) as handle:
            doc = json.load(handle)
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason}); save it as UTF-8") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); it must be SQuAD-format JSON") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        raise DataError(f"{path}: not SQuAD format (a top-level object with a 'data' list of articles)")
    examples = []
    try:
        for a, article in enumerate(doc["data"]):
            for p, paragraph in enumerate(article["paragraphs"]):
                context = paragraph["context"]
                if not isinstance(context, str) or not context.strip():
                    raise DataError(f"{path}: article {a} paragraph {p} has an empty context")
                for qa in paragraph["qas"]:
                    where = f"{path}: question {qa.get('id', '?')}"
                    question = _clean_text(qa["question"], where)
                    answers = []
                    for ans in qa.get("answers", []):
                        start, text = int(ans["answer_start"]), ans["text"]
                        if context[start:start + len(text)] != text:
                            raise DataError(f"{where}: answer '{text}' is not at character {start} of its context")
                        answers.append((text, start))
                    examples.append(QAExample(str(qa["id"]), question, context, tuple(answers)))
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{path}: not SQuAD format ({type(exc).__name__}: {exc}); check the file") from exc
    if not examples:
        raise DataError(f"{path} holds no questions; check that it is the right file")
    return examples


# ---------------------------------------------------------------- resolution

def _read_qa_file(path: Path, label_names: list[str] | None):
    return read_squad_file(path), []


FILE_READERS = {"sentiment": read_sentiment_file, "qa": _read_qa_file}  # task -> (examples, label names)


def read_task_file(path: Path, task: str, label_names: list[str] | None):
    """(examples, label names) of a data file for the task."""
    return FILE_READERS[task](path, label_names)


def _hub_dataset(name: str, spec: NamedDataset) -> TaskData:
    datasets = require("datasets", "hub")
    try:
        ds = datasets.load_dataset(spec.hub_id)
    except Exception as exc:  # the hub client raises many types; all mean "not reachable"
        raise DataError(
            f"could not load '{name}' from the Hugging Face hub ({type(exc).__name__}); "
            f"point --data-dir (or {DATA_DIR_ENV}) at a folder holding {spec.train_file}"
        ) from exc

    convert = HUB_CONVERTERS[spec.task]
    return TaskData(name, spec.task, list(spec.label_names), convert(ds["train"]), convert(ds[spec.hub_eval_split]))


def _hub_sentiment(split) -> list[TextExample]:
    text_key = "sentence" if "sentence" in split.column_names else "text"
    return [TextExample(r[text_key].strip(), int(r["label"])) for r in split if r[text_key].strip()]


def _hub_squad(split) -> list[QAExample]:
    return [QAExample(r["id"], r["question"], r["context"],
                      tuple(zip(r["answers"]["text"], r["answers"]["answer_start"]))) for r in split]


HUB_CONVERTERS = {"sentiment": _hub_sentiment, "qa": _hub_squad}  # task -> examples of a hub split


def load_task_data(
    dataset: str,
    task: str,
    data_dir: Path | None = None,
    eval_file: Path | None = None,
    label_names: list[str] | None = None,
    seed: int = 13,
) -> TaskData:
    """Resolve a named dataset or a local file into train and eval examples for `task`."""
    data_dir = Path(data_dir) if data_dir else default_data_dir()
    if dataset in NAMED_DATASETS:
        spec = NAMED_DATASETS[dataset]
        if spec.task != task:
            raise ConfigError(f"dataset '{dataset}' is a {spec.task} dataset, not {task}: pass --task {spec.task}")
        if data_dir is None or not (data_dir / spec.train_file).is_file():
            if data_dir is not None:
                raise DataError(f"{data_dir / spec.train_file} does not exist; point --data-dir (or {DATA_DIR_ENV}) "
                                f"at the folder holding {spec.train_file}")
            return _hub_dataset(dataset, spec)
        names = list(spec.label_names) or None
        train_path = data_dir / spec.train_file
        train, names = read_task_file(train_path, task, names)
        sources = {"train": train_path}
        if eval_file is None and spec.eval_file is not None:
            eval_file = data_dir / spec.eval_file
        if eval_file is None:  # IMDb: hold out a fixed, seeded part of train
            kept, held = hold_out(train, IMDB_EVAL_SIZE, seed)
            return TaskData(dataset, task, names, kept, held, sources)
        eval_examples, _ = read_task_file(Path(eval_file), task, names)
        sources["eval"] = Path(eval_file)
        return TaskData(dataset, task, names, train, eval_examples, sources)

    path = Path(dataset)
    if not path.exists():
        raise ConfigError(
            f"unknown dataset '{dataset}': use one of {', '.join(NAMED_DATASETS)} or the path of a data file"
        )
    train, names = read_task_file(path, task, label_names)
    sources = {"train": path}
    if eval_file is None:
        if len(train) < 2:
            raise DataError(f"{path} has a single example; training needs more, and an --eval-file")
        kept, held = hold_out(train, max(1, len(train) // 10), seed)
        return TaskData(path.stem, task, names, kept, held, sources)
    eval_examples, _ = read_task_file(Path(eval_file), task, names)
    sources["eval"] = Path(eval_file)
    return TaskData(path.stem, task, names, train, eval_examples, sources)


def hold_out(examples: list, n_eval: int, seed: int) -> tuple[list, list]:
    """A seeded eval split of n_eval examples; train keeps no example whose text is also held out
    (real corpora repeat texts, and a repeat on both sides would inflate the eval score)."""
    shuffled = list(examples)
    random.Random(seed).shuffle(shuffled)
    held = shuffled[:n_eval]
    held_keys = {_text_key(ex) for ex in held}
    kept = [ex for ex in shuffled[n_eval:] if _text_key(ex) not in held_keys]
    return kept, held


def _text_key(example) -> str:
    return example.text if isinstance(example, TextExample) else f"{example.question}\n{example.context}"


def subsample(examples: list, limit: int | None, seed: int) -> list:
    """A seeded random subset of at most `limit` examples (all of them when limit is None)."""
    if limit is None or limit >= len(examples):
        return list(examples)
    picked = list(examples)
    random.Random(seed).shuffle(picked)
    return picked[:limit]


# ---------------------------------------------------------------- unlabelled passages (transfer data)

PASSAGE_KINDS = ("txt", "csv", "tsv", "jsonl")


def _passages_delimited(path: Path, delimiter: str, column: str):
    csv.field_size_limit(CSV_FIELD_LIMIT)
    with _open_text(path) as handle:
        reader = csv.reader(handle, delimiter=delimiter, quoting=csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL)
        try:
            header = [h.strip().lower() for h in next(reader)]
        except StopIteration:
            raise DataError(f"{path}: the file is empty; it needs a header row naming a '{column}' column") from None
        if column.lower() not in header:
            raise DataError(f"{path}:1: no '{column}' column (the header has {', '.join(header)}): "
                            "pass --transfer-column with the column that holds the text")
        col = header.index(column.lower())
        for row in reader:
            if len(row) > col:
                yield row[col]


def _passages_jsonl(path: Path, column: str):
    for line, obj in _json_lines(path):
        if not isinstance(obj, dict) or column not in obj:
            raise DataError(f"{path}:{line}: no '{column}' key in the object: pass --transfer-column with the key "
                            "that holds the text")
        if isinstance(obj[column], str):
            yield obj[column]


def _passages_lines(path: Path):
    with _open_text(path) as handle:
        yield from handle


def read_passages(path: Path, column: str = "text") -> list[str]:
    """Unlabelled passages of a file: one a line (.txt), or the `column` of a CSV/TSV/JSON Lines file (.gz too).
    Blank passages are skipped; a file with none is an error."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path} does not exist; check the path, or name a dataset ({', '.join(NAMED_DATASETS)})")
    kind = _file_kind(path)
    rows = {
        "txt": lambda: _passages_lines(path),
        "csv": lambda: _passages_delimited(path, ",", column),
        "tsv": lambda: _passages_delimited(path, "\t", column),
        "jsonl": lambda: _passages_jsonl(path, column),
    }.get(kind)
    if rows is None:
        raise DataError(f"{path}: transfer data must be .txt (one passage a line), .csv, .tsv or .jsonl (.gz too)")
    try:
        passages = [text.strip() for text in rows() if text.strip()]
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start} of a block: {exc.reason}); save it as UTF-8") from None
    except csv.Error as exc:
        raise DataError(f"{path}: {exc}; fix the file") from None
    if not passages:
        raise DataError(f"{path} holds no text; check that it is the right file (and --transfer-column)")
    return passages


def text_key(text: str) -> str:
    """A text as duplicates compare: case and runs of whitespace ignored."""
    return " ".join(text.lower().split())
