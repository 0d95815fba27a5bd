"""`lexrl new-env NAME`: write a working env package to start a legal task of your own from.

The folder is a pip-installable package whose `pyproject.toml` declares the env in the
entry-point group `lexrl.envs` (`lexrl.registry`), so after `pip install -e NAME` every lexrl
command knows it, with no edit to lexrl. Out of the box it is a complete toy task: yes/no
questions on contract formation (a contract needs an offer, its acceptance and consideration),
played by the given roles in turn, the last one answering; tasks from a small JSONL; a reward
that a constant answer cannot live on; a scripted teacher (warm-start and `lexrl audit`'s
reference); two degenerate policies; a CPU config; and a test. Replace the data, prompts and
reward with your task's. The templates are below so that what is written is what is tested
(`tests/test_new_env.py`)."""

from __future__ import annotations

import json
import keyword
import re
from pathlib import Path
from string import Template

from lexrl.errors import ConfigError

NAME = re.compile(r"[a-z][a-z0-9_]*")
DEFAULT_ROLES = ("analyst", "answerer")

PYPROJECT = """\
[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[project]
name = "$dist"
version = "0.1.0"
description = "$title: a lexrl environment"
requires-python = ">=3.11"
dependencies = ["lexrl"]

# What makes lexrl find the env: an entry point in the group `lexrl.envs` naming its registered
# options class.
[project.entry-points."lexrl.envs"]
$name = "$name.options:$config_class"

[tool.setuptools.packages.find]
include = ["$name*"]

[tool.setuptools.package-data]
"$name" = ["prompts/*.txt", "data/*.jsonl"]
"""

OPTIONS = '''\
"""Options of the $name env: a dataclass whose field docstrings are its documentation
(`lexrl config show env.$name`), registered under its name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lexrl.errors import ConfigError
from lexrl.options import AT_LEAST_0, AT_LEAST_1
from lexrl.registry import EnvConfig, register_env

if TYPE_CHECKING:
    from lexrl.envs.base import Env


@register_env("$name")
@dataclass
class $config_class(EnvConfig):
    """$title: $roles_text in turn, the last one answering yes or no."""

    tasks_path: str = ""
    """A JSONL file of tasks, one `{"id", "split", "question", "rationale", "answer"}` a line
    (`split`: train or test; `answer`: yes or no); empty: the packaged `data/tasks.jsonl`."""
    temperature: float = 1.0
    """Sampling temperature of every role."""
    max_new_tokens: int | None = None
    """Tokens per reply; None: `rollout.max_new_tokens`."""
    format_weight: float = 0.1
    """Weight of the `format` reward component: credit for a final reply with a parsable
    answer."""
    answer_style: str = "line"
    """How the last role gives its answer: `line` (a line `Answer: yes`)."""

    CHOICES = {"answer_style": ("line",)}
    BOUNDS = {"temperature": AT_LEAST_0, "max_new_tokens": AT_LEAST_1, "format_weight": AT_LEAST_0}

    def check(self, path: str, config: Any) -> None:
        if self.tasks_path and not self.tasks_path.endswith(".jsonl"):
            raise ConfigError(f"`{path}.tasks_path` {self.tasks_path!r} is no .jsonl file")

    def build(self) -> Env:
        from $name.env import $env_class

        return $env_class(self)
'''

