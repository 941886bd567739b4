"""Datasets: named ones from a local data directory (else the Hugging Face hub), or any local file.

Sentiment files hold (text, label) rows: CSV/TSV with a header naming a `text` (or `sentence`) and a
`label` column, JSON Lines (optionally .gz) with those keys, or `text;label` lines. QA files are
SQuAD-format JSON. Every reader either returns clean examples or raises DataError naming file and line.
"""

from __future__ import annotations

import csv
import hashlib
import os
import random
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pocketbert.core.errors import ConfigError, DataError
from pocketbert.core.files import open_text, parse_json, reading

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


@dataclass(frozen=True)
class EvalSet:
    """The examples a stage's scores are on: the eval file with its md5, how many examples it holds, how many
    were scored, and whether those were all of them or the fixed sample (EVAL_SAMPLE_SEED)."""

    file: str | None  # None: a hub split
    md5: str | None
    official: bool  # the md5 is the published one (OFFICIAL_MD5)
    examples: int
    scored: int
    sample: str

    def describe(self) -> str:
        """How a printed score names its questions: 'on 2,000 of dev-v1.1.json's 10,570 (the fixed sample, ...)'."""
        where = Path(self.file).name if self.file else "the hub split"
        if self.scored >= self.examples:
            return f"on all {self.examples:,} examples of {where}"
        return f"on {self.scored:,} of {where}'s {self.examples:,} (the fixed sample, seed {EVAL_SAMPLE_SEED})"


def md5_of(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class TaskData:
    name: str
    task: str
    label_names: list[str]
    train: list
    eval: list
    sources: dict[str, Path] = field(default_factory=dict)

    def eval_set(self, scored: int) -> EvalSet:
        """The record of which eval examples `scored` of them are (the first `scored` of the fixed sample)."""
        path = self.sources.get("eval")
        md5 = md5_of(path) if path is not None else None
        official = md5 is not None and md5 in OFFICIAL_MD5.values()
        sample = "all" if scored >= len(self.eval) else f"fixed sample (seed {EVAL_SAMPLE_SEED})"
        return EvalSet(str(path) if path is not None else None, md5, official, len(self.eval), scored, sample)


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
    # SQuAD v1.1's official splits, the published files byte for byte (md5s below); the hub's rajpurkar/squad is
    # the same two splits.
    "squad": NamedDataset("qa", (), "squad/train-v1.1.json", "squad/dev-v1.1.json", "rajpurkar/squad", "validation"),
}
# The md5 each official file is published with (the digests torchtext, ParlAI and PaddleNLP pin): a manifest that
# records one of these scored the published file, not an edited copy.
OFFICIAL_MD5 = {
    "squad/train-v1.1.json": "981b29407e0affa3b1b156f72073b945",
    "squad/dev-v1.1.json": "3e85deb501d4e538b6bc56f786231552",
}
# A stage that scores a sample of the eval split (eval.max_examples) draws it with this seed, not the recipe's:
# runs with other seeds, teacher and student alike, are scored on the same questions.
EVAL_SAMPLE_SEED = 2016


def default_data_dir() -> Path | None:
    value = os.environ.get(DATA_DIR_ENV)
    return Path(value) if value else None


# ---------------------------------------------------------------- sentiment readers

def _open_text(path: Path):
    try:
        return open_text(path)
    except OSError as exc:
        raise DataError(f"cannot open {path}: {exc.strerror}; check the path") from exc


