"""The documentation: the MkDocs site builds in strict mode with its API reference, and the README
stays a short front page whose map points at pages that exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"

# Phrases from module docstrings that the API pages must render (lexrl.train.advantages,
# lexrl.config, lexrl.envs.base).
API_PHRASES = {
    "api/train/index.html": "Group-relative advantages and the training rows they are attached to",
    "api/config/index.html": "dataclasses whose field docstrings are the documentation",
    "api/envs/index.html": "What every environment provides",
}


def test_the_site_builds_strictly_with_the_api_reference(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    for page, phrase in API_PHRASES.items():
        html = (site / page).read_text(encoding="utf-8")
        assert phrase in html, f"{page} lacks {phrase!r}"


def docs_map() -> list[str]:
    """The `docs/*.md` pages the README links to."""
    return re.findall(r"\]\((docs/[^)#\s]+\.md)(?:#[^)]*)?\)", README.read_text(encoding="utf-8"))


def test_the_readme_is_a_short_front_page_whose_docs_map_exists() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines"
    pages = docs_map()
    assert pages, "the README links to no docs page"
    missing = [page for page in pages if not (ROOT / page).is_file()]
    assert not missing, f"README links to missing pages: {missing}"
    # Every top-level page of the site is on the map.
    top_level = {f"docs/{path.name}" for path in (ROOT / "docs").glob("*.md")}
    assert top_level <= set(pages), f"not on the README's map: {sorted(top_level - set(pages))}"


def test_the_readme_keeps_the_command_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    command = ci[ci.index("# --- the README's test command, verbatim ---") + 1]
    assert command in README.read_text(encoding="utf-8")


BENCHMARKS = ROOT / "docs" / "benchmarks.md"
# Pages that point at docs/benchmarks.md for measured numbers instead of holding copies that drift.
NO_COPIES = [README, ROOT / "docs" / "quickstart.md"]
# A table row: Markdown's `|`, or the box-drawing bars a copied console table (rich) is drawn with.
BAR = re.compile(r"(?<!\\)[|│┃]")
# A measured number: a decimal (0.719, +0.14, -0.070, 6.5), not a version (0.1.2) or a dotted name.
DECIMAL = re.compile(r"(?<![\w.])[-+]?\d[\d,]*\.\d+(?![\w.])")


def table_rows(text: str) -> list[str]:
    """The rows of every table in `text` with three or more cells and a digit, each as its cells
    joined by ` | ` with whitespace folded (separator rows have no digit)."""
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not line or not BAR.match(line):
            continue
        cells = [" ".join(cell.split()) for cell in BAR.split(line.strip("|│┃ "))]
        if len(cells) >= 3 and any(char.isdigit() for char in line):
            rows.append(" | ".join(cells))
    return rows


def test_measured_numbers_live_in_benchmarks_md_alone() -> None:
    """README.md and the quick start link to docs/benchmarks.md for results: copies of its tables
    there drifted from it. A table of commands, options or exit codes stays allowed; a row of
    benchmarks.md, or any table row holding a decimal, does not."""
    measured = set(table_rows(BENCHMARKS.read_text(encoding="utf-8")))
    assert len(measured) > 50, "benchmarks.md has lost its tables, or the parser its way"
    for page in NO_COPIES:
        rows = table_rows(page.read_text(encoding="utf-8"))
        copied = [row for row in rows if row in measured]
        assert not copied, f"{page.name} copies rows of docs/benchmarks.md: {copied[:3]}"
        numbers = [row for row in rows if DECIMAL.search(row)]
        assert not numbers, (
            f"{page.name} has table rows with measured numbers (link to docs/benchmarks.md "
            f"instead): {numbers[:3]}"
        )


def test_the_readmes_links_into_the_docs_name_headings_that_exist() -> None:
    """mkdocs checks the site's own anchors; the README is not part of the site."""
    from markdown.extensions.toc import slugify

    links = re.findall(r"\]\((docs/[^)#\s]+\.md)#([^)\s]+)\)", README.read_text(encoding="utf-8"))
    assert links, "the README links to no section of a docs page"
    for page, anchor in links:
        text = (ROOT / page).read_text(encoding="utf-8")
        headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, flags=re.MULTILINE)
        anchors = {slugify(heading.replace("`", ""), "-") for heading in headings}
        assert anchor in anchors, f"README links to {page}#{anchor}, a heading it lacks"
