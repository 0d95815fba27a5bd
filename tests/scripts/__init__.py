"""Tests of `scripts/`: each script that imports lexrl is run here, shrunk to run on a CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
SCRIPTS = ROOT / "scripts"


def run_script(name: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python scripts/NAME ARGS` from the repository root, offline; fails the test unless it
    exits 0, showing the end of its stderr."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline", "WANDB_API_KEY": ""}
    result = subprocess.run(
        [sys.executable, str(SCRIPTS / name), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )
    assert result.returncode == 0, f"{name} exited {result.returncode}:\n{result.stderr[-4000:]}"
    return result


def table_rows(text: str) -> list[list[str]]:
    """The cells of every Markdown table row in `text`, its separator rows left out."""
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("|") and not line.startswith("|---")
    ]
