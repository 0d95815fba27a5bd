"""The suite's own scheduling (tests/conftest.py): the tests that share the served SmolLM2 run
on one xdist worker, and the one that kills the server after all of them. pytest-xdist's
`loadgroup` stops grouping without a word when pytest changes how a test id is stored (as
pytest 9.2 did), so this runs it."""

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

@pytest.mark.kills_served_smollm2
def test_kills(smollm2_server):
    pass

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
    ran = re.findall(r"\[(gw\d)\].* PASSED \S+::(test_\w+)", result.stdout)
    served = [(worker, test) for worker, test in ran if test in ("test_served", "test_kills")]
    assert len(ran) == 13, result.stdout[-3000:]
    workers = {worker for worker, _ in served}
    assert len(workers) == 1, f"the served-model tests ran on {sorted(workers)}"
    assert served[-1][1] == "test_kills", f"the server was killed before {served}"
