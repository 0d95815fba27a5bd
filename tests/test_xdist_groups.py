"""The suite's own scheduling (tests/conftest.py): the tests that share the served SmolLM2 run
on one xdist worker. pytest-xdist's `loadgroup` stops grouping without a word when pytest
changes how a test id is stored (as pytest 9.2 did), so this runs it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).with_name("conftest.py")

TESTS = """
import pytest

@pytest.fixture
def smollm2_server():
    return "a stand-in: only its name matters to the grouping"

@pytest.mark.parametrize("n", range(6))
def test_served(smollm2_server, n):
    pass

@pytest.mark.parametrize("n", range(6))
def test_other(n):
    pass
"""


def test_the_tests_using_the_served_model_run_on_one_worker(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST.read_text())
    (tmp_path / "test_grouping.py").write_text(TESTS)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
         "-p", "no:cacheprovider", "-o", "addopts=", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:]
    ran = re.findall(r"\[(gw\d)\].* PASSED \S+::(test_\w+)\[", result.stdout)
    served = {worker for worker, test in ran if test == "test_served"}
    assert len(ran) == 12, result.stdout[-3000:]
    assert len(served) == 1, f"the served-model tests ran on {sorted(served)}"
