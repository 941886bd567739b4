"""Dataset readers on the real files, and their errors on broken ones."""

from __future__ import annotations

import gzip
import json

import pytest

from pocketbert.core.errors import ConfigError, DataError
from pocketbert.core.tasks.data import IMDB_EVAL_SIZE, read_sentiment_file, read_squad_file, subsample
from pocketbert.core.tasks.task_data import load_task_data

SST2_DEV_SIZE = 872
EMOTION_VAL_SIZE = 2000


@pytest.mark.slow
def test_sst2_from_data_dir(shared_data):
    data = load_task_data("sst2", "sentiment", shared_data)
    assert data.label_names == ["negative", "positive"]
    assert len(data.eval) == SST2_DEV_SIZE
    assert data.eval[0].text == "it 's a charming and often affecting journey ."
    assert data.eval[0].label == 1
    assert {ex.label for ex in data.train} == {0, 1}


def test_emotion_has_six_named_labels(shared_data):
    data = load_task_data("emotion", "sentiment", shared_data)
    assert data.label_names == ["sadness", "joy", "love", "anger", "fear", "surprise"]
    assert len(data.eval) == EMOTION_VAL_SIZE
    assert data.train[0].text == "i didnt feel humiliated" and data.train[0].label == 0


@pytest.mark.slow
def test_imdb_holds_out_a_fixed_eval_split(shared_data):
    first = load_task_data("imdb", "sentiment", shared_data)
    again = load_task_data("imdb", "sentiment", shared_data)
    assert len(first.eval) == IMDB_EVAL_SIZE
    assert first.eval == again.eval
    assert not set(first.eval) & set(first.train)


def test_wrong_task_for_named_dataset(shared_data):
    with pytest.raises(ConfigError, match="--task qa"):
        load_task_data("squad", "sentiment", shared_data)


def test_csv_with_string_labels_infers_sorted_label_set(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text('text,label\n"good, really",pos\nbad,neg\nfine,pos\n')
    examples, names = read_sentiment_file(path)
    assert names == ["neg", "pos"]
    assert [(e.text, e.label) for e in examples] == [("good, really", 1), ("bad", 0), ("fine", 1)]


def test_gzipped_jsonl_with_integer_labels(tmp_path):
    path = tmp_path / "d.jsonl.gz"
    with gzip.open(path, "wt") as handle:
        for text, label in [("a", 0), ("b", 2), ("c", 1)]:
            handle.write(json.dumps({"text": text, "label": label}) + "\n")
    examples, names = read_sentiment_file(path)
    assert names == ["0", "1", "2"]
    assert [e.label for e in examples] == [0, 2, 1]


def test_crlf_and_bom_are_read_cleanly(tmp_path):
    path = tmp_path / "d.tsv"
    path.write_bytes("\ufefftext\tlabel\r\nnice\t1\r\nawful\t0\r\n".encode())
    examples, names = read_sentiment_file(path, ["negative", "positive"])
    assert [(e.text, e.label) for e in examples] == [("nice", 1), ("awful", 0)]


@pytest.mark.parametrize("content, message", [
    ("text\tlabel\ngood\t1\textra\n", "3 columns where the header has 2"),
    ("text\tlabel\ngood\t\n", "empty label"),
    ("", "the file is empty"),
    ("text\tlabel\n", "holds no examples"),
])
def test_broken_tsv_rows(tmp_path, content, message):
    path = tmp_path / "d.tsv"
    path.write_text(content)
    with pytest.raises(DataError, match=message):
        read_sentiment_file(path)


def test_unknown_extension(tmp_path):
    path = tmp_path / "d.parquet"
    path.write_text("x")
    with pytest.raises(DataError, match="unknown file type"):
        read_sentiment_file(path)


def test_squad_answer_offset_mismatch_is_caught(tmp_path):
    doc = {"data": [{"paragraphs": [{"context": "Paris is in France.",
                                     "qas": [{"id": "q1", "question": "Where?",
                                              "answers": [{"text": "France", "answer_start": 3}]}]}]}]}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(DataError, match="not at character 3"):
        read_squad_file(path)


def test_subsample_is_seeded_and_bounded():
    items = list(range(100))
    assert subsample(items, 10, 1) == subsample(items, 10, 1)
    assert len(subsample(items, 10, 1)) == 10
    assert subsample(items, None, 1) == items
