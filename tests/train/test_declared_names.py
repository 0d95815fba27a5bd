"""What a training step logs comes from the env's declarations: a step's action under the role
that took it, and a reward component the env did not declare stops the run at once."""

from types import SimpleNamespace

import pytest

from lexrl.envs import make_env
from lexrl.envs.base import undeclared_components
from lexrl.envs.gdpr.options import GdprEnvConfig
from lexrl.envs.mixture import MixtureEnv
from lexrl.envs.mixture_options import MixEnvConfig, MixMember
from lexrl.envs.statute.env import PLANNER_ACTIONS
from lexrl.envs.statute.options import StatuteEnvConfig
from lexrl.errors import EnvContractError
from lexrl.train.trainer import check_components, metric_keys, reduce_metric_sums, step_metrics
from lexrl.types import Group, Task, Trajectory, Turn

ONE_PROCESS = SimpleNamespace(num_processes=1)


def _episode(role: str, steps: list[dict], components: dict[str, float]) -> Trajectory:
    turn = Turn(role, [1], [5, 6], [-1.0, -1.0], "", 0)
    reward = float(sum(components.values()))
    return Trajectory("t", [turn], reward=reward, components=components, steps=steps)


def test_the_statute_envs_action_keys_are_its_planners_as_before():
    env = make_env(StatuteEnvConfig())
    keys = metric_keys(env)
    assert [k for k in keys if "/action/" in k] == [
        f"agent/planner/action/{action}" for action in PLANNER_ACTIONS
    ]
    steps = [{"action": "single_element", "queries": []}, {"action": None}, {"action": "exit"}]
    components = dict.fromkeys(env.reward_components, 0.0)
    groups = [Group(Task("t", {}, []), [_episode("planner", steps, components)] * 2)]
    means = reduce_metric_sums(step_metrics(groups, env), keys, ONE_PROCESS)
    assert means["agent/planner/action/single_element"] == 1.0
    assert means["agent/planner/action/exit"] == 1.0
    assert means["agent/planner/action/multi_element"] == 0.0


def test_a_step_that_names_its_role_is_counted_under_it():
    env = SimpleNamespace(
        name="debate",
        roles=("judge", "debater"),
        reward_components=(),
        episode_metrics=(),
        actions={"judge": ("decide",), "debater": ("concede",)},
    )
    keys = metric_keys(env)
    assert "agent/judge/action/decide" in keys and "agent/debater/action/concede" in keys
    steps = [{"action": "decide"}, {"action": "concede", "role": "debater"}]
    groups = [Group(Task("t", {}, []), [_episode("judge", steps, {})])]
    means = reduce_metric_sums(step_metrics(groups, env), keys, ONE_PROCESS)
    assert means["agent/judge/action/decide"] == 1.0
    assert means["agent/debater/action/concede"] == 1.0
    assert "agent/judge/action/concede" not in means


def test_a_component_the_env_does_not_declare_stops_the_step_naming_both():
    env = SimpleNamespace(name="qa", roles=("asker",), reward_components=("correct",))
    good = _episode("asker", [], {"correct": 1.0})
    stray = _episode("asker", [], {"correct": 1.0, "bonus": 0.5})
    failed = _episode("asker", [], {"ghost": 1.0})
    failed.failed = "judge failed: 500"
    assert undeclared_components(env, [good, stray, failed]) == ["bonus"]
    check_components(env, [Group(Task("t", {}, []), [good, failed])])
    with pytest.raises(
        EnvContractError, match=r"env 'qa' \(lexrl\) reports reward component\(s\) bonus"
    ) as error:
        check_components(env, [Group(Task("t", {}, []), [good, stray])])
    assert "declared: correct" in str(error.value)


def test_a_mixture_checks_each_member_against_its_own_declaration():
    env = make_env(
        MixEnvConfig(
            members=[
                MixMember(env=StatuteEnvConfig(), weight=1.0),
                MixMember(env=GdprEnvConfig(eval_grid=["none"], system="none"), weight=1.0),
            ]
        )
    )
    assert isinstance(env, MixtureEnv)
    tasks = {task.meta["env"]: task for task in env.tasks("test")}
    statute = dict.fromkeys(env.members["statute"].reward_components, 0.0)
    fine = [
        Group(tasks["statute"], [_episode("planner", [], statute)]),
        Group(tasks["gdpr"], [_episode("meta", [], {"correct": 1.0, "format": 0.0})]),
    ]
    check_components(env, fine)
    # `recall` is the statute env's, not gdpr's.
    wrong = [*fine, Group(tasks["gdpr"], [_episode("meta", [], {"recall": 1.0})])]
    with pytest.raises(
        EnvContractError, match=r"env 'gdpr' \(lexrl\) reports reward component.* recall"
    ):
        check_components(env, wrong)
