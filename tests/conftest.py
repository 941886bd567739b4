"""Fixtures: tiny BERT models built from a config (2 layers, hidden 32) with the real uncased WordPiece tokenizer, and
the session's one tiny run trained and exported through the real CLI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import TINY_CONFIG
from suite_order import longest_first, recorded_file_seconds

import pocketbert.train.registry  # noqa: F401  (recipes are read with every training recipe's own sections, as
                                  # the `pocketbert` command reads them: pocketbert/cli.py loads the registry first)
from pocketbert.core.process.collector import collect_less

# A test process holds every tool's modules at once: the collector's default thresholds walk that heap again and
# again (about a fifth of `make test-fast`'s CPU). Set before the test modules load, as the command sets it.
collect_less()

REPO_ROOT = Path(__file__).resolve().parent.parent


# Fixtures that train or export through the CLI: a test that uses one is `slow` whether or not its file says so, so
# `make test-fast` never builds them.
SLOW_FIXTURES = {"teacher_run", "exported_run", "quick_exported_run"}


def marked_slow_as_a_whole(path: Path) -> bool:
    """The module's own `pytestmark` names `slow`: every test in it is slow, read from its source unimported."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets)
               and "mark.slow" in ast.unparse(node.value) for node in tree.body)


def pytest_ignore_collect(collection_path, config):
    """Under `-m "not slow"`, a file marked slow as a whole is not imported at all: its imports (coremltools pulls
    in ExecuTorch) were most of `make test-fast`'s time, for tests the mark then deselects."""
    if (config.getoption("markexpr", "") == "not slow" and collection_path.suffix == ".py"
            and collection_path.name.startswith("test_") and marked_slow_as_a_whole(collection_path)):
        return True
    return None


@pytest.hookimpl(tryfirst=True)  # before `-m "not slow"` deselects
def pytest_collection_modifyitems(items):
    """Files by their recorded seconds, the longest first: the test processes take files in collection order (the
    Makefile's --no-loadscope-reorder keeps it), so both end together."""
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    files = list(dict.fromkeys(item.nodeid.split("::")[0] for item in items))
    rank = {f: k for k, f in enumerate(longest_first(files, recorded_file_seconds()))}
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])


def data_dir() -> Path:
    configured = os.environ.get("POCKETBERT_DATA_DIR")
    path = Path(configured) if configured else REPO_ROOT.parent / "shared" / "data"
    if not (path / "sst2" / "train.tsv").is_file():
        pytest.skip(f"real datasets not found at {path}: set POCKETBERT_DATA_DIR")
    return path


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return data_dir()


@pytest.fixture(scope="session")
def wordpiece_tokenizer():
    from pocketbert.core.students.models import PACKAGED_TEACHER, load_tokenizer, resolve_model_source

    return load_tokenizer(resolve_model_source(PACKAGED_TEACHER))


def make_tiny_base(folder: Path, tokenizer, layers: int = 2) -> Path:
    """A randomly initialised BertModel saved like a hub checkpoint (config, safetensors, tokenizer)."""
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, **{**TINY_CONFIG, "num_hidden_layers": layers})
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory, wordpiece_tokenizer) -> Path:
    return make_tiny_base(tmp_path_factory.mktemp("tiny-base"), wordpiece_tokenizer)


@pytest.fixture(scope="session")
def tiny_reference(tmp_path_factory, wordpiece_tokenizer) -> Path:
    """What the bench tests time the student against in place of BERT-base (whose shape mobile_bench/test_reference.py
    checks): tiny, and a layer deeper than the tiny teacher, so the teacher is still timed as a model of its own.
    One folder a session (built_once): the bench's exports of a reference are cached by its path."""
    return built_once(tmp_path_factory, "tiny-reference",
                      lambda folder: make_tiny_base(folder / "model", wordpiece_tokenizer, layers=3))


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory):
    """Tests never read or fill the user's cache (teacher outputs, BERT-base exports). Under `pytest -n`, the
    session's workers share one (cache_dir.building keeps two from building one entry at once)."""
    from pocketbert.core.run.cache_dir import CACHE_ENV

    previous = os.environ.get(CACHE_ENV)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # one cache for the session's workers: each entry is built once
        shared = tmp_path_factory.getbasetemp().parent / "pocketbert-cache"
        shared.mkdir(exist_ok=True)
        os.environ[CACHE_ENV] = str(shared)
    else:
        os.environ[CACHE_ENV] = str(tmp_path_factory.mktemp("pocketbert-cache"))
    yield Path(os.environ[CACHE_ENV])
    if previous is None:
        os.environ.pop(CACHE_ENV, None)
    else:
        os.environ[CACHE_ENV] = previous


@pytest.fixture(scope="session")
def teacher_run(tmp_path_factory, tiny_base, shared_data) -> Path:
    """A run directory holding a tiny teacher fine-tuned through the real CLI, once a test run (built_once): copy it
    before writing into it."""
    from pocketbert.cli import main

    def build(folder: Path) -> Path:
        run = folder / "base"
        try:
            main(["train", "teacher", "--run", str(run), "--model", str(tiny_base), "--preset", "tiny", "--device",
                  "cpu", "--data-dir", str(shared_data)])
        except SystemExit as exc:
            assert exc.code in (0, None)
        return run

    return built_once(tmp_path_factory, "tiny-teacher", build)


def built_once(tmp_path_factory, name: str, build) -> Path:
    """build(folder) -> the run it made inside folder, once a session: under `pytest -n`, the first worker that asks
    builds it and the others wait for it and read the same folder."""
    import shutil

    from pocketbert.core.run.cache_dir import building

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return build(tmp_path_factory.mktemp(name))
    shared = tmp_path_factory.getbasetemp().parent / name
    done = shared / "run-path.txt"
    with building(shared):
        if not done.is_file():
            shutil.rmtree(shared, ignore_errors=True)  # a worker that failed midway left a part
            shared.mkdir()
            done.write_text(str(build(shared)))
    return Path(done.read_text())


@pytest.fixture(scope="session")
def exported_run(tmp_path_factory, teacher_run, shared_data) -> Path:
    """teacher_run's teacher, its tiny student and the export with every variant of the tiny preset, through the real
    CLI: the one export the test modules share, built once a session (built_once). Read only: a test that writes
    into a run takes linked_copy of it."""
    from helpers import run_cli_steps, run_with_teacher

    def build(folder: Path) -> Path:
        run = run_with_teacher(teacher_run, folder / "tiny")
        run_cli_steps(["train", "distill", "--run", run, "--preset", "tiny", "--device", "cpu", "--data-dir",
                       shared_data], ["export", "--run", run, "--data-dir", shared_data])
        return run

    return built_once(tmp_path_factory, "exported", build)


@pytest.fixture(scope="session")
def quick_exported_run(tmp_path_factory, teacher_run, shared_data) -> Path:
    """teacher_run's teacher, its tiny student and a QUICK_EXPORT (one Core ML program, ONNX and ORT): for tests
    of what reads or sits beside any export (app folders, the device kit, locks). Built once a session (built_once).
    Read only: copy it."""
    from helpers import QUICK_EXPORT, run_cli_steps, run_with_teacher

    def build(folder: Path) -> Path:
        run = run_with_teacher(teacher_run, folder / "tiny")
        run_cli_steps(["train", "distill", "--run", run, "--preset", "tiny", "--device", "cpu", "--data-dir",
                       shared_data], ["export", "--run", run, "--data-dir", shared_data, *QUICK_EXPORT])
        return run

    return built_once(tmp_path_factory, "quick-exported", build)


# ---------------------------------------------------------------- the suite's durations, recorded

def pytest_addoption(parser):
    parser.addoption("--durations-file", default=None, metavar="PATH",
                     help="Write every test's seconds (setup, call and teardown), and each file's sum, as JSON.")


_DURATIONS: dict[str, dict] = {}


def pytest_runtest_logreport(report):
    """On the controlling process (under xdist the workers' reports arrive here too)."""
    entry = _DURATIONS.setdefault(report.nodeid, {"setup": 0.0, "call": 0.0, "teardown": 0.0, "outcome": "passed"})
    entry[report.when] = round(report.duration, 3)
    if report.outcome != "passed" and (report.when == "call" or report.outcome == "failed"):
        entry["outcome"] = report.outcome
    entry["worker"] = getattr(report, "node", None) and report.node.gateway.id


def pytest_sessionfinish(session):
    import json
    import time

    target = session.config.getoption("durations_file")
    if not target or hasattr(session.config, "workerinput"):  # a worker: the controller writes the file
        return
    tests = [{"test": nodeid, "seconds": round(e["setup"] + e["call"] + e["teardown"], 3), **e}
             for nodeid, e in _DURATIONS.items()]
    tests.sort(key=lambda t: -t["seconds"])
    files: dict[str, float] = {}
    for t in tests:
        files[t["test"].split("::")[0]] = files.get(t["test"].split("::")[0], 0.0) + t["seconds"]
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    Path(target).write_text(json.dumps({
        "recorded": time.strftime("%Y-%m-%d"), "tests": len(tests),
        "test_seconds": round(sum(t["seconds"] for t in tests), 1),
        "files": dict(sorted(((f, round(s, 1)) for f, s in files.items()), key=lambda kv: -kv[1])),
        "by_test": tests}, indent=1) + "\n")
