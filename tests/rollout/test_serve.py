"""`lexrl serve` killed with -9 takes its vLLM server, engine processes included, down with it
(test_vllm_server.py stops its server with SIGTERM and checks the same)."""

from __future__ import annotations

import signal
import sys

import pytest

from tests.rollout.vllm_fixtures import (
    VLLM_MISSING,
    free_port,
    start_server,
    stop_and_check,
    vllm_config,
)

pytest.importorskip("vllm", reason=VLLM_MISSING)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def config(tmp_path_factory, model_cache):
    folder = tmp_path_factory.mktemp("serve")
    path = vllm_config(folder / "config.yaml", model_cache, folder / "run", "vllm-server", 0)
    # Any base will do; a warm-started one costs minutes to build.
    text = path.read_text().replace("warmstart:\n  enabled: true", "warmstart:\n  enabled: false")
    path.write_text(text)
    return path


def _stop_and_check(config, log, stop: signal.Signals) -> int:
    """Start `lexrl serve`, send it `stop` once ready, and return its exit status once it and
    every process it started are gone."""
    return stop_and_check(start_server(config, free_port(), log), stop)


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux only")
def test_the_server_dies_with_a_killed_lexrl_serve(config, tmp_path):
    assert _stop_and_check(config, tmp_path / "serve.log", signal.SIGKILL) == -signal.SIGKILL
