"""`lexrl serve smollm2`: a known model name in place of CONFIG builds its config in code (equal to
`configs/serve_smollm2.yaml`), and the ready line prints the flags that point `lexrl eval` and
`lexrl train` at the server. No vLLM is started here (`test_serve.py` starts one)."""

from __future__ import annotations

import shlex
import socket
import subprocess
from pathlib import Path

import pytest

from lexrl.config import load_config
from lexrl.errors import ConfigError
from lexrl.rollout.serve import (
    check_port_free,
    ready_lines,
    serve,
    serve_config,
    served_names,
    vllm_server_command,
)

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize("name", ["smollm2", "smollm2-135m"])
def test_a_known_model_name_is_its_config_without_a_file(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)  # no configs/ here, as on a machine without a clone
    config = serve_config(name, [])
    assert config is not None and config.model.name_or_path == "smollm2-135m"
    assert not config.warmstart.enabled
    assert config == load_config(ROOT / "configs" / "serve_smollm2.yaml")


def test_overrides_apply_on_top_of_the_known_config():
    config = serve_config("smollm2", ["--rollout.vllm_max_model_len", "2048"])
    assert config.rollout.vllm_max_model_len == 2048


def test_a_config_file_or_an_unknown_name_is_left_to_the_loader(tmp_path, monkeypatch):
    assert serve_config(str(ROOT / "configs" / "demo_cpu.yaml"), []) is None
    assert serve_config("gpt-4o", []) is None and serve_config(None, []) is None
    # A file of that name is the user's config, not the known model.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "smollm2").write_text("run:\n  seed: 3\n")
    assert serve_config("smollm2", []) is None


def test_vllm_answers_to_the_served_name_and_to_the_models_own():
    config = serve_config("smollm2", [])
    assert served_names(config) == ["base", "smollm2-135m"]
    argv, _ = vllm_server_command(config, "/models/smollm2", cpu=True)
    at = argv.index("--served-model-name")
    assert argv[at + 1 : at + 3] == ["base", "smollm2-135m"]
    # A warm-started base is other weights than its name says: served as `base` alone.
    warm = load_config(
        None, ["--model.name_or_path", "smollm2-135m", "--warmstart.enabled", "true"]
    )
    assert served_names(warm) == ["base"]


def test_on_a_cpu_vllm_is_not_pinned_to_core_0_unless_the_user_says_so(monkeypatch):
    config = serve_config("smollm2", [])
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    _, env = vllm_server_command(config, "/models/smollm2", cpu=True)
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "nobind" and env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    _, env = vllm_server_command(config, "/models/smollm2", cpu=False)
    assert "VLLM_CPU_OMP_THREADS_BIND" not in env
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0-3")
    _, env = vllm_server_command(config, "/models/smollm2", cpu=True)
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "0-3"


def test_the_ready_line_gives_the_flags_for_eval_and_for_train():
    config = serve_config("smollm2", [])
    ready, train = ready_lines(config, "0.0.0.0", 8011)
    assert ready == (
        "ready: http://127.0.0.1:8011/v1 serving smollm2-135m; evaluate it with: lexrl eval "
        "CONFIG --rollout.backend openai --rollout.base_url http://127.0.0.1:8011/v1 "
        '--model.name_or_path smollm2-135m --rollout.api_key_env ""'
    )
    # The flags, pasted after a config, load as the openai backend at that server.
    flags = shlex.split(ready.partition("lexrl eval CONFIG ")[2])
    evaluated = load_config(ROOT / "configs" / "lexam_cpu.yaml", flags)
    assert evaluated.rollout.base_url == "http://127.0.0.1:8011/v1"
    assert evaluated.rollout.api_key_env == "" and evaluated.model.name_or_path == "smollm2-135m"
    trained = load_config(None, shlex.split(train.partition("lexrl train CONFIG ")[2]))
    assert trained.rollout.backend == "vllm-server"
    assert trained.rollout.vllm_urls == ["http://127.0.0.1:8011"]


def test_the_ready_line_names_a_served_model_other_than_base_for_training():
    config = load_config(None, ["--rollout.vllm_served_model", "policy"])
    _, train = ready_lines(config, "::1", 8000)
    assert "http://[::1]:8000" in train and train.endswith("--rollout.vllm_served_model policy")


def test_a_port_in_use_is_one_line_before_vllm_starts(monkeypatch):
    def no_server(*args, **kwargs):
        raise AssertionError("vLLM was started on a port in use")

    monkeypatch.setattr(subprocess, "Popen", no_server)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(ConfigError, match=rf"^--host 127.0.0.1 --port {port}: cannot listen"):
            serve(serve_config("smollm2", []), "base", "127.0.0.1", port)
    check_port_free("127.0.0.1", port)  # free again once its holder is closed
