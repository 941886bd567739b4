"""The app tokenizers' exhaustive checks are cached by what they check: the program (by its place in the cache
folder, which names its sources' hash), the contexts and the tokenizer's files, whatever root the cache is reached
through."""

from __future__ import annotations

from pocketbert.core.run.cache_dir import CACHE_ENV
from pocketbert.export.app import app_tokenizer_check


def _jar(root, folder: str) -> list[str]:
    return ["java", "-cp", str(root / "app-programs" / folder / "pocketbert-tokenize.jar"), "Main"]


def test_a_program_built_in_the_cache_is_named_by_its_place_there_not_by_the_cache_root(tmp_path, monkeypatch):
    ran = []

    def checked(command, *args, **options):  # stands in for the minutes a real program takes: what is run is counted
        ran.append(command)
        return {"mismatch_count": 0, "first_mismatches": []}

    monkeypatch.setattr(app_tokenizer_check, "check", checked)
    files = [tmp_path / name for name in ("tokenizer.json", "tokenizer.tables", "tokenizer_golden.json")]
    for path in files:
        path.write_text(path.name)
    first = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(first))
    assert app_tokenizer_check.cached_check(_jar(first, "kotlin-a"), *files, "kotlin")["cached"] is False
    assert app_tokenizer_check.cached_check(_jar(first, "kotlin-a"), *files, "kotlin")["cached"] is True

    # another cache root that links the checks' folder (as the GPU check's dry run links the export's folders)
    second = tmp_path / "dry-run" / "cache"
    second.mkdir(parents=True)
    (second / app_tokenizer_check.CACHE_FOLDER).symlink_to(first / app_tokenizer_check.CACHE_FOLDER,
                                                           target_is_directory=True)
    monkeypatch.setenv(CACHE_ENV, str(second))
    assert app_tokenizer_check.cached_check(_jar(second, "kotlin-a"), *files, "kotlin")["cached"] is True
    # other sources (another folder in the cache), or a program outside the cache, are checked afresh
    assert app_tokenizer_check.cached_check(_jar(second, "kotlin-b"), *files, "kotlin")["cached"] is False
    outside = ["java", "-cp", str(tmp_path / "pocketbert-tokenize.jar"), "Main"]
    assert app_tokenizer_check.cached_check(outside, *files, "kotlin")["cached"] is False
    assert ran == [_jar(first, "kotlin-a"), _jar(second, "kotlin-b"), outside]
