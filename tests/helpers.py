"""Running the real CLI in-process and capturing what a user would see."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# The tiny BERT every test model is made of (a folder's own conftest.py would shadow a `from conftest import`).
TINY_CONFIG = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                   max_position_embeddings=128)

# An export with one Core ML program checked on one example, no Core AI and no ExecuTorch: for tests of what any
# export writes. (The ONNX parity checks keep the recipe's examples: they cost little, and their accuracy estimates
# the student's.)
QUICK_EXPORT = ("--coreml-variants", "fp16", "--coreml-examples", "1", "--coreai-variants", "none",
                "--executorch-variants", "none")


@dataclass
class CliResult:
    exit_code: int
    out: str
    err: str


def run_cli(capsys, *args: str) -> CliResult:
    from pocketbert.cli import main

    capsys.readouterr()
    code = 0
    try:
        main([str(a) for a in args])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return CliResult(code, captured.out, captured.err)


def error_line(result: CliResult) -> str:
    """The last non-progress line of stderr: what the user reads."""
    lines = [line for line in result.err.replace("\r", "\n").splitlines()
             if line.strip() and "it/s" not in line and "step/s" not in line]
    return lines[-1] if lines else ""


def run_cli_steps(*steps) -> None:
    """Each step (a list of CLI arguments) through the real CLI in turn, for module-wide fixtures (capsys is
    function-scoped); a step that exits non-zero fails the fixture, naming it."""
    from pocketbert.cli import main

    for args in steps:
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            assert exc.code in (0, None), f"{args[:2]} exited {exc.code}"


def cli_process(*args, env: dict | None = None) -> subprocess.CompletedProcess:
    """The CLI in a process of its own: for runs that are killed, or that must start from a clean interpreter."""
    return subprocess.run([sys.executable, "-m", "pocketbert.cli", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def run_with_teacher(teacher_run, run):
    """A new run directory at `run` holding a copy of teacher_run's teacher/: later stages write beside it."""
    import shutil

    shutil.copytree(teacher_run / "teacher", run / "teacher")
    return run


def linked_copy(run, copy, stages=None):
    """`run` (or only its `stages`) at `copy`, each file a hard link: no bytes copied. Stages write new files (into a
    temporary folder renamed into place), so a stage run in the copy leaves `run` as it was; a test that edits a
    file in place needs a real copy."""
    import os
    import shutil

    copy.mkdir(parents=True)
    for stage in stages or [p.name for p in run.iterdir()]:
        shutil.copytree(run / stage, copy / stage, copy_function=os.link)
    return copy


def assert_exhaustive_tokenizer_check(manifest: dict, mode: str) -> None:
    """The text-in graph was checked on every Unicode scalar value in each context the recipe names, and agreed
    on all."""
    from pocketbert.export.checks.tokenizer_probes import FLAG_SEQUENCES

    check = manifest["metrics"]["text_in_tokenizer_exhaustive"]
    contexts = manifest["config"]["tokenizer_check_contexts"]
    assert check["mode"] == mode and check["mismatch_count"] == 0
    assert check["contexts"] == contexts and contexts
    assert check["code_points"] == UNICODE_SCALAR_VALUES
    assert check["probes"] == UNICODE_SCALAR_VALUES * len(contexts) + len(FLAG_SEQUENCES)
    assert check["pair_probes"] >= MIN_PAIR_PROBES


UNICODE_SCALAR_VALUES = 0x110000 - 0x800  # every code point but the surrogates
MIN_PAIR_PROBES = 300_000  # ~360 code points standing for their classes, each beside each, in three contexts


def named_in_readme(readme: str) -> set[str]:
    """The files and folders an app README tells the developer to use: its file table and its `forResource:`."""
    names = set(re.findall(r"^\| `([^`]+)` \|", readme, flags=re.M))
    names |= set(re.findall(r'forResource: "([^"]+)"', readme))
    names |= set(re.findall(r'assets.open\("([^"]+)"\)', readme))
    return names


JS_DIR = Path(__file__).resolve().parent / "js"  # make test installs transformers.js there
NPM_UNREACHABLE = JS_DIR / "npm-unreachable.txt"  # the Makefile's note where npm install could not reach the registry


