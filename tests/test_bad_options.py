"""Every option and recipe value is checked before any work: a value out of range, not finite, of the wrong kind
or naming something that does not exist ends in one `error:` line naming the option, exit 2, nothing written.
Runs and data named here do not exist, so a check that came late would fail on them with another message."""

from __future__ import annotations

import json

import pytest

from tests.helpers import error_line, run_cli

USAGE_ERROR = 2


def _refused(result, *words):
    line = error_line(result)
    assert result.exit_code == USAGE_ERROR, result.err
    assert line.startswith("error:") and all(w in line for w in words), line
    assert "Traceback" not in result.err
    assert len([ln for ln in result.err.splitlines() if ln.strip()]) == 1, result.err


@pytest.mark.parametrize("args, words", [
    (["train", "distill", "--cross-domain", "imbd"], ["eval.cross_domain", "did you mean imdb"]),
    (["train", "distill", "--cross-domain", "squad"], ["eval.cross_domain", "qa dataset"]),
    (["train", "teacher", "--seed", str(2**40)], ["--seed"]),
    (["train", "teacher", "--seed", "-1"], ["--seed"]),
    (["train", "teacher", "--epochs", "0"], ["--epochs"]),
    (["train", "teacher", "--focal-alpha", "-0.5"], ["--focal-alpha"]),
    (["train", "teacher", "--focal-gamma", "nan"], ["--focal-gamma"]),
    (["train", "distill", "--temperature", "inf"], ["--temperature"]),
    (["train", "teacher", "--set", "teacher.learning_rate=.inf"], ["teacher.learning_rate", "finite"]),
    (["train", "teacher", "--set", "teacher.focal_alpha=-1"], ["teacher.focal_alpha", ">= 0"]),
    (["train", "teacher", "--set", "teacher.focal_alpha=[0.5, -1]"], ["teacher.focal_alpha", ">= 0"]),
    (["train", "teacher", "--set", "bench.time_cap_s=.inf"], ["bench.time_cap_s"]),
    (["train", "teacher", "--set", "teacher.epochs="], ["--set", "no value"]),
    (["train", "teacher", "--set", "=4"], ["--set", "name a recipe key"]),
    (["train", "teacher", "--set", "teacher.epochs=[1"], ["--set", "not valid YAML"]),
    (["train", "teacher", "--set", "seed=1", "--set", "seed=2"], ["--set seed", "twice"]),
    (["export", "--parity-examples", "0"], ["--parity-examples"]),
    (["export", "--coreml-examples", "-3"], ["--coreml-examples"]),
    (["export", "--coreml-examples", "0"], ["--coreml-examples"]),
    (["train", "teacher", "--set", "export.coreml_parity_examples=0"], ["export.coreml_parity_examples"]),
    (["export", "--coreml-variants", "fp16,"], ["--coreml-variants", "comma-separated"]),
    (["export", "--vocabulary", "half"], ["--vocabulary"]),
    (["export", "--vocabulary-min-count", "0"], ["--vocabulary-min-count"]),
    (["export", "--vocabulary-max-rows", "-5"], ["--vocabulary-max-rows"]),
    (["train", "teacher", "--set", "export.vocabulary=half"], ["export.vocabulary", "full", "fitted"]),
    (["train", "teacher", "--set", "vocabulary.min_count=0"], ["vocabulary.min_count"]),
    (["train", "teacher", "--set", "export.vocabulary_min_count=3"], ["unknown key export.vocabulary_min_count"]),
    (["export", "--coreml-variants", "fp16,int8,fp16"], ["--coreml-variants", "fp16 more than once"]),
    (["export", "--coreai-variants", ","], ["--coreai-variants", "comma-separated"]),
    (["train", "distill", "--layer-map", "0,,2"], ["--layer-map", "comma-separated"]),
    (["inspect", "--perplexity", "-1"], ["--perplexity"]),
    (["inspect", "--perplexity", "nan"], ["--perplexity"]),
    (["bench", "--time-cap", "nan"], ["--time-cap"]),
    (["bench", "--time-cap", "inf"], ["--time-cap"]),
    (["bench", "--threads", "100000"], ["--threads"]),
])
def test_option_refused_before_any_work(capsys, tmp_path, args, words):
    run = tmp_path / "run"
    # A tiny preset and a dataset that does not exist: a check that came late fails on them, with other words.
    train = ["--dataset", tmp_path / "missing.tsv", "--preset", "tiny"] if args[0] == "train" else []
    result = run_cli(capsys, *args, *train, "--run", run)
    _refused(result, *words)
    assert not run.exists()


