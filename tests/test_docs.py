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
