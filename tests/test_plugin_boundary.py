"""An exception from an installed env plugin's own code is the plugin's, not lexrl's: one
`env error` line (exit 10) naming the plugin's distribution and version, the env, the call and
the task, no bug footer, and no key lexrl knows in any output; the traceback, keys masked, in the
file the line names.

The plugin reads a key from the variable its `api_key_env` option names and puts it into its
exception's message, as a client library quoting its request would."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from lexrl.errors import EXIT_CODES
from tests.test_plugins import ENV, run

KEY = "sk-boundaryMARKER0123456789abcdefXYZ"

OPTIONS = '''
from dataclasses import dataclass

from lexrl.registry import EnvConfig, register_env


@register_env("raising_qa")
@dataclass
class RaisingQaConfig(EnvConfig):
    """A toy env whose reward or teacher raises, quoting its key."""

    credit: float = 1.0
    """Reward of a right answer."""
    fail: str = "reward"
    """Which of its calls raises: reward or teacher."""
    api_key_env: str = "RAISING_QA_KEY"
    """The variable holding the key its (imagined) grader takes."""

    CHOICES = {"fail": ("reward", "teacher")}

    def build(self):
        from raising_qa.env import RaisingQaEnv

        return RaisingQaEnv(self)
'''

RAISING = """

import os


def grade(reply, gold, config):
    raise RuntimeError(f"grader refused Authorization: Bearer {os.environ[config.api_key_env]}")


class RaisingQaEnv(EchoQaEnv):
    async def run_episode(self, task, policy):
        if self.config.fail == "teacher":
            return await super().run_episode(task, policy)
        reply = await policy.chat("answerer", "Answer yes or no.", task.inputs["question"])
        return policy.finish(reply, {"correct": grade(reply, task.gold, self.config)})

    def teacher(self, task, rng):
        if self.config.fail == "teacher":
            return lambda role, messages: grade("", task.gold, self.config)
        return super().teacher(task, rng)
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
  type: raising_qa
  fail: {fail}
warmstart:
  enabled: {warmstart}
  num_episodes: 4
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


def make_raising_package(site: Path) -> None:
    folder = site / "raising_qa"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "options.py").write_text(textwrap.dedent(OPTIONS))
    (folder / "env.py").write_text(textwrap.dedent(ENV.format(name="raising_qa")) + RAISING)
    info = site / "lexrl_raising_qa-0.3.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: lexrl-raising-qa\nVersion: 0.3.1\n"
    )
    (info / "entry_points.txt").write_text(
        "[lexrl.envs]\nraising_qa = raising_qa.options:RaisingQaConfig\n"
    )


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("RAISING_QA_KEY", KEY)
    site = tmp_path / "site"
    make_raising_package(site)
    return site


def config(tmp_path: Path, cache: str, fail: str, warmstart: bool = False) -> Path:
    path = tmp_path / f"{fail}.yaml"
    text = CONFIG.format(
        cache=cache, out=tmp_path / f"run-{fail}", fail=fail, warmstart=str(warmstart).lower()
    )
    path.write_text(text)
    return path


def check_env_error(result, call: str, task: bool) -> str:
    """The one env error line of `result`; its traceback file holds the plugin's frames with
    the key masked."""
    output = result.stdout + result.stderr
    assert result.returncode == EXIT_CODES["env"] == 10, output[-3000:]
    assert KEY not in output
    assert "lexrl bug" not in output and "Traceback" not in output
    lines = [line for line in result.stderr.splitlines() if line.startswith("env error:")]
    assert len(lines) == 1, result.stderr[-3000:]
    line = lines[0]
    assert "'raising_qa' of lexrl-raising-qa 0.3.1" in line
    assert f"in {call}" in line and "RuntimeError: grader refused" in line
    assert ("task q" in line) == task, line
    trace = Path(re.search(r"its traceback \(keys masked\): (\S+?);", line).group(1))
    text = trace.read_text()
    assert "raising_qa/env.py" in text and "grade" in text and KEY not in text and "***" in text
    return line


@pytest.mark.slow
def test_a_raising_reward_in_training_and_evaluation_is_one_env_error(tmp_path, site, model_cache):
    path = config(tmp_path, model_cache, "reward")
    check_env_error(run(site, "train", str(path)), "run_episode", task=True)
    check_env_error(run(site, "eval", str(path)), "run_episode", task=True)


@pytest.mark.slow
def test_a_raising_teacher_in_the_audit_and_the_warm_start_is_one_env_error(
    tmp_path, site, model_cache
):
    path = config(tmp_path, model_cache, "teacher", warmstart=True)
    check_env_error(run(site, "audit", str(path)), "a lambda", task=True)
    check_env_error(run(site, "train", str(path)), "a lambda", task=True)


def test_an_error_outside_every_plugin_is_still_a_lexrl_bug():
    from lexrl.plugin_errors import plugin_origin

    try:
        {}["missing"]
    except KeyError as error:
        assert plugin_origin(error) is None
