"""A key never enters a config, however an option is set: a plugin's option named like a
credential (`api_key`), or any option holding a string shaped like a key, is refused with exit 2
and the key in no output; a key given the right way (an environment variable named by
`api_key_env`) that the plugin puts into its prompts is masked in every file the run writes.

The throwaway plugin package is put on the subprocesses' path with its entry point, as
`tests/test_plugins.py` does."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from lexrl.config import ConfigError, load_config, option_names
from lexrl.secrets import MASK, is_credential_name, looks_like_key, scrub
from tests.e2e import lexrl_command
from tests.test_plugins import CONFIG, ENV

MARKER = "sk-lexrlTESTMARKER0123456789abcdef"
PLAIN_MARKER = "lexrlTESTMARKERplain0123456789"
"""A key of no known shape: only lexrl's memory of `api_key_env` variables masks it."""
KEY_ENV = "LEXRL_TEST_PLUGIN_KEY"
NAME = "keyed_qa"

OPTIONS = '''
from dataclasses import dataclass

from lexrl.options import AT_LEAST_0
from lexrl.registry import EnvConfig, register_env


@register_env("{name}")
@dataclass
class KeyedQaConfig(EnvConfig):
    """A toy legal Q&A env whose service takes an API key."""

    credit: float = 1.0
    """Reward of a right answer."""
    api_key: str = ""
    """The service's key, as a careless plugin offers it."""
    api_key_env: str = ""
    """The environment variable holding the service's key."""
    greeting: str = "Question:"
    """Said before each question."""

    BOUNDS = {{"credit": AT_LEAST_0}}

    def build(self):
        from {package}.env import KeyedQaEnv

        return KeyedQaEnv(self)
'''

KEYED_ENV = """

import os


class KeyedQaEnv(EchoQaEnv):
    async def run_episode(self, task, policy):
        key = os.environ.get(self.config.api_key_env, "")
        question = f"{self.config.greeting} {task.inputs['question']} Key: {key}"
        note = await policy.chat("clerk", "Restate the question.", question)
        reply = await policy.chat("answerer", "Answer yes or no.", note)
        right = reply.strip().lower().startswith(task.gold)
        correct = self.config.credit if right else -self.config.credit
        return policy.finish(reply, {"correct": correct}, metrics={"accuracy": float(right)})
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A folder holding the plugin package and its `.dist-info`, as pip would leave them."""
    site = tmp_path_factory.mktemp("site")
    folder = site / NAME
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "options.py").write_text(textwrap.dedent(OPTIONS.format(name=NAME, package=NAME)))
    (folder / "env.py").write_text(textwrap.dedent(ENV.format(name=NAME)) + KEYED_ENV)
    info = site / "lexrl_keyed_qa-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lexrl-keyed-qa\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[lexrl.envs]\n{NAME} = {NAME}.options:KeyedQaConfig\n")
    return site


def run(site: Path, *args: str, key: str = "") -> subprocess.CompletedProcess:
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")]))
    wandb = "offline" if importlib.util.find_spec("wandb") else "disabled"
    env = {**os.environ, "PYTHONPATH": path, "WANDB_MODE": wandb, "HF_HUB_OFFLINE": "1"}
    env.pop(KEY_ENV, None)
    if key:
        env[KEY_ENV] = key
    return subprocess.run(
        lexrl_command(*args), capture_output=True, text=True, timeout=900, env=env
    )


def config_file(tmp_path: Path, env: str) -> Path:
    """A config training the plugin env, its `env` section replaced by `env`."""
    text = CONFIG.format(name=NAME, cache=tmp_path / "cache", out=tmp_path / "run")
    plugin_section = f"env:\n  type: {NAME}\n  credit: 1.0\n"
    assert plugin_section in text
    path = tmp_path / "config.yaml"
    path.write_text(text.replace(plugin_section, env))
    return path


PLUGIN_ENV = f"env:\n  type: {NAME}\n"
MIXTURE = "env:\n  type: mix\n  members:\n    - env: {{type: statute}}\n    - env: {member}\n"