ENV = '''\
"""The $name env: $roles_text read a question in turn, each seeing the replies before it;
the last role's `Answer: yes|no` is scored against the task's gold answer."""

from __future__ import annotations

import random
from importlib import resources

from lexrl.envs.base import Env, prompt_text
from lexrl.envs.data import DatasetError, read_jsonl_lines
from lexrl.envs.degenerate import PolicyFactory, constant, generic_policies
from lexrl.rollout.policy import Messages, Policy, Teacher
from lexrl.types import Task, Trajectory

from $name.options import $config_class
from $name.reward import ANSWERS, answer_reward, parse_answer

ROLES = $roles_tuple


def load_tasks(path: str) -> dict[str, list[Task]]:
    """The tasks of a JSONL file by split; a bad line is a `DatasetError` naming `file:line`."""
    tasks: dict[str, list[Task]] = {"train": [], "test": []}
    required = ("id", "split", "question", "rationale", "answer")
    for number, row in read_jsonl_lines(path, required, unique="id"):
        if row["split"] not in tasks or row["answer"] not in ANSWERS:
            raise DatasetError(
                f"{path}:{number}: `split` must be train or test and `answer` yes or no"
            )
        inputs = {"question": row["question"]}
        tasks[row["split"]].append(
            Task(str(row["id"]), inputs, row["answer"], {"rationale": row["rationale"]})
        )
    return tasks


class $env_class(Env):
    name = "$name"
    roles = ROLES
    reward_components = ("correct", "format")
    episode_metrics = ("accuracy", "parsed")
    headline_metric = "accuracy"

    def __init__(self, config: $config_class):
        self.config = config
        path = config.tasks_path or str(resources.files("$name") / "data" / "tasks.jsonl")
        self._tasks = load_tasks(path)

    def tasks(self, split: str) -> list[Task]:
        if split not in self._tasks:
            raise DatasetError(f"the $name env has splits train and test, not {split!r}")
        return self._tasks[split]

    def user_message(self, task: Task, replies: list[tuple[str, str]]) -> str:
        earlier = "".join(f"\\n\\n{role}: {reply}" for role, reply in replies)
        return f"Question: {task.inputs['question']}{earlier}"

    async def run_episode(self, task: Task, policy: Policy) -> Trajectory:
        replies: list[tuple[str, str]] = []
        for role in self.roles:
            reply = await policy.chat(
                role,
                prompt_text("$name", role),
                self.user_message(task, replies),
                temperature=self.config.temperature,
                max_new_tokens=self.config.max_new_tokens,
            )
            replies.append((role, reply))
        answer = parse_answer(replies[-1][1])
        components = answer_reward(answer, task.gold, self.config.format_weight)
        metrics = {"accuracy": float(answer == task.gold), "parsed": float(answer is not None)}
        return policy.finish({"answer": answer, "replies": replies}, components, metrics=metrics)

    def teacher(self, task: Task, rng: random.Random) -> Teacher:
        """Every role but the last states what decides the question (the task's rationale);
        the last one answers with the gold answer."""

        def respond(role: str, messages: Messages) -> str:
            if role == self.roles[-1]:
                return f"{task.meta['rationale']}\\nAnswer: {task.gold}"
            return task.meta["rationale"]

        return respond

    def degenerate_policies(self) -> dict[str, PolicyFactory]:
        return {
            **generic_policies(),
            "always_yes": constant("Answer: yes"),
            "always_no": constant("Answer: no"),
        }

    def text_corpus(self) -> list[str]:
        prompts = [prompt_text("$name", role) for role in self.roles]
        train = [task.inputs["question"] + " " + task.meta["rationale"] for task in self.tasks("train")]
        return [*prompts, *train, "Answer: yes", "Answer: no"]
'''

REWARD = '''\
"""The $name reward: pure functions of the final reply and the gold answer."""

from __future__ import annotations

import re

ANSWERS = ("yes", "no")
_ANSWER = re.compile(r"answer\\s*:\\s*(yes|no)\\b", re.IGNORECASE)


def parse_answer(reply: str) -> str | None:
    """The last `Answer: yes|no` of a reply, lower-cased; None when there is none. Never
    raises: a cut, empty or malformed reply is simply unanswered."""
    found = _ANSWER.findall(reply)
    return found[-1].lower() if found else None


def answer_reward(answer: str | None, gold: str, format_weight: float) -> dict[str, float]:
    """`correct`: +1 for the gold answer, -1 for the other, 0 for none, so that a constant or
    random answer earns 0 in expectation on balanced questions; `format`: `format_weight` for
    any parsable answer."""
    correct = 0.0 if answer is None else (1.0 if answer == gold else -1.0)
    return {"correct": correct, "format": format_weight * float(answer is not None)}
'''

