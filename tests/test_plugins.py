"""Third-party envs by entry point: a package that declares an entry point in `lexrl.envs` is
found by every command, with no file under `lexrl/` changed; a broken plugin costs one line and
the other envs still load; two packages that register one name are an error naming both.

The throwaway packages are put on the subprocesses' path with their metadata (a `.dist-info`
folder holding `entry_points.txt`), as pip would leave them in site-packages."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.e2e import lexrl_command

OPTIONS = '''
from dataclasses import dataclass

from lexrl.options import AT_LEAST_0
from lexrl.registry import EnvConfig, register_env


@register_env("{name}")
@dataclass
class EchoQaConfig(EnvConfig):
    """A toy legal Q&A env from a third-party package."""

    credit: float = 1.0
    """Reward of a right answer."""

    BOUNDS = {{"credit": AT_LEAST_0}}

    def build(self):
        from {package}.env import EchoQaEnv

        return EchoQaEnv(self)
'''

ENV = """
import random

from lexrl.envs.base import Env
from lexrl.envs.degenerate import constant, generic_policies
from lexrl.types import Task

QUESTIONS = [("Is a verbal contract for land enforceable?", "no"),
             ("Does a valid contract need consideration?", "yes")] * 6


class EchoQaEnv(Env):
    name = "{name}"
    roles = ("clerk", "answerer")
    reward_components = ("correct",)
    episode_metrics = ("accuracy",)
    headline_metric = "accuracy"

    def __init__(self, config):
        self.config = config

    def tasks(self, split):
        offset = 0 if split == "train" else 8
        return [Task(f"q{{i}}", {{"question": q}}, a) for i, (q, a) in
                enumerate(QUESTIONS[offset:offset + 8], start=offset)]

    async def run_episode(self, task, policy):
        note = await policy.chat("clerk", "Restate the question.", task.inputs["question"])
        reply = await policy.chat("answerer", "Answer yes or no.", note)
        right = reply.strip().lower().startswith(task.gold)
        correct = self.config.credit if right else -self.config.credit
        return policy.finish(reply, {{"correct": correct}}, metrics={{"accuracy": float(right)}})

    def teacher(self, task, rng):
        return lambda role, messages: task.gold if role == "answerer" else task.inputs["question"]

    def degenerate_policies(self):
        return {{**generic_policies(), "always_yes": constant("yes")}}

    def text_corpus(self):
        return [q for q, _ in QUESTIONS] + ["yes", "no", "Restate the question.", "Answer yes or no."]
"""

CONFIG = """
model:
  name_or_path: tiny
  cache_dir: {cache}
rollout:
  max_new_tokens: 8
grpo:
  num_generations: 2
  tasks_per_step: 2
  micro_batch_size: 8
env:
  type: {name}
  credit: 1.0
warmstart:
  enabled: false
eval:
  max_tasks: 2
logging:
  wandb_mode: disabled
run:
  output_dir: {out}
  max_steps: 2
  save_every: 2
  eval_before: false
  eval_after: false
