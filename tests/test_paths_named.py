"""Every repository path a reader is pointed to exists: the paths written in README.md, results/README.md, docs/
and the docstrings and comments of pocketbert/ and scripts/. A module that moves takes its mentions along."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOP_FOLDERS = ("pocketbert", "scripts", "tests", "docs", "results")
PATH_PATTERN = re.compile(r"(?<![\w./-])((?:%s)/[A-Za-z0-9_./-]*[A-Za-z0-9_])" % "|".join(TOP_FOLDERS))
PLACEHOLDER_OPENERS = ("<", "{", "*")
# A path right after "owner/repo " is that repository's (hollance/neural-engine docs/16-bit.md), not this one's.
OTHER_REPOSITORY = re.compile(r"[A-Za-z0-9_-]+/[A-Za-z0-9_.-]+[ :]+$")


def python_prose(source: str) -> str:
    """A module's docstrings and comments: where prose names files (code may name old paths on purpose)."""
    parts = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            parts.append(ast.get_docstring(node) or "")
    parts += [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
    return "\n".join(parts)


def named_paths(text: str) -> list[str]:
    found = []
    for match in PATH_PATTERN.finditer(text):
        if OTHER_REPOSITORY.search(text[max(0, match.start() - 80):match.start()]):
            continue
        if text[match.end():match.end() + 1] in PLACEHOLDER_OPENERS:  # results/static/latency_<n>.json: a pattern
            continue
        found.append(match.group(1).rstrip("."))
    return found


def prose_by_file() -> dict[Path, str]:
    texts = {p: p.read_text() for p in [REPO / "README.md", REPO / "results" / "README.md",
                                        *sorted((REPO / "docs").glob("*.md"))]}
    for path in [*sorted((REPO / "pocketbert").rglob("*.py")), *sorted((REPO / "scripts").glob("*.py"))]:
        texts[path] = python_prose(path.read_text())
    return texts


def ignored_by_git(paths: set[str]) -> set[str]:
    """The paths git ignores: outputs a command writes (results/gpu/gpu_check.log), absent from a fresh clone."""
    done = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], input="\n".join(sorted(paths)),
                          capture_output=True, text=True, cwd=REPO)
    return set(done.stdout.split())


def test_every_path_named_in_docs_and_docstrings_exists():
    named = {(path, name) for path, text in prose_by_file().items() for name in named_paths(text)
             if not (REPO / name).exists()}
    outputs = ignored_by_git({name for _, name in named})
    missing = sorted({f"{path.relative_to(REPO)}: {name}" for path, name in named if name not in outputs})
    assert not missing, "paths named but not in the repository:\n" + "\n".join(missing)


def test_the_check_sees_a_moved_module_and_leaves_other_repositories_alone():
    assert named_paths("see pocketbert/exit_codes.py and `docs/app.md`.") == ["pocketbert/exit_codes.py", "docs/app.md"]
    assert named_paths("hollance/neural-engine docs/16-bit.md") == []
    assert named_paths("runs/x/pocketbert/a.py") == []  # inside another path
    assert named_paths("results/static/latency_<n>.json") == []
    assert "pocketbert/run_files.py" in python_prose('"""Names pocketbert/run_files.py."""\nx = 1  # or tests/a.py\n')
    assert not (REPO / "pocketbert/exit_codes.py").exists()
    assert ignored_by_git({"results/gpu/gpu_check.log", "pocketbert/exit_codes.py"}) == {"results/gpu/gpu_check.log"}
