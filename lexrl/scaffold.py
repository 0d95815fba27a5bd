"""`lexrl new-env NAME`: write a working env package to start a legal task of your own from.

The folder is a pip-installable package whose `pyproject.toml` declares the env in the
entry-point group `lexrl.envs` (`lexrl.registry`), so after `pip install -e NAME` every lexrl
command knows it, with no edit to lexrl. Out of the box it is a complete toy task: yes/no
questions on contract formation (a contract needs an offer, its acceptance and consideration),
played by the given roles in turn, the last one answering; tasks from a JSONL written here
(`contract_tasks`); a reward that a constant answer cannot live on; a scripted teacher
(warm-start and `lexrl audit`'s reference); two constant answers beside lexrl's generic
degenerate policies; a CPU config on which the tiny model learns the task in minutes and beats
every degenerate policy on the held-out split; a test; a `.gitignore`; and ruff settings that
the written files pass. Replace the data, prompts and reward with your task's. The templates are
below so that what is written is what is tested (`tests/test_scaffold.py`,
`tests/test_contributing.py`)."""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import keyword
import random
import re
import secrets
import shutil
import sys
from pathlib import Path
from string import Template

from lexrl.errors import ConfigError

NAME = re.compile(r"[a-z][a-z0-9_]*")
MAX_NAME_LENGTH = 40
"""The longest env name: it is the folder's, the package's and the entry point's name and part of
file and class names (`configs/NAME_cpu.yaml`, `tests/test_NAME.py`, `NameEnvConfig`), which must
stay readable and within the file system's 255 bytes a name."""
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

[tool.ruff]
line-length = 100
extend-exclude = ["build", "runs"]

[tool.ruff.lint]
select = ["E", "F", "W", "I", "B", "UP"]
ignore = ["E501"]  # a docstring may run past the line length; `ruff format` keeps code within it

[tool.ruff.lint.isort]
known-first-party = ["$name"]
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
    BOUNDS = {
        "temperature": AT_LEAST_0,
        "max_new_tokens": AT_LEAST_1,
        "format_weight": AT_LEAST_0,
    }

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
from lexrl.envs.data import read_jsonl_lines
from lexrl.envs.degenerate import TeacherFactory, constant, generic_policies
from lexrl.errors import DatasetError
from lexrl.policy import Messages, Policy, Teacher
from lexrl.types import Task, Trajectory

from $name.options import $config_class
from $name.reward import ANSWERS, answer_reward, parse_answer

ROLES = ($roles_list)


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
        packaged = resources.files("$name") / "data" / "tasks.jsonl"
        self._tasks = load_tasks(config.tasks_path or str(packaged))

    def tasks(self, split: str) -> list[Task]:
        if split not in self._tasks:
            raise DatasetError(f"the {self.name} env has splits train and test, not {split!r}")
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

    def degenerate_policies(self) -> dict[str, TeacherFactory]:
        return {
            **generic_policies(),
            "always_yes": constant("Answer: yes"),
            "always_no": constant("Answer: no"),
        }

    def text_corpus(self) -> list[str]:
        prompts = [prompt_text("$name", role) for role in self.roles]
        train = self.tasks("train")
        texts = [f"{task.inputs['question']} {task.meta['rationale']}" for task in train]
        return [*prompts, *texts, "Answer: yes", "Answer: no"]
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
# `text_corpus`), a warm-start on the scripted teacher long enough for the answer line to parse,
# then GRPO with LoRA; evaluated on the 48 held-out questions before and after, then against
# every degenerate policy (`eval_vs_degenerate.md`).
#   lexrl audit configs/${name}_cpu.yaml
#   lexrl train configs/${name}_cpu.yaml
#   lexrl eval configs/${name}_cpu.yaml --checkpoint runs/${name}_cpu/checkpoints/step-$final_step
model:
  name_or_path: tiny
  tiny_layers: 2
  tiny_hidden_size: 128
lora:
  r: 16
  alpha: 32
rollout:
  max_new_tokens: 32
grpo:
  num_generations: 8
  tasks_per_step: 4
  loss: grpo
  learning_rate: 0.001
  beta: 0.04             # KL to the warm-started model, DeepSeekMath's value (Shao et al. 2024)
  micro_batch_size: 32
env:
  type: $name
  format_weight: 0.1
warmstart:
  enabled: true
  num_episodes: $warmstart_episodes       # episodes x roles x epochs / batch_size = SFT steps
  epochs: 2
eval:
  split: test
  max_tasks: null        # all 48: a paired verdict needs them (docs: Contributing)
  samples_per_task: 2
logging:
  wandb_mode: disabled
run:
  output_dir: runs/${name}_cpu
  max_steps: $max_steps
  save_every: $max_steps