@pytest.mark.parametrize("args, words", [
    (["--runtime", "bogus"], ["--runtime"]),
    (["--threads", "-4"], ["--threads"]),
    (["--format", "banana"], ["--format"]),
])
def test_compare_options_refused(capsys, tmp_path, args, words):
    out = tmp_path / "cmp"
    _refused(run_cli(capsys, "compare", tmp_path / "a", tmp_path / "b", "--out", out, *args), *words)
    assert not out.exists()


PHONE_FILE = {"predict": {"samples": [4.0, 4.2, 4.1, 4.3, 4.0]}, "device": "iPhone 15 Pro", "os": "iOS 17",
              "compute_units": "ALL"}


@pytest.mark.parametrize("args, words", [
    (["--batch", "0"], ["--batch"]),
    (["--sequence-length", "-7"], ["--sequence-length"]),
    (["--precision", "banana"], ["--precision"]),
])
def test_bench_import_options_refused_and_no_run_folder_made(capsys, tmp_path, args, words):
    phone = tmp_path / "phone.json"
    phone.write_text(json.dumps(PHONE_FILE))
    run = tmp_path / "run"
    _refused(run_cli(capsys, "bench", "import", phone, "--run", run, "--device", "iphone-15-pro",
                     "--sequence-length", "128", *args), *words)
    assert not run.exists()


def test_bench_import_into_a_run_that_does_not_exist_makes_no_folder(capsys, tmp_path):
    phone = tmp_path / "phone.json"
    phone.write_text(json.dumps(PHONE_FILE))
    run = tmp_path / "run"
    _refused(run_cli(capsys, "bench", "import", phone, "--run", run, "--device", "iphone-15-pro",
                     "--sequence-length", "128"), "not a run directory")
    assert not run.exists()


@pytest.mark.parametrize("latency", ["1e999", "1E400"])
def test_an_infinite_phone_latency_is_refused(capsys, tmp_path, latency):
    phone = tmp_path / "phone.json"
    phone.write_text('{"xcode_performance_report": {"prediction_median_ms": %s, "device": "iPhone 15", '
                     '"compute_units": "All"}}' % latency)
    run = tmp_path / "run"
    run.mkdir()
    _refused(run_cli(capsys, "bench", "import", phone, "--run", run, "--device", "iphone-15",
                     "--sequence-length", "128"), str(phone))
    assert list(run.iterdir()) == []


def test_config_that_is_not_utf8_is_one_line(capsys, tmp_path):
    config = tmp_path / "recipe.yaml"
    config.write_bytes(b"task: sentiment\ndataset: \xff\xfe\n")
    _refused(run_cli(capsys, "train", "teacher", "--run", tmp_path / "run", "--config", config), "UTF-8")
    assert not (tmp_path / "run").exists()


def test_eval_file_that_is_the_training_file_is_refused(capsys, tmp_path, tiny_base):
    data = tmp_path / "d.tsv"
    data.write_text("text\tlabel\n" + "".join(f"row {i}\t{i % 2}\n" for i in range(8)))
    run = tmp_path / "run"
    _refused(run_cli(capsys, "train", "teacher", "--run", run, "--model", tiny_base, "--dataset", data,
                     "--eval-file", data, "--preset", "tiny", "--device", "cpu"), "--eval-file", "training file")
    assert not run.exists()


def test_focal_alpha_of_the_wrong_length_is_refused_before_training(capsys, tmp_path, tiny_base):
    data = tmp_path / "d.tsv"
    data.write_text("text\tlabel\n" + "".join(f"row {i}\t{i % 2}\n" for i in range(8)))
    run = tmp_path / "run"
    _refused(run_cli(capsys, "train", "teacher", "--run", run, "--model", tiny_base, "--dataset", data,
                     "--preset", "tiny", "--device", "cpu", "--set", "teacher.hard_loss=focal",
                     "--set", "teacher.focal_alpha=[0.2, 0.3, 0.5]"), "3 weights for 2 classes")
    assert not run.exists()


def test_empty_cache_variable_is_not_the_working_directory(monkeypatch, tmp_path):
    from pocketbert.core.run.cache_dir import CACHE_ENV, cache_root

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(CACHE_ENV, "")
    assert cache_root().resolve() != tmp_path.resolve()
    assert cache_root().is_absolute()


def test_import_refuses_a_gpt2_checkpoint_at_once(capsys, tmp_path, shared_data):
    from transformers import GPT2Config, GPT2ForSequenceClassification

    source = tmp_path / "gpt2"
    config = GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=300, n_positions=64, num_labels=2,
                        id2label={0: "negative", 1: "positive"}, label2id={"negative": 0, "positive": 1})
    GPT2ForSequenceClassification(config).save_pretrained(source)
    run = tmp_path / "run"
    _refused(run_cli(capsys, "import", "--run", run, "--model", source, "--dataset", "sst2",
                     "--data-dir", shared_data), "gpt2", "not BERT-family")
    assert not run.exists()