@pytest.mark.parametrize(
    ("env", "args", "key"),
    [
        (PLUGIN_ENV + f"  api_key: {MARKER}\n", [], "env.api_key"),
        (PLUGIN_ENV, ["--env.api_key", MARKER], "env.api_key"),
        (PLUGIN_ENV, [f"--env.api_key={MARKER}"], "env.api_key"),
        (
            MIXTURE.format(member=f"{{type: {NAME}, api_key: {MARKER}}}"),
            [],
            "env.members[1].env.api_key",
        ),
        (
            MIXTURE.format(member="{type: gdpr}"),
            ["--env.members", f"[{{env: {{type: {NAME}, api_key: {MARKER}}}}}]"],
            "env.members[0].env.api_key",
        ),
        (PLUGIN_ENV + f"  greeting: 'Bearer {MARKER}'\n", [], "env.greeting"),
        (PLUGIN_ENV, ["--env.greeting", MARKER], "env.greeting"),
        (
            MIXTURE.format(member=f"{{type: {NAME}, greeting: {MARKER}}}"),
            [],
            "env.members[1].env.greeting",
        ),
        (PLUGIN_ENV, ["--logging.wandb_project", MARKER], "logging.wandb_project"),
    ],
    ids=[
        "yaml",
        "command_line",
        "command_line_equals",
        "yaml_mixture_member",
        "command_line_mixture_member",
        "yaml_innocent_option",
        "command_line_innocent_option",
        "yaml_member_innocent_option",
        "core_option",
    ],
)
def test_a_key_set_as_an_option_is_refused_without_echoing_it(site, tmp_path, env, args, key):
    result = run(site, "train", str(config_file(tmp_path, env)), *args)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.startswith(f"config error: `{key}` "), result.stderr
    assert "environment variable" in result.stderr and "_env" in result.stderr
    assert "TESTMARKER" not in result.stdout + result.stderr
    assert not (tmp_path / "run").exists()


def test_a_credential_option_points_to_the_variable_option_beside_it(site, tmp_path):
    result = run(site, "train", str(config_file(tmp_path, PLUGIN_ENV)), "--env.api_key", "x")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "config error: `env.api_key` looks like a credential: lexrl never stores keys; put it in "
        "an environment variable and name that in `env.api_key_env` (or the plugin's `*_env` "
        "option), e.g. `api_key_env: MY_KEY`"
    )


@pytest.mark.parametrize(
    "name",
    [
        "api_key",
        "OPENAI_API_KEY",
        "apikey",
        "hf_token",
        "access_token",
        "client_secret",
        "db_password",
        "passwd",
        "credentials",
        "credential",
        "private_key",
        "judges[0].token",
    ],
)
def test_credential_names(name):
    assert is_credential_name(f"env.{name}")


@pytest.mark.parametrize(
    "name",
    [
        "api_key_env",
        "token_env",
        "max_tokens",
        "max_new_tokens",
        "turn_tokens",
        "tokens",
        "eos_token",
        "chat_token_ids",
        "logprob_chunk_tokens",
        "keyword",
        "passage",
    ],
)
def test_names_that_hold_no_credential(name):
    assert not is_credential_name(f"env.{name}")


def test_no_option_of_lexrl_is_named_like_a_credential():
    assert [name for name in option_names() if is_credential_name(name)] == []


KEYS = [
    MARKER,
    "sk-proj-" + "Ab3" * 16,
    "sk-ant-api03-" + "x9Y" * 10,
    "hf_" + "aB1" * 11,
    "ghp_" + "Z9" * 18,
    "github_pat_" + "11AB" * 10,
    "xoxb-2048-4096-abcdefABCDEF",
    "AKIAIOSFODNN7EXAMPLE",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
]


@pytest.mark.parametrize("key", KEYS)
def test_a_key_shaped_value_is_refused_and_masked_in_any_text(key):
    assert looks_like_key(f"Authorization: Bearer {key}")
    assert (
        scrub(f"reply: 401 (key {key}) from the judge") == f"reply: 401 (key {MASK}) from the judge"
    )
    with pytest.raises(ConfigError) as error:
        load_config(None, ["--run.output_dir", f"runs/{key}"])
    assert str(error.value).startswith("`run.output_dir` holds what looks like an API key")
    assert key not in str(error.value)


@pytest.mark.parametrize(
    "text",
    [
        "risk-adjusted-returns-for-every-client",
        "sk-short",
        "task_sk-abcdefghijklmnopqrstuvwxyz",
        "hf_hub_download",
        "Art. 6(1)(f) GDPR",
        "runs/legal_mix_cpu",
        "AKIA1234",
        "eyJhbGci",
    ],
)
def test_text_shaped_like_no_key_is_kept(text):
    assert not looks_like_key(text)
    assert scrub(text) == text


@pytest.mark.slow
def test_a_key_from_its_variable_reaches_no_file_of_the_run(site, tmp_path, model_cache):
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(name=NAME, cache=model_cache, out=tmp_path / "run"))
    result = run(
        site,
        "train",
        str(config),
        "--env.api_key_env",
        KEY_ENV,
        "--env.api_key",
        "",
        "--logging.samples_every",
        "1",
        "--run.eval_after",
        "true",
        key=PLAIN_MARKER,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    files = [path for path in (tmp_path / "run").rglob("*") if path.is_file()]
    assert (tmp_path / "run" / "config.yaml") in files and len(files) > 5
    leaked = [str(path) for path in files if b"TESTMARKER" in path.read_bytes()]
    assert leaked == []
    assert "TESTMARKER" not in result.stdout + result.stderr
    # The key did reach the prompts, masked.
    assert f"Key: {MASK}" in (tmp_path / "run" / "samples.jsonl").read_text()
