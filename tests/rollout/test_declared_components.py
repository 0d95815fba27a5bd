"""An episode that leaves out a reward component its env declares is failed by the engine, as a
non-finite one is by `Policy.finish`: logged as 0.0 it would pass for a reward the episode
earned. In a mixture the declaration is the member's."""

from __future__ import annotations

import random

from lexrl.envs.mixture import MixtureEnv
from lexrl.policy import ScriptedPolicy
from lexrl.rollout.engine import run_groups
from tests.envs.test_check import MissingComponent, Toy


def scripted(env):
    return lambda task: ScriptedPolicy(None, task.id, env.teacher(task, random.Random(0)))


def test_a_declared_component_left_out_fails_the_episode_once_said(capsys, monkeypatch):
    monkeypatch.setattr("lexrl.policy._REPORTED", set())  # said once per process
    env = MissingComponent()
    groups = run_groups(env, env.tasks("train")[:2], 2, scripted(env), progress=False)
    trajectories = [t for group in groups for t in group.trajectories]
    assert all("'format' missing" in t.failed for t in trajectories)
    assert all(t.components == {} and t.reward == 0.0 for t in trajectories)
    lines = [line for line in capsys.readouterr().err.splitlines() if "env error" in line]
    assert len(lines) == 1 and "reward_components" in lines[0]


def test_an_episode_reporting_every_declared_component_is_scored():
    env = Toy()
    groups = run_groups(env, env.tasks("train")[:2], 2, scripted(env), progress=False)
    for trajectory in (t for group in groups for t in group.trajectories):
        assert not trajectory.failed and trajectory.components == {"correct": 1.0, "format": 0.1}


class Other(Toy):
    name = "other"
    reward_components = ("correct",)

    def reward(self, reply):
        return {"correct": 1.0}


def test_a_mixture_member_is_held_to_its_own_declaration():
    mixture = MixtureEnv({"toy": Toy(), "other": Other()}, {"toy": 1.0, "other": 1.0})
    tasks = mixture.tasks("train")
    groups = run_groups(mixture, tasks, 1, scripted(mixture), progress=False)
    failed = [t.failed for group in groups for t in group.trajectories]
    assert len(tasks) == 8 and failed == [None] * 8