HUGE_BATCH = 100_000  # far more than the tiny preset's 64 training examples


@pytest.mark.slow
def test_a_batch_larger_than_the_data_is_capped_with_its_learning_rate(capsys, tmp_path, tiny_base, shared_data):
    """--batch-size 100000 used to scale the learning rate by sqrt(100000 / 16) = 79x for a batch that never
    exists (an epoch was one batch of the 64 examples); the batch and its scaling are capped at the data, and said."""
    run = tmp_path / "run"
    result = run_cli(capsys, "train", "teacher", "--run", run, "--model", tiny_base, "--preset", "tiny",
                     "--data-dir", shared_data, "--batch-size", HUGE_BATCH)
    assert result.exit_code == 0, result.err
    manifest = json.loads((run / "teacher" / "manifest.json").read_text())
    train, recipe = manifest["metrics"]["train"], manifest["config"]["recipe"]["teacher"]
    examples, base, rate = train["train_examples"], recipe["base_batch_size"], recipe["learning_rate"]
    assert train["batch_size_asked"] == HUGE_BATCH and train["global_batch_size"] == examples
    assert train["learning_rate"] == pytest.approx(rate * (examples / base) ** 0.5)
    assert f"a batch of {HUGE_BATCH} is more than the {examples} training examples" in result.err


@pytest.mark.parametrize("args, words", [
    # export --set takes every key of the export and vocabulary sections, checked before the run is even looked at
    (["export", "--set", "export.int8_size_budgt=0.4"], ["unknown key export.int8_size_budgt"]),
    (["export", "--set", "export.int8_size_budget=7"], ["export.int8_size_budget", "<= 1.0"]),
    (["export", "--set", "distill.epochs=2"], ["keys of the export and vocabulary sections"]),
    (["export", "--set", "vocabulary.max_rows=-5"], ["vocabulary.max_rows", "> 0"]),
    (["export", "--set", "export.coreml_variants=[fp16,fp16]"], ["export.coreml_variants names fp16 more than once"]),
    (["export", "--set", "export.max_length=100000000"], ["export.max_length", "<= 8192"]),
    (["export", "--parity-examples", "3", "--set", "export.parity_examples=4"], ["both set parity_examples"]),
    (["export", "--vocabulary-min-count", "3", "--set", "vocabulary.min_count=4"], ["both set min_count"]),
    # every bench value bounded to what can finish, every list free of repeats
    (["bench", "--set", "bench.time_cap_s=1e9"], ["bench.time_cap_s", "<= 600"]),
    (["bench", "--set", "bench.threads=[1,1]"], ["bench.threads names 1 more than once"]),
    (["bench", "--set", "bench.threads=[100000]"], ["threads must be a list of whole numbers from 1 to 256"]),
    (["bench", "--set", "bench.warmup=1000000000"], ["bench.warmup", "<= 100000"]),
])
def test_export_and_bench_settings_are_bounded_and_checked_before_any_work(capsys, tmp_path, args, words):
    _refused(run_cli(capsys, *args, "--run", tmp_path / "no-such-run"), *words)


@pytest.mark.parametrize("command", [["train", "teacher", "--preset", "nope"], ["train", "distill"], ["export"],
                                     ["bench"], ["train", "vocabulary"]])
def test_a_refused_run_path_leaves_none_of_its_folders(capsys, tmp_path, monkeypatch, command):
    """The lock of a/b/c sits in a/b: a command refused there removes every folder it made for it, not only a/b."""
    monkeypatch.chdir(tmp_path)
    result = run_cli(capsys, *command, "--run", "a/b/c", "--data-dir", tmp_path / "no-data")
    assert result.exit_code == USAGE_ERROR, result.err
    assert list(tmp_path.iterdir()) == []


def test_train_vocabulary_refuses_a_setting_it_would_not_read(capsys, tmp_path):
    _refused(run_cli(capsys, "train", "vocabulary", "--run", tmp_path / "run", "--set", "teacher.epochs=5"),
             "teacher.epochs", "reads the vocabulary, export and transfer sections")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("variant", ["", " "])
def test_export_ios_refuses_an_empty_program_name(capsys, tmp_path, variant):
    _refused(run_cli(capsys, "export", "ios", "--run", tmp_path / "run", "--variant", variant), "--variant")


def test_export_ios_help_names_the_default_program_the_folder_ships(capsys):
    from pocketbert.core.config.export_families import IOS_APP_PROGRAMS

    result = run_cli(capsys, "export", "ios", "--help")
    assert result.exit_code == 0
    assert f"first of {', '.join(IOS_APP_PROGRAMS)}" in " ".join(result.out.split())