CONFIG = """\
# The $name env on the CPU: lexrl's built-in tiny model (its tokenizer trained on the env's
# `text_corpus`), a short warm-start on the scripted teacher, then GRPO with LoRA.
#   lexrl audit configs/${name}_cpu.yaml
#   lexrl train configs/${name}_cpu.yaml
#   lexrl eval configs/${name}_cpu.yaml --checkpoint runs/${name}_cpu/checkpoints/step-000002
model:
  name_or_path: tiny
  tiny_layers: 2
  tiny_hidden_size: 128
rollout:
  max_new_tokens: 48
grpo:
  num_generations: 4
  tasks_per_step: 2
  loss: grpo
  learning_rate: 0.002
  micro_batch_size: 16
env:
  type: $name
  format_weight: 0.1
warmstart:
  enabled: true
  num_episodes: 96
  epochs: 1
eval:
  split: test
  max_tasks: 8
logging:
  wandb_mode: disabled
run:
  output_dir: runs/${name}_cpu
  max_steps: 2
  save_every: 2
"""

TEST = '''\
"""The $name env: its reward, its data and its teacher against its degenerate policies."""

import asyncio
import random

import pytest

from lexrl.config import load_config
from lexrl.envs.data import DatasetError
from lexrl.rollout.policy import ScriptedPolicy
from $name.env import load_tasks
from $name.options import $config_class
from $name.reward import answer_reward, parse_answer


def test_parse_answer_takes_the_last_answer_and_never_raises():
    assert parse_answer("Answer: no ... Answer: YES") == "yes"
    assert parse_answer("") is None and parse_answer("Answer: maybe") is None


def test_a_constant_answer_earns_nothing_on_balanced_questions():
    rewards = [answer_reward("yes", gold, 0.0)["correct"] for gold in ("yes", "no")]
    assert sum(rewards) == 0


def test_the_config_selects_the_env():
    config = load_config(None, ["--env.type", "$name"])
    assert isinstance(config.env, $config_class) and config.env.name == "$name"


def test_a_bad_line_names_the_file_and_line(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"id": "a", "split": "train", "question": "q", "rationale": "r", "answer": "perhaps"}\\n')
    with pytest.raises(DatasetError, match="tasks.jsonl:1"):
        load_tasks(str(path))


def play(env, task, factory):
    policy = ScriptedPolicy(None, task.id, factory(task, random.Random(0)))
    return asyncio.run(env.run_episode(task, policy)).reward


def test_the_teacher_beats_every_degenerate_policy():
    env = $config_class().build()
    tasks = env.tasks("test")
    teacher = sum(play(env, task, env.teacher) for task in tasks) / len(tasks)
    for name, factory in env.degenerate_policies().items():
        degenerate = sum(play(env, task, factory) for task in tasks) / len(tasks)
        assert degenerate < 0.5 * teacher, name
'''

README = """\
# $name: a lexrl environment

Scaffolded by `lexrl new-env $name`. Install it beside lexrl and every lexrl command knows it:

    pip install -e .
    lexrl envs                                   # lists $name
    pytest tests                                 # the env's own tests
    lexrl audit configs/${name}_cpu.yaml         # the teacher against the degenerate policies
    lexrl train configs/${name}_cpu.yaml         # warm-start, then 2 GRPO steps on the tiny model

Files: `$name/options.py` (the options, registered as `$name`), `$name/env.py` (the workflow),
`$name/reward.py`, `$name/prompts/<role>.txt` (one per role), `$name/data/tasks.jsonl`.
"""

PROMPT = """\
You are the $role of a small legal team answering yes/no questions on contract formation. A
contract is formed only when there is an offer, an acceptance of it, and consideration.
$instruction"""

PARTIES = [
    ("Alice", "Bob", "her bicycle"),
    ("Chen", "Dana", "his laptop"),
    ("Emil", "Farah", "his car"),
    ("Grace", "Hugo", "her piano"),
]


CASES = [
    (True, True, True, 50),
    (True, True, True, 120),
    (True, True, True, 300),
    (True, True, True, 900),
    (False, True, True, 50),
    (True, False, True, 120),
    (True, True, False, 300),
    (False, False, False, 900),
]
"""(offer, acceptance, consideration, price): as many contracts as not, so that a constant
answer is right on half the questions."""


