"""`Policy.finish` checks an env's reward at the boundary: a component that is not a finite
number fails the episode (counted and left out, as one whose judge failed), said in one line
the first time, instead of training on NaN or raising a TypeError from inside the env."""

import math

import numpy as np
import pytest
import torch

from lexrl import policy as policy_module
from lexrl.policy import ScriptedPolicy, unusable_component


def finished(components: dict, task_id: str = "t1"):
    return ScriptedPolicy(None, task_id, lambda role, messages: "").finish(None, components)


@pytest.fixture(autouse=True)
def fresh_reports(monkeypatch):
    monkeypatch.setattr(policy_module, "_REPORTED", set())


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (math.nan, "'recall' is nan, not a finite number"),
        (math.inf, "'recall' is inf, not a finite number"),
        (-math.inf, "'recall' is -inf, not a finite number"),
        ("0.5", "'recall' is '0.5' (str), not a number"),
        (None, "'recall' is None (NoneType), not a number"),
    ],
)
def test_a_component_that_is_not_a_finite_number_fails_the_episode(value, says, capsys):
    trajectory = finished({"format": 0.1, "recall": value})
    assert trajectory.failed == f"reward component {says}"
    assert trajectory.reward == 0.0 and trajectory.components == {}
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"env error: task t1: reward component {says}; the episode counts as failed (said once)"
    )


def test_the_line_is_said_once_however_many_episodes_fail_alike(capsys):
    for task in ("t1", "t2", "t3"):
        assert finished({"recall": math.nan}, task).failed
    assert len(capsys.readouterr().err.splitlines()) == 1


def test_numbers_of_any_kind_are_a_reward():
    trajectory = finished({"a": np.float32(0.25), "b": torch.tensor(0.5), "c": 1, "d": True})
    assert trajectory.failed is None
    assert trajectory.reward == pytest.approx(2.75)
    assert unusable_component({"a": np.int64(2)}) is None
