"""The tokenizer graph's cache entries (the code-point mapping, the exhaustive check's result): built once, read
after, built again when damaged, and not kept when the caller says the value must not be."""

from __future__ import annotations

import json

from pocketbert.export.text_in.text_tokenizer import cached_or_built


def test_an_entry_is_built_once_then_read(tmp_path):
    path, builds = tmp_path / "cache" / "entry.json", []

    def build():
        builds.append(1)
        return {"value": len(builds)}

    assert cached_or_built(path, json.loads, build) == {"value": 1}
    assert cached_or_built(path, json.loads, build) == {"value": 1}
    assert len(builds) == 1 and json.loads(path.read_text()) == {"value": 1}


def test_a_damaged_entry_is_built_again(tmp_path):
    path = tmp_path / "entry.json"
    path.write_text("{not json")
    assert cached_or_built(path, json.loads, lambda: {"value": 2}) == {"value": 2}
    assert json.loads(path.read_text()) == {"value": 2}


def test_a_value_the_caller_will_not_keep_is_built_every_time(tmp_path):
    path, builds = tmp_path / "entry.json", []

    def build():
        builds.append(1)
        return {"mismatch_count": 3}

    for _ in range(2):
        assert cached_or_built(path, json.loads, build, keep=lambda v: v["mismatch_count"] == 0)["mismatch_count"] == 3
    assert len(builds) == 2 and not path.exists()


def test_a_cache_folder_that_cannot_be_written_still_gives_the_value(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the cache folder should be: no lock, no entry
    assert cached_or_built(blocked / "entry.json", json.loads, lambda: {"value": 3}) == {"value": 3}


def test_dump_and_read_round_trip_a_value_that_is_not_json(tmp_path):
    path = tmp_path / "entry.json"
    built = cached_or_built(path, lambda text: set(json.loads(text)), lambda: {1, 2}, dump=sorted)
    assert built == {1, 2} and cached_or_built(path, lambda text: set(json.loads(text)), lambda: set()) == {1, 2}