"""


def make_package(site: Path, dist: str, package: str, name: str, broken: bool = False) -> None:
    """Write `package` with an env registered as `name`, and the `.dist-info` of the
    distribution `dist` declaring it in the entry-point group `lexrl.envs`."""
    folder = site / package
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    options = OPTIONS.format(name=name, package=package)
    if broken:
        options = "import a_module_that_is_not_installed\n" + options
    (folder / "options.py").write_text(textwrap.dedent(options))
    (folder / "env.py").write_text(textwrap.dedent(ENV.format(name=name)))
    info = site / f"{dist.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        f"[lexrl.envs]\n{name} = {package}.options:EchoQaConfig\n"
    )


def run(site: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")]))
    env = {**os.environ, "PYTHONPATH": path, "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        lexrl_command(*args), capture_output=True, text=True, timeout=900, env=env, cwd=cwd
    )


def lexrl_tree_state() -> str:
    """`git status` of `lexrl/`, to show the plugin changed no file of it."""
    root = Path(__file__).parents[1]
    result = subprocess.run(
        ["git", "status", "--porcelain", "--", "lexrl"], capture_output=True, text=True, cwd=root
    )
    return result.stdout if result.returncode == 0 else "(no git)"


@pytest.mark.slow
def test_a_plugin_package_is_listed_audited_and_trained(tmp_path, model_cache):
    before = lexrl_tree_state()
    site = tmp_path / "site"
    make_package(site, "lexrl-echo-qa", "echo_qa", "echo_qa")
    config = tmp_path / "echo_qa.yaml"
    config.write_text(CONFIG.format(name="echo_qa", cache=model_cache, out=tmp_path / "run"))

    listed = run(site, "envs")
    assert listed.returncode == 0, listed.stderr
    assert "echo_qa" in listed.stdout and "[echo_qa]" in listed.stdout
    assert "statute" in listed.stdout  # the built-in envs are found the same way

    audited = run(site, "audit", str(config))
    assert audited.returncode == 0, audited.stderr
    shares = audited.stdout.split("\n\n")[0]  # the first table; the components' follows
    rows = [line for line in shares.splitlines() if line.startswith("| echo_qa |")]
    policies = [row.split("|")[2].strip() for row in rows]
    # The env's own policies, then lexrl's generic probes, with no code in the plugin.
    assert policies[:4] == ["teacher", "empty", "echo", "always_yes"]
    assert {"unparsable", "copy_prompt", "other_task_teacher"} <= set(policies)

    code = (
        "from lexrl.integrations.verifiers import lexrl_setup, load_environment; "
        f"load_environment(config={str(config)!r}); "
        f"_, env = lexrl_setup({str(config)!r}, ()); "
        "print(env.name, len(env.tasks('test')), type(env).__module__)"
    )
    adapted = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(site)},
    )
    assert adapted.returncode == 0, adapted.stderr[-3000:]
    assert adapted.stdout.split() == ["echo_qa", "4", "echo_qa.env"]

    trained = run(site, "train", str(config))
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert (tmp_path / "run" / "checkpoints" / "step-000002").is_dir()
    assert lexrl_tree_state() == before


def test_a_broken_plugin_costs_one_line_and_the_others_still_load(tmp_path):
    site = tmp_path / "site"
    make_package(site, "lexrl-broken", "broken_env", "broken", broken=True)
    make_package(site, "lexrl-echo-qa", "echo_qa", "echo_qa")
    listed = run(site, "envs")
    assert listed.returncode == 0, listed.stderr
    assert "echo_qa" in listed.stdout and "gdpr" in listed.stdout
    warning = [line for line in listed.stderr.splitlines() if "broken" in line]
    assert len(warning) == 1
    assert "lexrl-broken 0.1.0" in warning[0] and "a_module_that_is_not_installed" in warning[0]
    # Training it says why it is not there, in one line.
    config = tmp_path / "broken.yaml"
    config.write_text("env:\n  type: broken\n")
    train = run(site, "train", str(config))
    assert train.returncode == 2
    message = train.stderr.strip().splitlines()[-1]
    assert "failed to load" in message and "lexrl-broken" in message


def test_two_packages_registering_one_name_are_an_error_naming_both(tmp_path):
    site = tmp_path / "site"
    make_package(site, "lexrl-echo-qa", "echo_qa", "echo_qa")
    make_package(site, "lexrl-other-qa", "other_qa", "echo_qa")
    listed = run(site, "envs")
    assert listed.returncode == 2
    message = listed.stderr.strip().splitlines()[-1]
    assert "lexrl-echo-qa 0.1.0" in message and "lexrl-other-qa 0.1.0" in message


def test_a_plugin_may_not_take_a_built_in_name(tmp_path):
    site = tmp_path / "site"
    make_package(site, "lexrl-fake-statute", "fake_statute", "statute")
    listed = run(site, "envs")
    assert listed.returncode == 2
    message = listed.stderr.strip().splitlines()[-1]
    assert "statute" in message and "lexrl-fake-statute" in message and "lexrl 0.1.0" in message


def test_the_registry_imports_no_env_until_asked():
    code = (
        "import sys, lexrl.config, lexrl.registry; "
        "print(any(m.startswith('lexrl.envs') for m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr
