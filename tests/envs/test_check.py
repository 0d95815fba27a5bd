"""`check_env`: every built-in env passes the env contract's checks as its CPU config builds it,
and each way a toy env breaks the contract is one line naming what broke."""

import random
from pathlib import Path

import pytest

from lexrl.config import load_config
from lexrl.envs import make_env
from lexrl.envs.base import Env
from lexrl.envs.check import check_env
from lexrl.envs.mixture import MixtureEnv
from lexrl.types import Task

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ["demo_cpu", "argument_cpu", "debate_cpu", "gdpr_cpu", "lexam_cpu", "legal_mix_cpu"]


@pytest.mark.parametrize("name", CONFIGS)
def test_every_builtin_env_checks_clean(name):
    env = make_env(load_config(ROOT / f"configs/{name}.yaml").env)
    assert check_env(env, "train") == []
    assert check_env(env, "test", tasks=2, seed=1) == []


class Toy(Env):
    """A one-role env answering "yes" right: reward 1 for a reply starting with yes."""

    name = "toy"
    roles = ("answerer",)
    reward_components = ("correct", "format")

    def tasks(self, split):
        return [
            Task(id=f"q{i}", inputs={"question": f"Is {i} a number?"}, gold="yes") for i in range(4)
        ]

    def reward(self, reply: str) -> dict:
        right = float(reply.strip().lower().startswith("yes"))
        return {"correct": right, "format": 0.1 * bool(reply.strip())}

    async def run_episode(self, task, policy):
        reply = await policy.chat("answerer", "Answer yes or no.", task.inputs["question"])
        return policy.finish(reply, self.reward(reply))

    def teacher(self, task, rng):
        return lambda role, messages: task.gold


def test_a_clean_toy_env_has_no_problem():
    assert check_env(Toy()) == []


class NanReward(Toy):
    def reward(self, reply):
        return {**super().reward(reply), "format": float("nan")}


class MissingComponent(Toy):
    def reward(self, reply):
        return {"correct": super().reward(reply)["correct"]}


class UndeclaredComponent(Toy):
    def reward(self, reply):
        return {**super().reward(reply), "bonus": 1.0}


class RandomReward(Toy):
    def reward(self, reply):
        return {**super().reward(reply), "format": random.random()}


class RaisingReward(Toy):
    def reward(self, reply):
        return {"correct": 1 / len(reply), "format": 0.0}


class DuplicateIds(Toy):
    def tasks(self, split):
        return [Task(id="q1", inputs={"question": "?"}, gold="yes")] * 2 + super().tasks(split)


class RaisingTasks(Toy):
    def tasks(self, split):
        raise ValueError(f"no split {split!r}")


class EmptyPrompt(Toy):
    async def run_episode(self, task, policy):
        reply = await policy.chat("answerer", "", "")
        return policy.finish(reply, self.reward(reply))


class WrongRole(Toy):
    async def run_episode(self, task, policy):
        reply = await policy.chat("judge", "Answer yes or no.", task.inputs["question"])
        return policy.finish(reply, self.reward(reply))


class NoFinish(Toy):
    async def run_episode(self, task, policy):
        await policy.chat("answerer", "Answer yes or no.", task.inputs["question"])
        return policy.trajectory


class StringReward(Toy):
    def reward(self, reply):
        return {**super().reward(reply), "correct": "1"}


def test_a_nan_reward_component_is_named():
    (problem,) = check_env(NanReward())
    assert problem.startswith("toy: task q0, policy teacher: reward component 'format' is nan")
    assert "not a finite number" in problem and "more episodes" in problem


def test_a_component_that_is_not_a_number_is_named():
    (problem,) = check_env(StringReward())
    assert "reward component 'correct' is '1' (str), not a number" in problem


def test_a_declared_component_left_out_is_named():
    assert check_env(MissingComponent()) == [
        "toy: task q0, policy teacher: declared reward component 'format' not reported "
        "(and 8 more episodes)"
    ]


def test_an_undeclared_component_is_named():
    (problem,) = check_env(UndeclaredComponent())
    assert "reward component 'bonus' reported but not declared in reward_components" in problem


def test_a_random_reward_is_not_deterministic():
    problems = check_env(RandomReward())
    assert problems and all("the reward is not deterministic" in p for p in problems)
    assert problems[0].startswith("toy: task q0, policy teacher: ")


def test_a_reward_that_raises_is_named_with_its_error():
    # The empty policy's reply divides by zero; the teacher's does not.
    problems = check_env(RaisingReward())
    assert problems == [
        "toy: task q0, policy empty: run_episode raised ZeroDivisionError: division by zero "
        "(and 2 more episodes)"
    ]


def test_duplicate_task_ids_are_named():
    (problem,) = check_env(DuplicateIds())
    assert problem == "toy: tasks('train'): duplicate task ids: 'q1' (3 times)"


def test_tasks_that_raise_are_one_line():
    assert check_env(RaisingTasks(), "dev") == [
        "toy: tasks('dev') raised ValueError: no split 'dev'"
    ]


def test_empty_prompts_a_wrong_role_and_no_finish_are_named():
    empty = check_env(EmptyPrompt())
    assert any("role 'answerer': the system prompt is ''" in p for p in empty)
    assert any("role 'answerer': the user message is ''" in p for p in empty)
    (wrong,) = check_env(WrongRole())
    assert "chat in role 'judge', not one of the env's roles ('answerer',)" in wrong
    (unfinished,) = check_env(NoFinish())
    assert "run_episode returned without calling Policy.finish" in unfinished


def test_a_mixture_is_checked_member_by_member():
    mixture = MixtureEnv({"toy": Toy(), "nan": NanReward()}, {"toy": 0.5, "nan": 0.5})
    problems = check_env(mixture)
    assert len(problems) == 1 and problems[0].startswith("nan: task q0, policy teacher: ")


class Relay(Toy):
    """A clerk's note is the answerer's message: under the `empty` policy the note is empty."""

    roles = ("clerk", "answerer")

    async def run_episode(self, task, policy):
        note = await policy.chat("clerk", "Restate the question.", task.inputs["question"])
        reply = await policy.chat("answerer", "Answer yes or no.", note)
        return policy.finish(reply, self.reward(reply))

    def teacher(self, task, rng):
        return lambda role, messages: task.gold if role == "answerer" else "Is it a number?"


def test_a_message_that_carries_an_empty_reply_on_is_no_problem():
    assert "empty" in Relay().degenerate_policies()
    assert check_env(Relay()) == []