"""

TEST = '''\
"""The $name env: its reward, its data and its teacher against its degenerate policies."""

import asyncio
import json
import random

import pytest
from lexrl.config import load_config
from lexrl.envs.check import check_env
from lexrl.errors import DatasetError
from lexrl.policy import ScriptedPolicy

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
    assert isinstance(config.env, $config_class)
    assert config.env.name == "$name"


def test_a_bad_line_names_the_file_and_line(tmp_path):
    path = tmp_path / "tasks.jsonl"
    row = {"id": "a", "split": "train", "question": "q", "rationale": "r", "answer": "perhaps"}
    path.write_text(json.dumps(row) + "\\n")
    with pytest.raises(DatasetError, match="tasks.jsonl:1"):
        load_tasks(str(path))


@pytest.mark.parametrize("split", ["train", "test"])
def test_the_env_keeps_the_env_contract(split):
    # Task ids, prompts, finite and declared reward components, the same reward for the same
    # replies: what `lexrl audit` checks before its table.
    assert check_env($config_class().build(), split) == []


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
    lexrl train configs/${name}_cpu.yaml         # warm-start, GRPO, then eval_vs_degenerate.md

Read `parsed` and `signal/*` in `runs/${name}_cpu/metrics.jsonl` while it trains, and
`runs/${name}_cpu/eval_vs_degenerate.md` at the end: the trained policy against each policy that
ignores the question.

Files: `$name/options.py` (the options, registered as `$name`), `$name/env.py` (the workflow),
`$name/reward.py`, `$name/prompts/<role>.txt` (one per role), `$name/data/tasks.jsonl`.
"""

PROMPT = """\
You are the $role of a small legal team answering yes/no questions on contract formation. A
contract is formed only when there is an offer, an acceptance of it, and consideration.
$instruction"""

GITIGNORE = ("runs/", ".lexrl_cache/", "build/", "dist/", "*.egg-info/", "__pycache__/", "wandb/")
WARMSTART_EPISODES = 320
"""Teacher episodes of the CPU config's warm-start: with 2 roles and 2 epochs, 80 SFT steps of 16,
after which the tiny model's answer line parses on about 4 replies in 5 and is mostly right, so
GRPO's groups differ and it has something to learn (192 steps: every reply right, no signal;
the former 12: no answer line)."""
MAX_STEPS = 30
NAMES = ("Alice", "Bob", "Chen", "Dana", "Emil", "Farah", "Grace", "Hugo", "Iris", "Jonas")
THINGS = ("bicycle", "laptop", "car", "piano", "boat", "camera", "desk", "violin")
SPLITS = {"train": 192, "test": 48}
"""Tasks per split. 48 held-out questions give a paired 95% interval of about +-0.34 reward
(1.96 * sd / sqrt(48), sd about 1.2 per task) around the trained policy's margin over a
degenerate policy: enough to call a trained policy that answers most of them right."""
ELEMENTS = ("offer", "acceptance", "consideration")
INCOMPLETE = [
    (offer, acceptance, consideration)
    for offer in (True, False)
    for acceptance in (True, False)
    for consideration in (True, False)
][1:]
"""The seven ways an element can be missing; every other question has all three, so that as many
questions are a contract as not and a constant answer is right on half of them."""


def contract_facts(seller: str, buyer: str, thing: str, price: int, present: tuple) -> str:
    """The question: one sentence per element, a fixed wording for present and for missing, so
    that the rule (a contract needs all three) can be read off the text."""
    offer, acceptance, consideration = present
    return " ".join(
        [
            f"{seller} offered to sell the {thing} to {buyer} for {price} dollars."
            if offer
            else f"{seller} said the {thing} might be for sale one day.",
            f"{buyer} replied: 'I accept.'" if acceptance else f"{buyer} did not reply.",
            f"{buyer} promised to pay the price."
            if consideration
            else f"{buyer} was to pay nothing in return.",
            "Is there a binding contract?",
        ]
    )