def contract_tasks() -> list[dict]:
    """The packaged toy data: eight cases for each of four pairs of parties, half of them a
    contract; the first three pairs train, the last one is the test split."""
    rows = []
    for index, (seller, buyer, thing) in enumerate(PARTIES):
        for offer, acceptance, consideration, price in CASES:
            facts = [
                f"{seller} offered to sell {thing} to {buyer} for {price} dollars."
                if offer
                else f"{seller} said they might sell {thing} one day, naming no price.",
                f"{buyer} replied in writing: 'I accept.'"
                if acceptance
                else f"{buyer} did not reply.",
                f"{buyer} promised to pay the price."
                if consideration
                else f"{buyer} was to get it for nothing in return.",
            ]
            elements = {"offer": offer, "acceptance": acceptance, "consideration": consideration}
            rationale = " ".join(
                f"{element}: {'yes' if present else 'no'}." for element, present in elements.items()
            )
            marks = "".join(str(int(present)) for present in elements.values())
            rows.append(
                {
                    "id": f"{seller.lower()}-{marks}-{price}",
                    "split": "test" if index == len(PARTIES) - 1 else "train",
                    "question": " ".join(facts) + " Is there a binding contract?",
                    "rationale": rationale[0].upper() + rationale[1:],
                    "answer": "yes" if all(elements.values()) else "no",
                }
            )
    return rows


def check_name(name: str) -> None:
    """Refuse a NAME that is no Python package name or that an installed env already holds."""
    from lexrl.registry import discover_envs

    if not NAME.fullmatch(name) or keyword.iskeyword(name):
        raise ConfigError(
            f"env name {name!r}: use lower-case letters, digits and _, starting with a letter "
            "(it is the Python package's name too)"
        )
    if name in discover_envs():
        raise ConfigError(f"env name {name!r} is taken by an installed env (`lexrl envs`)")


def camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def write_env(name: str, roles: tuple[str, ...], parent: Path) -> Path:
    """Write the package folder `parent/name` and return it; refuse an existing folder."""
    check_name(name)
    for role in roles:
        if not NAME.fullmatch(role):
            raise ConfigError(f"role {role!r}: use lower-case letters, digits and _")
    if len(set(roles)) != len(roles) or not roles:
        raise ConfigError(f"--roles {','.join(roles)}: give one or more distinct roles")
    root = parent / name
    if root.exists():
        raise ConfigError(f"{root} exists: choose another NAME or folder (nothing was written)")
    values = {
        "name": name,
        "dist": name.replace("_", "-"),
        "title": name.replace("_", " ").capitalize(),
        "config_class": f"{camel(name)}EnvConfig",
        "env_class": f"{camel(name)}Env",
        "roles_tuple": repr(tuple(roles)),
        "roles_text": ", ".join(roles) if len(roles) > 1 else f"the {roles[0]}",
    }
    files = {
        "pyproject.toml": PYPROJECT,
        "README.md": README,
        f"{name}/__init__.py": '"""The $name env for lexrl (`lexrl new-env`)."""\n',
        f"{name}/options.py": OPTIONS,
        f"{name}/env.py": ENV,
        f"{name}/reward.py": REWARD,
        f"configs/{name}_cpu.yaml": CONFIG,
        f"tests/test_{name}.py": TEST,
    }
    for index, role in enumerate(roles):
        last = index == len(roles) - 1
        instruction = (
            "Read the question and the notes before you. Give one line of reasoning, then end "
            "with a line `Answer: yes` or `Answer: no`."
            if last
            else "Read the question and say, for each element, whether the facts show it."
        )
        text = Template(PROMPT).substitute(role=role, instruction=instruction)
        files[f"{name}/prompts/{role}.txt"] = text + "\n"
    for relative, template in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(Template(template).substitute(values), encoding="utf-8")
    data = root / name / "data" / "tasks.jsonl"
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text("".join(json.dumps(row) + "\n" for row in contract_tasks()), encoding="utf-8")
    return root