def _file_kind(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    last = suffixes[-1] if suffixes else ""
    if last in (".tsv", ".csv", ".jsonl", ".txt", ".json"):
        return last[1:]
    raise DataError(f"{path}: unknown file type '{last or path.name}'; use .csv, .tsv, .jsonl(.gz), .txt or .json")


# ---------------------------------------------------------------- the label set
#
# A label set is either names or numbers, never both. Names are taken as written (case and spelling kept) and
# ordered by code point, so a shuffled copy of a file gives the same classes in the same order. Numbers are
# class indices: 0, 1, 2, ... with none missing (a gap is far more often a typo than an empty class), written
# without leading zeros, at most MAX_CLASSES of them. `--labels` names the set instead of the file. A name with
# a character one cannot see (a U+FEFF byte-order mark, a zero-width space, a control character) or two names
# that differ only by case or Unicode form would each become a class of their own that looks like another: both
# are refused, naming the row.

MAX_CLASSES = 1000  # a mistyped 9999999999 must not become ten billion classes
INDEX = re.compile(r"0|[1-9][0-9]*")  # ASCII digits only: "²" and "٣" are names, "01" is refused


def _raw_label(raw: Any, where: str) -> str:
    """A label as written: a JSON integer (or integral float) as its digits, a string stripped."""
    if isinstance(raw, bool) or raw is None or isinstance(raw, (list, dict)):
        raise DataError(f"{where}: missing or invalid label {raw!r}; every row needs a label")
    if isinstance(raw, float) and raw.is_integer():
        raw = int(raw)
    text = str(raw).strip()
    if text == "":
        raise DataError(f"{where}: empty label; every row needs a label")
    _refuse_invisible(text, where)
    return text


INVISIBLE_CATEGORIES = ("Cf", "Cc", "Zl", "Zp")  # format (U+FEFF, U+200B..U+200F, U+2060), control, separators


def _refuse_invisible(name: str, where: str) -> None:
    hidden = next((c for c in name if unicodedata.category(c) in INVISIBLE_CATEGORIES), None)
    if hidden is not None:
        what = unicodedata.name(hidden, "a control character")
        raise DataError(f"{where}: label {name!r} holds an invisible character (U+{ord(hidden):04X} {what}); "
                        "remove it")


def _spelling(name: str) -> str:
    """What two labels that look the same share: their case-folded NFKC form."""
    return unicodedata.normalize("NFKC", name).casefold()


def _first_look_alike(labeled: list[tuple[str, str]]) -> tuple[tuple[str, str], tuple[str, str]] | None:
    """The first two (where, label) whose labels differ but are spelled alike (by case or Unicode form)."""
    seen: dict[str, tuple[str, str]] = {}
    for where, label in labeled:
        first = seen.setdefault(_spelling(label), (where, label))
        if first[1] != label:
            return first, (where, label)
    return None


def _refuse_look_alikes(labeled: list[tuple[str, str]]) -> None:
    pair = _first_look_alike(labeled)
    if pair is not None:
        (first_where, first), (where, label) = pair
        raise DataError(f"{where}: label '{label}' differs from '{first}' ({first_where}) only by case or Unicode "
                        "form; write each class one way")


def _label_index(text: str, label_names: list[str], where: str) -> int:
    """The index of a label in a given label set: by name, else as a class index."""
    if text in label_names:
        return label_names.index(text)
    if INDEX.fullmatch(text) and int(text) < len(label_names):
        return int(text)
    raise DataError(
        f"{where}: label '{text}' is not in the label set ({', '.join(label_names)}) nor an index below "
        f"{len(label_names)}; fix the row or pass --labels with the full set"
    )


NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")  # what reads as a number, not a name


def _looks_numeric(text: str) -> bool:
    return NUMBER.fullmatch(text) is not None


def infer_label_names(raw_labels: list[str], source: str) -> list[str]:
    """The label set a file's labels spell (the rule above), or DataError saying what to fix."""
    unique = set(raw_labels)
    numeric = {label for label in unique if _looks_numeric(label)}
    if numeric and numeric != unique:
        names = sorted(unique - numeric)[:2]
        raise DataError(f"{source}: labels mix numbers ({sorted(numeric)[0]}) and names ({', '.join(names)}); "
                        "write every label one way, or pass --labels with the names in index order")
    if not numeric:
        names = sorted(unique)
    else:
        bad = sorted(label for label in numeric if not INDEX.fullmatch(label))
        if bad:
            raise DataError(f"{source}: label '{bad[0]}' is not a class index (0, 1, 2, ... without leading zeros "
                            "or signs); fix it, or use label names")
        values = sorted(int(label) for label in numeric)
        if values[-1] >= MAX_CLASSES:
            raise DataError(f"{source}: label {values[-1]} is beyond the {MAX_CLASSES} classes pocketbert takes; "
                            "fix the row (a typo?) or renumber the classes from 0")
        missing = sorted(set(range(values[-1] + 1)) - set(values))
        if missing:
            raise DataError(f"{source}: numeric labels must be 0, 1, 2, ... with none missing, but {missing[0]} "
                            f"never occurs (the largest is {values[-1]}); fix the rows, or pass --labels")
        names = [str(i) for i in values]
    return check_label_names(names, source)


def check_label_names(names: list[str], source: str = "--labels") -> list[str]:
    """A label set to train on: at least two classes, at most MAX_CLASSES, no name empty or given twice."""
    if any(not name for name in names):
        raise DataError(f"{source}: a label name is empty; give every class a name")
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise DataError(f"{source}: the label '{twice[0]}' is given twice; name each class once")
    for name in names:
        _refuse_invisible(name, source)
    _refuse_look_alikes([(source, name) for name in names])
    if len(names) < 2:
        shown = f" ('{names[0]}')" if names else ""
        raise DataError(f"{source}: a single class{shown}; a classifier needs at least two: check the file, or pass "
                        "--labels with the full set")
    if len(names) > MAX_CLASSES:
        raise DataError(f"{source}: {len(names)} classes, more than the {MAX_CLASSES} pocketbert takes")
    return list(names)


def parse_labels_option(value: str | None, dataset: str) -> list[str] | None:
    """`--labels a,b,c` for the data file `dataset`: the names in index order, checked before any work. A named
    dataset has its own label set, which --labels may repeat but not change."""
    if value is None:
        return None
    names = check_label_names([name.strip() for name in value.split(",")], "--labels")
    spec = NAMED_DATASETS.get(dataset)
    if spec is not None and names != list(spec.label_names):
        raise ConfigError(f"--labels names the classes of a local data file; '{dataset}' has its own "
                          f"({', '.join(spec.label_names) or 'none: it is a QA dataset'}): leave --labels out")
    return names


def _clean_text(raw: Any, where: str) -> str:
    if not isinstance(raw, str):
        raise DataError(f"{where}: text must be a string, got {type(raw).__name__}")
    text = raw.strip()
    if not text:
        raise DataError(f"{where}: empty text; remove the row or fill it in")
    return text


CSV_FIELD_LIMIT = 64 * 1024 * 1024  # characters; the csv module's default (131,072) rejects long reviews


def _csv_reader(handle, delimiter: str):
    # strict: a quote left open to the end of the file, or text after a closing quote, is an error rather
    # than a field that silently swallows the rows after it.
    if delimiter == "\t":
        return csv.reader(handle, delimiter=delimiter, quoting=csv.QUOTE_NONE)
    return csv.reader(handle, delimiter=delimiter, quoting=csv.QUOTE_MINIMAL, strict=True)


def _header(path: Path, header: list[str]) -> list[str]:
    names = [h.strip().lower() for h in header]
    twice = sorted({n for n in names if n and names.count(n) > 1})
    if twice:
        raise DataError(f"{path}:1: the column '{twice[0]}' appears twice in the header; rename or remove one")
    return names


def _rows_delimited(path: Path, delimiter: str):
    rows = list(_rows_delimited_raw(path, delimiter))
    if delimiter != "\t":
        _refuse_merged_rows(rows, delimiter)
    yield from ((where, text, label) for where, text, label, _ in rows)


def _refuse_merged_rows(rows, delimiter: str) -> None:
    """A quote opened in one row and closed in a later one merges the rows between into one text. CSV allows
    line breaks in quoted text, so the sign is a line inside a text that reads as a whole row of its own (the
    header's column count, ending in a label the file uses)."""
    labels = {str(label).strip() for _, _, label, _ in rows}
    for where, text, _, (columns, label_col) in rows:
        for inner in text.splitlines()[:-1]:
            fields = next(csv.reader([inner], delimiter=delimiter), [])
            if len(fields) == columns and fields[label_col].strip() in labels:
                raise DataError(f"{where}: a quoted text holds a line that reads as a row ('{inner[:40]}'); "
                                "close the quote that opens it, or double any quote inside the text")


def _rows_delimited_raw(path: Path, delimiter: str):
    csv.field_size_limit(CSV_FIELD_LIMIT)
    with _open_text(path) as handle:
        reader = _csv_reader(handle, delimiter)
        try:
            header = next(reader)
        except StopIteration:
            raise DataError(f"{path}: the file is empty; it needs a header row and examples") from None
        except csv.Error as exc:
            raise DataError(f"{path}:1: {exc}; fix the header row") from exc
        names = _header(path, header)
        text_col = next((names.index(c) for c in ("text", "sentence") if c in names), None)
        if text_col is None or "label" not in names:
            raise DataError(f"{path}:1: the header must name a 'text' (or 'sentence') column and a 'label' column")
        label_col = names.index("label")
        line = 1
        try:
            for row in reader:
                line = reader.line_num
                if not "".join(row).strip():  # no cells, or only blank ones
                    continue
                if len(row) != len(names):
                    raise DataError(f"{path}:{line}: {len(row)} columns where the header has {len(names)}; fix the row")
                yield f"{path}:{line}", row[text_col], row[label_col], (len(names), label_col)
        except csv.Error as exc:
            raise DataError(f"{path}:{reader.line_num}: {exc}; fix the row (a quote left open?)") from exc


def _json_lines(path: Path):
    """(line number, parsed value) of each non-blank line of a JSON Lines file."""
    with _open_text(path) as handle:
        for line, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            yield line, parse_json(raw, f"{path}:{line}", DataError, "each line must be one JSON object")


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
    # A file spells a handful of labels over tens of thousands of rows: each spelling is checked once, at the row
    # where it first appears, which is the row the checks would name row by row (two fifths of reading SST-2's
    # train split went to checking the same label again on every row).
    labels: dict[tuple[type, Any], str] = {}  # (type, raw label) -> the label as written; a bool is not the int
    first_rows: dict[str, str] = {}  # the label as written -> the row where it first appears, in file order

    def label_of(raw: Any, where: str) -> str:
        key = (type(raw), raw) if isinstance(raw, (str, int, float)) else None
        label = labels.get(key) if key is not None else None
        if label is None:
            label = _raw_label(raw, where)
            if key is not None:
                labels[key] = label
        first_rows.setdefault(label, where)
        return label

    with reading(path, DataError):
        raw_examples = [(where, _clean_text(text, where), label_of(label, where)) for where, text, label in rows()]
    if not raw_examples:
        raise DataError(f"{path} holds no examples; check that it is the right file")
    _refuse_look_alikes([(where, label) for label, where in first_rows.items()])
    if label_names is None:
        label_names = infer_label_names(list(first_rows), str(path))
    else:
        _refuse_mixed_spellings(first_rows, label_names)
    index = {label: _label_index(label, label_names, where) for label, where in first_rows.items()}
    return [TextExample(text, index[label]) for _, text, label in raw_examples], list(label_names)


def _refuse_mixed_spellings(first_rows: dict[str, str], label_names: list[str]) -> None:
    """With a label set given, a file names its classes or numbers them, not both (which would be ambiguous).
    `first_rows`: each label as written -> the row where it first appears, in file order."""
    by_name = next((w for label, w in first_rows.items() if label in label_names), None)
    by_index = next((w for label, w in first_rows.items() if label not in label_names and INDEX.fullmatch(label)),
                    None)
    if by_name and by_index:
        raise DataError(f"{by_index}: a class index where {by_name} names its class; write every label one way")


# ---------------------------------------------------------------- QA reader

def _answer_start(raw: Any, where: str) -> int:
    """A character position: a whole number >= 0 (a negative one used to slice from the end and could happen to
    read the answer; a fractional one was cut to its integer part)."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or raw < 0 \
            or (isinstance(raw, float) and not raw.is_integer()):
        raise DataError(f"{where}: answer_start {raw!r} is not a character position (a whole number >= 0); "
                        "fix the row")
    return int(raw)


def read_squad_file(path: Path) -> list[QAExample]:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path} does not exist; check the path or --data-dir")
    with reading(path, DataError), _open_text(path) as handle:
        text = handle.read()
    doc = parse_json(text, str(path), DataError, "it must be SQuAD-format JSON")
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
                        start, text = _answer_start(ans["answer_start"], where), ans["text"]
                        if context[start:start + len(text)] != text:
                            raise DataError(f"{where}: answer '{text}' is not at character {start} of its context")
                        answers.append((text, start))
                    examples.append(QAExample(str(qa["id"]), question, context, tuple(answers)))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise DataError(f"{path}: not SQuAD format ({type(exc).__name__}: {exc}); check the file") from exc
    if not examples:
        raise DataError(f"{path} holds no questions; check that it is the right file")
    return examples


# ---------------------------------------------------------------- hub splits (core/tasks/task_data.py resolves names)

def hub_sentiment(split) -> list[TextExample]:
    text_key = "sentence" if "sentence" in split.column_names else "text"
    return [TextExample(r[text_key].strip(), int(r["label"])) for r in split if r[text_key].strip()]


def hub_squad(split) -> list[QAExample]:
    return [QAExample(r["id"], r["question"], r["context"],
                      tuple(zip(r["answers"]["text"], r["answers"]["answer_start"]))) for r in split]


def check_cross_domain(names: list[str], task: str, label_names: list[str] | None = None) -> None:
    """Every eval.cross_domain entry is a dataset of the task (with the model's labels, when they are given) or a
    data file that exists: checked before the student trains, not after."""
    import difflib

    for name in names:
        spec = NAMED_DATASETS.get(name)
        if spec is None:
            if not Path(name).is_file():
                close = difflib.get_close_matches(name, list(NAMED_DATASETS), n=1)
                hint = f"did you mean {close[0]}?" if close else f"use {', '.join(NAMED_DATASETS)} or a data file"
                raise ConfigError(f"eval.cross_domain: unknown dataset '{name}' ({hint})")
            continue
        if spec.task != task:
            raise ConfigError(f"eval.cross_domain: '{name}' is a {spec.task} dataset, not {task}: name a dataset "
                              "of the run's task")
        if label_names and list(spec.label_names) != list(label_names):
            raise ConfigError(f"eval.cross_domain: '{name}' has labels {list(spec.label_names)}, the model "
                              f"{list(label_names)}: name a dataset with the model's labels")


def check_eval_file(train_path: Path, eval_file: Path) -> None:
    """An eval file that is the training file scores the model on what it learnt: refused."""
    eval_path = Path(eval_file)
    if eval_path.exists() and Path(train_path).exists() and eval_path.resolve() == Path(train_path).resolve():
        raise ConfigError(f"--eval-file {eval_file} is the training file; evaluate on examples the model did not "
                          "train on (leave --eval-file out to hold out a part of the training file)")


def hold_out(examples: list, n_eval: int, seed: int) -> tuple[list, list]:
    """A seeded eval split of n_eval examples; train keeps no example whose text is also held out
    (real corpora repeat texts, and a repeat on both sides would inflate the eval score)."""
    shuffled = list(examples)
    random.Random(seed).shuffle(shuffled)
    held = shuffled[:n_eval]
    held_keys = {separation_key(ex) for ex in held}
    kept = [ex for ex in shuffled[n_eval:] if separation_key(ex) not in held_keys]
    return kept, held


def separation_key(example) -> str:
    """What two examples share when one must not train while the other is scored: a sentence, or a question's
    context (every question on a held-out passage is held out with it)."""
    if isinstance(example, TextExample):
        return example.text
    return example.context if isinstance(example, QAExample) else example  # any other row stands for itself


def check_qa_separation(train: list[QAExample], eval_examples: list[QAExample], train_source: str,
                        eval_source: str) -> None:
    """No question of the eval split, by id or by context, is in the training split: a model scored on a passage
    it learnt from reports a score nobody else could compare with."""
    ids, contexts = {ex.id for ex in eval_examples}, {ex.context for ex in eval_examples}
    leaked = next((ex for ex in train if ex.id in ids or ex.context in contexts), None)
    if leaked is not None:
        how = f"id {leaked.id}" if leaked.id in ids else "its context"
        raise DataError(f"{train_source} holds question {leaked.id!r} of {eval_source} (by {how}): train on data "
                        "that holds none of the eval split's passages")


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
        reader = _csv_reader(handle, delimiter)
        try:
            header = _header(path, next(reader))
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
        with reading(path, DataError):
            passages = [text.strip() for text in rows() if text.strip()]
    except csv.Error as exc:
        raise DataError(f"{path}: {exc}; fix the file") from None
    if not passages:
        raise DataError(f"{path} holds no text; check that it is the right file (and --transfer-column)")
    return passages


def text_key(text: str) -> str:
    """A text as duplicates compare: case and runs of whitespace ignored."""
    return " ".join(text.lower().split())