def transformers_js_or_skip() -> None:
    """transformers.js installed, or the test skipped with the reason npm gave; fails where nobody tried."""
    import pytest

    if (JS_DIR / "node_modules" / "@huggingface" / "transformers").is_dir():
        return
    if NPM_UNREACHABLE.is_file():
        pytest.skip(NPM_UNREACHABLE.read_text().strip())
    pytest.fail("transformers.js is not installed: run `make test`, which installs it into tests/js")


APP_TOKENIZER_MAX_LENGTH = 128
FITTED_IDS = [*range(0, 1500), *range(2000, 5000), *range(20000, 21000)]  # specials, pieces, a few words


def write_app_tokenizer(folder: Path, wordpiece_tokenizer, fitted: bool) -> dict[str, Path]:
    """tokenizer.json, tokenizer.tables and the golden file of the full or the fitted vocabulary in `folder`."""
    from pocketbert.export.app import tokenizer_files
    from pocketbert.export.app.tokenizer_tables import write_tables
    from pocketbert.train.vocabulary.tokenizer import fitted_tokenizer

    tokenizer = fitted_tokenizer(wordpiece_tokenizer, FITTED_IDS) if fitted else wordpiece_tokenizer
    paths = {"json": folder / "tokenizer.json", "tables": folder / "tokenizer.tables",
             "golden": folder / "tokenizer_golden.json"}
    paths["json"].write_text(tokenizer.backend_tokenizer.to_str(), encoding="utf-8")
    write_tables(paths["json"], paths["tables"], APP_TOKENIZER_MAX_LENGTH)
    golden = tokenizer_files.golden(tokenizer, APP_TOKENIZER_MAX_LENGTH)
    paths["golden"].write_text(json.dumps(golden), encoding="utf-8")
    return paths


# Added tokens beside all-MiniLM's own, overlapping each other and them, so that tokenizers' leftmost-longest matching
# shows ("abc" over "ab", "[SEP]]" over "[SEP]", "[MASK][SEP]" over "[MASK]"); "zz" is a plain (not special) one.
# Question and context pairs for the tokenizers' encode_pair: short, a question longer than any cut, a long context,
# both long, empty sides, added tokens and marks; each taken whole and at PAIR_CUTS.
PAIR_TEXTS = [("Who wrote it?", "It was written by Jane Austen in 1813."),
              (" ".join(["why"] * 40) + "?", "Because."),
              ("Where?", "Café naïve résumé à Zürich, déjà vu, 東京と大阪 " * 6),
              ("Où est le café? " * 5, "Le café 😀 est près de la Seine. " * 5),
              ("", "only a context"), ("only a question", ""), ("", ""),
              ("who [MASK]?", "[CLS] she did [SEP]"), ("e\u0301 n\u0303", "Å Ω ﬁ ½ ＦＵＬＬ")]
PAIR_CUTS = (None, 16, 8, 5)
OVERLAPPING_SPECIAL_TOKENS = ["ab", "abc", "bcd", "[SEP]]", "[MASK][SEP]", "é", "😀x"]
OVERLAPPING_PLAIN_TOKENS = ["zz"]


def write_overlapping_added_tokens(folder: Path, wordpiece_tokenizer) -> dict[str, Path]:
    """tokenizer.json of the full vocabulary with the overlapping added tokens (normalized=False, as tokenizer.json
    keeps special ones), and its tokenizer.tables, in `folder`."""
    from tokenizers import AddedToken, Tokenizer

    from pocketbert.export.app.tokenizer_tables import write_tables

    tokenizer = Tokenizer.from_str(wordpiece_tokenizer.backend_tokenizer.to_str())
    tokenizer.add_special_tokens(OVERLAPPING_SPECIAL_TOKENS)
    tokenizer.add_tokens([AddedToken(content, normalized=False) for content in OVERLAPPING_PLAIN_TOKENS])
    paths = {"json": folder / "tokenizer.json", "tables": folder / "tokenizer.tables"}
    paths["json"].write_text(tokenizer.to_str(), encoding="utf-8")
    write_tables(paths["json"], paths["tables"], APP_TOKENIZER_MAX_LENGTH)
    return paths
