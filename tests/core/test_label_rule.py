"""The label-set rule (pocketbert/core/tasks/data.py): names as written, ordered by code point; numbers only as class
indices 0, 1, 2, ... with none missing and at most MAX_CLASSES; never both in one file; two classes at least.
Whatever a file's labels spell, the reader returns that set or one DataError line, never another exception."""

from __future__ import annotations

import pytest

from pocketbert.core.tasks.data import read_sentiment_file
from pocketbert.core.errors import DataError
from tests.helpers import error_line, run_cli

USAGE_ERROR = 2


def _tsv(tmp_path, labels, name="d.tsv"):
    path = tmp_path / name
    path.write_text("text\tlabel\n" + "".join(f"row {i}\t{label}\n" for i, label in enumerate(labels)),
                    encoding="utf-8")
    return path


def test_names_are_kept_as_written_and_ordered_by_code_point(tmp_path):
    _, names = read_sentiment_file(_tsv(tmp_path, ["pos", "Neg", "pos", "²"]))
    _, shuffled = read_sentiment_file(_tsv(tmp_path, ["²", "pos", "Neg"], "e.tsv"))
    assert names == shuffled == ["Neg", "pos", "²"]


def test_dense_numeric_labels_are_class_indices(tmp_path):
    examples, names = read_sentiment_file(_tsv(tmp_path, ["2", "0", "1", "0"]))
    assert names == ["0", "1", "2"] and [e.label for e in examples] == [2, 0, 1, 0]


@pytest.mark.parametrize("labels, words", [
    (["0", "1", "500"], "never occurs"),           # a typo for 1 must not make a 501-class model
    (["0", "1", "1000"], "beyond the 1000"),
    (["1", "positive", "0"], "mix numbers"),       # two spellings of one class would become three classes
    (["00", "01"], "not a class index"),           # traceback before
    (["0", "1", "-1"], "not a class index"),
    (["0", "1.5", "1"], "not a class index"),
    (["positive", "positive"], "single class"),    # a one-class classifier learns nothing
    (["3", "3"], "never occurs"),
])
def test_label_sets_that_are_refused(tmp_path, labels, words):
    with pytest.raises(DataError, match=words) as caught:
        read_sentiment_file(_tsv(tmp_path, labels))
    assert "\n" not in str(caught.value)


def test_a_label_beyond_the_bound_is_refused_without_building_it(tmp_path):
    with pytest.raises(DataError, match="beyond the 1000 classes"):
        read_sentiment_file(_tsv(tmp_path, ["0", "1", "9999999999"]))


def test_superscript_digits_are_names_not_a_traceback(tmp_path):
    _, names = read_sentiment_file(_tsv(tmp_path, ["²", "³", "²"]))
    assert names == ["²", "³"]


def test_a_given_label_set_refuses_a_file_mixing_names_and_indices(tmp_path):
    with pytest.raises(DataError, match="write every label one way"):
        read_sentiment_file(_tsv(tmp_path, ["1", "negative"]), ["negative", "positive"])


@pytest.mark.parametrize("labels, words", [
    ("neg,pos,neg", "given twice"),
    ("neg,,pos", "empty"),
    ("only", "single class"),
])
def test_bad_labels_option_is_one_line_before_any_work(capsys, tmp_path, tiny_base, labels, words):
    data = _tsv(tmp_path, ["neg", "pos", "neg", "pos"])
    run = tmp_path / "run"
    result = run_cli(capsys, "train", "teacher", "--run", run, "--model", tiny_base, "--dataset", data,
                     "--preset", "tiny", "--device", "cpu", "--labels", labels)
    assert result.exit_code == USAGE_ERROR
    assert error_line(result).startswith("error: --labels") and words in error_line(result)
    assert "Traceback" not in result.err and not run.exists()


def test_labels_option_for_a_named_dataset_is_refused_not_ignored(capsys, tmp_path, tiny_base, shared_data):
    run = tmp_path / "run"
    result = run_cli(capsys, "train", "teacher", "--run", run, "--model", tiny_base, "--dataset", "sst2",
                     "--data-dir", shared_data, "--preset", "tiny", "--device", "cpu", "--labels", "bad,good",
                     "--max-train-examples", "8")
    assert result.exit_code == USAGE_ERROR
    assert "leave --labels out" in error_line(result)
    assert not run.exists()


def test_one_class_file_is_refused_through_the_cli(capsys, tmp_path, tiny_base):
    data = _tsv(tmp_path, ["positive"] * 6)
    run = tmp_path / "run"
    result = run_cli(capsys, "train", "teacher", "--run", run, "--model", tiny_base, "--dataset", data,
                     "--preset", "tiny", "--device", "cpu")
    assert result.exit_code == USAGE_ERROR and "single class" in error_line(result)
    assert error_line(result).startswith("error:") and "Traceback" not in result.err and not run.exists()


def test_a_label_checked_once_is_named_at_the_first_row_that_writes_it(tmp_path):
    """Each spelling is checked once: the error still names the row where the bad label first appears, and every
    row of a good label gets its class."""
    repeated = ["0", "1", "0", "1\u200b", "1", "1\u200b"]  # line 1 is the header: the zero-width space is on line 5
    with pytest.raises(DataError, match=r"d\.tsv:5: label '1\\u200b' holds an invisible character"):
        read_sentiment_file(_tsv(tmp_path, repeated))
    look_alike = ["pos", "neg", "Neg", "neg", "Neg"]
    with pytest.raises(DataError, match=r"d\.tsv:4: label 'Neg' differs from 'neg' \(.*d\.tsv:3\)"):
        read_sentiment_file(_tsv(tmp_path, look_alike))
    with pytest.raises(DataError, match=r"d\.tsv:4: label 'neutral' is not in the label set"):
        read_sentiment_file(_tsv(tmp_path, ["negative", "positive", "neutral", "neutral"]), ["negative", "positive"])
    examples, names = read_sentiment_file(_tsv(tmp_path, ["b", "a", "b", "b", "a"]))
    assert names == ["a", "b"] and [e.label for e in examples] == [1, 0, 1, 1, 0]
