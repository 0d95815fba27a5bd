"""The tutorial of docs/contributing.md, run block by block in an empty folder: `lexrl new-env`,
the tutorial's own data and prompts, the package installed (into a folder of the test's, with
its metadata, not into this environment), the scaffold's own tests, `lexrl audit`, the
scaffold's `lexrl train` on the tiny model, `lexrl eval` of its checkpoint and the wheel's build
(`build`, in the `dev` extra)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

TUTORIAL = Path(__file__).parents[1] / "docs" / "contributing.md"
BLOCK = re.compile(r'^```(\w+)(?: title="([^"]+)")?\n(.*?)^```$', re.MULTILINE | re.DOTALL)


def tutorial_blocks(text: str) -> list[tuple[str, str | None, str]]:
    """(language, title, body) of each fenced block of the tutorial section (the page's first
    `## ` section), in order."""
    section = text.split("\n## ")[1]
    return [(match[1], match[2], match[3]) for match in BLOCK.finditer(section)]


def command(line: str, site: Path) -> list[str]:
    """The argv that runs a tutorial line here: `lexrl`, `pytest` and `python` with this
    interpreter, and `pip install -e DIR` as an install of DIR into `site`."""
    words = shlex.split(line)
    if words[0] == "lexrl":
        return [sys.executable, "-m", "lexrl.cli", *words[1:]]
    if words[0] == "pytest":
        return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *words[1:]]
    if words[0] == "python":
        return [sys.executable, *words[1:]]
    if words[:3] == ["pip", "install", "-e"]:
        target = ["--no-deps", "--no-build-isolation", "--target", str(site)]
        return [sys.executable, "-m", "pip", "install", "-q", *target, words[3]]
    raise AssertionError(f"the tutorial runs a command this test does not know: {line}")


def test_the_tutorial_blocks_are_what_this_test_runs():
    blocks = tutorial_blocks(TUTORIAL.read_text(encoding="utf-8"))
    kinds = [language for language, _, _ in blocks]
    assert kinds.count("bash") == 4 and "python" in kinds and kinds.count("text") == 2
    assert all(title for language, title, _ in blocks if language != "bash")


@pytest.mark.slow
def test_the_tutorial_runs_from_an_empty_folder_to_an_evaluated_checkpoint(tmp_path):
    root, site = tmp_path / "work", tmp_path / "site"
    root.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
        "WANDB_MODE": "disabled",
        "HF_HUB_OFFLINE": "1",
    }
    cwd, outputs = root, {}
    for _language, title, body in tutorial_blocks(TUTORIAL.read_text(encoding="utf-8")):
        if title is not None:
            path = root / title
            assert path.parent.is_dir(), f"{title}: the tutorial writes into a missing folder"
            path.write_text(body, encoding="utf-8")
            continue
        for line in filter(None, map(str.strip, body.splitlines())):
            if line.startswith("cd "):
                cwd = cwd / line[3:]
                continue
            result = subprocess.run(
                command(line, site), cwd=cwd, env=env, capture_output=True, text=True, timeout=900
            )
            assert result.returncode == 0, (
                f"{line}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
            )
            outputs[line.split()[1] if line.startswith("lexrl") else line] = result.stdout

    package = root / "limitation"
    assert not (Path(__file__).parents[1] / "lexrl" / "envs" / "limitation").exists()
    assert "limitation" in outputs["envs"] and "[limitation]" in outputs["envs"]
    assert "7 passed" in outputs["pytest tests"]
    # The first table: each policy's share of the teacher's reward (the per-component one follows).
    table = outputs["audit"].split("\n\n")[0]
    audit = {row.split("|")[2].strip(): row for row in table.splitlines()
             if row.startswith("| limitation |")}  # fmt: skip
    # The scaffold's policies, and lexrl's generic probes where lexrl plays them.
    assert {"teacher", "empty", "echo", "always_yes", "always_no"} <= set(audit)
    assert "| 9% |" in audit["always_yes"] and "| 9% |" in audit["always_no"]
    assert (package / "runs" / "limitation_cpu" / "checkpoints" / "step-000030").is_dir()
    assert (package / "runs" / "limitation_cpu" / "eval_vs_degenerate.md").is_file()
    assert "limitation" in outputs["eval"]
    assert {path.suffix for path in (package / "dist").iterdir()} == {".whl", ".gz"}