def contract_tasks() -> list[dict]:
    """The packaged toy data, drawn with a fixed seed: `SPLITS` questions per split, half of them
    a contract and the others missing an element (the seven ways in turn), in a shuffled order,
    so that neither a file position nor a neighbour gives the answer away (lexrl's
    `other_task_teacher` probe replays the teacher of the task half the split away); a test
    question is never a training one's text."""
    rng = random.Random(0)
    rows, seen = [], set()
    for split, count in SPLITS.items():
        cases = [(True, True, True) if i % 2 == 0 else INCOMPLETE[i // 2 % 7] for i in range(count)]
        rng.shuffle(cases)
        for index, present in enumerate(cases):
            question = ""
            while not question or question in seen:
                seller, buyer = rng.sample(NAMES, 2)
                thing, price = rng.choice(THINGS), rng.randrange(20, 1000, 10)
                question = contract_facts(seller, buyer, thing, price, present)
            seen.add(question)
            rationale = " ".join(
                f"{element.capitalize()}: {'yes' if there else 'no'}."
                for element, there in zip(ELEMENTS, present, strict=True)
            )
            answer = "yes" if all(present) else "no"
            row = {"id": f"{split}-{index:03d}", "split": split, "question": question}
            rows.append({**row, "rationale": rationale, "answer": answer})
    return rows


def normalized(distribution: str) -> str:
    """A distribution name as pip compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


def name_holder(name: str) -> str | None:
    """What already answers to NAME and what installing the package would do to it, in words, or
    None: an installed distribution, which `pip install -e` of the written package (its
    distribution `name.replace("_", "-")`) would uninstall, or an importable top-level module,
    which the package would shadow or be shadowed by."""
    wanted = normalized(name)
    for distribution in importlib.metadata.distributions():
        held = distribution.metadata["Name"] or ""
        if normalized(held) == wanted:
            return (
                f"the installed distribution {held} {distribution.version}: "
                "pip install -e would replace it"
            )
    if name in sys.stdlib_module_names:
        return f"the standard library's module {name}: one would shadow the other"
    spec = importlib.util.find_spec(name)
    if spec is not None:
        where = spec.origin or ", ".join(spec.submodule_search_locations or ())
        return f"the importable module {name} ({where}): one would shadow the other"
    return None


def check_name(name: str) -> None:
    """Refuse a NAME that is no Python package name, longer than `MAX_NAME_LENGTH`, held by an
    installed env, or the name of an installed distribution or an importable module."""
    from lexrl.registry import discover_envs

    if len(name) > MAX_NAME_LENGTH:
        raise ConfigError(
            f"env name {name[:MAX_NAME_LENGTH]!r}... has {len(name)} characters: use at most "
            f"{MAX_NAME_LENGTH} (nothing was written)"
        )
    if not NAME.fullmatch(name) or keyword.iskeyword(name):
        raise ConfigError(
            f"env name {name!r}: use lower-case letters, digits and _, starting with a letter "
            "(it is the Python package's name too)"
        )
    if name in discover_envs():
        raise ConfigError(f"env name {name!r} is taken by an installed env (`lexrl envs`)")
    holder = name_holder(name)
    if holder is not None:
        raise ConfigError(
            f"env name {name!r} is the name of {holder}; choose another name (nothing was written)"
        )


def camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def check_parent(parent: Path) -> list[Path]:
    """Refuse a `--dir` that is a file or lies under one; return its folders that do not exist
    yet, deepest first (`--dir` is created as needed)."""
    missing = []
    for folder in [parent, *parent.parents]:
        if folder.exists():
            if not folder.is_dir():
                where = "is" if folder == parent else f"lies under {folder}, which is"
                raise ConfigError(
                    f"--dir {parent} {where} a file, not a folder: give a folder (nothing was "
                    "written)"
                )
            break
        missing.append(folder)
    return missing


def stage(root: Path, contents: dict[str, str], created: list[Path]) -> None:
    """Write `contents` (relative path: text) into a staging folder beside `root`, renamed to
    `root` once all of it is written. A failed write (a full disk, a file-size limit, an
    interrupt) leaves no half-written package, which would block the next attempt as existing,
    and removes the staging folder and the folders `created` for `--dir`; one left by a killed
    run (`.NAME.partial-*`, hidden) blocks nothing, each run staging under a name of its own."""
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        # Not `tempfile.mkdtemp`: its mode 0700 would become the package's.
        staging = root.parent / f".{root.name}.partial-{secrets.token_hex(8)}"
        staging.mkdir()
        try:
            for relative, text in contents.items():
                path = staging / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            staging.rename(root)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    except BaseException as error:
        for folder in created:
            with contextlib.suppress(OSError):
                folder.rmdir()
        if isinstance(error, OSError):
            raise ConfigError(
                f"cannot write {root}: {error.strerror or error}; nothing was left behind: free "
                "space, raise the file-size limit or give a writable --dir, then run the same "
                "command again"
            ) from None
        raise


def write_env(name: str, roles: tuple[str, ...], parent: Path) -> Path:
    """Write the package folder `parent/name`, all of it or nothing (`stage`), and return it;
    refuse an existing folder. `parent` is created if missing."""
    check_name(name)
    for role in roles:
        if not NAME.fullmatch(role):
            raise ConfigError(f"role {role!r}: use lower-case letters, digits and _")
    if len(set(roles)) != len(roles) or not roles:
        raise ConfigError(f"--roles {','.join(roles)}: give one or more distinct roles")
    root = parent / name
    created = check_parent(parent)
    if root.exists():
        raise ConfigError(f"{root} exists: choose another NAME or folder (nothing was written)")
    values = {
        "name": name,
        "dist": name.replace("_", "-"),
        "title": name.replace("_", " ").capitalize(),
        "config_class": f"{camel(name)}EnvConfig",
        "env_class": f"{camel(name)}Env",
        "warmstart_episodes": WARMSTART_EPISODES,
        "max_steps": MAX_STEPS,
        "final_step": f"{MAX_STEPS:06d}",
        "roles_list": ", ".join(f'"{role}"' for role in roles) + ("," if len(roles) == 1 else ""),
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
    contents = {
        relative: Template(template).substitute(values) for relative, template in files.items()
    }
    contents[f"{name}/data/tasks.jsonl"] = "".join(
        json.dumps(row) + "\n" for row in contract_tasks()
    )
    contents[".gitignore"] = "".join(f"{line}\n" for line in GITIGNORE)
    stage(root, contents, created)
    return root
