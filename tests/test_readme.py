"""README.md stays a map: at most MAX_README_LINES lines, every measured figure in it quoted from results/README.md,
one count of the default export's models on every page, and every relative link resolving.

The reference lives in docs/, the figures (each with its date and command) in results/README.md; the README quotes
them. These checks read text only: no package import, a fraction of a second.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RESULTS = ROOT / "results" / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 300
# The section of results/README.md the README's first screen quotes; it states the default export's model count.
HEADLINE_HEADING = "## Headline"

# A measured figure: a number with a unit, a ratio ("11.4×", but not the shape "2 × 192"), or a score such as 0.8681.
UNITS = r"%|ms|s|min|minutes?|hours?|KB|MB|GB|M"
WITH_UNIT = re.compile(rf"(?<![\w.,])(\d[\d,]*(?:\.\d+)?)\s?({UNITS})(?![\w])")
RATIO = re.compile(r"(?<![\w.,])(\d[\d,]*(?:\.\d+)?)\s?×(?!\s?\d)")
SCORE = re.compile(r"(?<![\w.,])(0\.\d{3,4})(?!\d|\.\d)")
MODEL_COUNT = re.compile(r"(?<![\w.,])(\d+)\s+(?:exported\s+)?models\b")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", flags=re.M | re.S)


def text(path: Path) -> str:
    # Non-breaking spaces read as spaces, so "3.61 ms" matches however either page was typed.
    return path.read_text(encoding="utf-8").replace("\u00a0", " ").replace("\u202f", " ")


def figures(page: str) -> set[str]:
    """Every figure a page states, as written (number and unit, one space between)."""
    found = {f"{number} {unit}" for number, unit in WITH_UNIT.findall(page)}
    found |= {f"{number}×" for number in RATIO.findall(page)}
    return found | set(SCORE.findall(page))


def states(page: str, figure: str) -> bool:
    """Whether the page states this figure: the same number (not part of a longer one) with the same unit."""
    number, _, unit = figure.partition(" ")
    if figure.endswith("×"):
        number, unit = figure[:-1], "×"
    pattern = rf"(?<![\w.,]){re.escape(number)}" + (rf"\s?{re.escape(unit)}(?![\w])" if unit else r"(?!\d|\.\d)")
    return re.search(pattern, page) is not None


def model_counts(page: str) -> set[int]:
    return {int(n) for n in MODEL_COUNT.findall(page)}


def headline_section(page: str) -> str:
    start = re.search(rf"^{re.escape(HEADLINE_HEADING)}\b.*$", page, flags=re.M)
    assert start, f"results/README.md has no section headed {HEADLINE_HEADING!r}"
    end = page.find("\n## ", start.end())
    return page[start.start():] if end < 0 else page[start.start():end]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    heading = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return heading.replace(" ", "-")


def anchors(page: str) -> set[str]:
    """Every heading's anchor; a repeated heading gets -1, -2, ... as on GitHub."""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", FENCE.sub("", page), flags=re.M):
        base = name = slug(heading)
        repeat = 0
        while name in found:
            repeat += 1
            name = f"{base}-{repeat}"
        found.add(name)
    return found


def broken_links(path: Path) -> list[str]:
    """The relative links of a Markdown page whose file, or heading within it, does not exist."""
    broken = []
    for target in dict.fromkeys(LINK.findall(FENCE.sub("", text(path)))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(text(linked)):
            broken.append(f"{target} (no such heading)")
    return broken


def docs_pages() -> list[Path]:
    return sorted(DOCS.glob("*.md")) if DOCS.is_dir() else []


def test_the_readme_stays_under_its_line_limit():
    lines = len(text(README).splitlines())
    assert lines <= MAX_README_LINES, (f"README.md has {lines} lines, over {MAX_README_LINES}: move the reference "
                                       "to a docs/ page and link it from the README's map")


def test_every_figure_in_the_readme_is_in_the_results():
    results = text(RESULTS)
    missing = sorted(f for f in figures(text(README)) if not states(results, f))
    assert not missing, (f"README.md states {missing}, which results/README.md does not: record each figure there, "
                         "with its date and command, then quote it")


def test_the_pages_agree_on_the_count_of_models():
    headline = model_counts(headline_section(text(RESULTS)))
    assert len(headline) == 1, f"results/README.md's headline should state one count of models, states {headline}"
    for page in [README, *docs_pages()]:
        counts = model_counts(text(page))
        assert counts <= headline, (f"{page.relative_to(ROOT)} counts {sorted(counts)} models where "
                                    f"results/README.md's headline counts {headline.pop()}")


@pytest.mark.parametrize("page", [README, *docs_pages()], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    assert not broken_links(page), f"{page.relative_to(ROOT)} links to {broken_links(page)}"


def test_the_checks_catch_what_they_are_for():
    """The figure, count and link rules on small pages, so a regex that stops matching fails here, not silently."""
    assert figures("3.61 ms, 11.4× faster, 6.3× smaller, a 2 × 192 student, 98.4 % at 0.8681") == {
        "3.61 ms", "11.4×", "6.3×", "98.4 %", "0.8681"}
    assert states("int8 3.61 ms", "3.61 ms") and not states("int8 3.613 ms", "3.61 ms")
    assert not states("0.86812", "0.8681") and states("accuracy 0.8681.", "0.8681")
    assert model_counts("all 17 exported models; 15 models") == {15, 17}
    assert slug("Narrow students: cut from the teacher, or `x` (iOS 27)") == "narrow-students-cut-from-the-teacher-or-x-ios-27"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}
