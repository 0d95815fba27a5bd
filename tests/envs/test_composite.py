"""Every env as a composite (`lexrl.envs.composite`): a single env is a mixture of one, whose
outputs name no member; a mixture's members label theirs."""

import pytest

from lexrl.envs import make_env
from lexrl.envs.base import Env, lead_role, role_actions, step_role, task_at
from lexrl.envs.composite import Composite, composite, members, require_tasks, split_by_member
from lexrl.envs.gdpr.options import GdprEnvConfig
from lexrl.envs.mixture_options import MixEnvConfig, MixMember
from lexrl.envs.statute.env import PLANNER_ACTIONS
from lexrl.envs.statute.options import StatuteEnvConfig
from lexrl.errors import DatasetError
from lexrl.types import Group


def _statute():
    return make_env(StatuteEnvConfig())


def _mixture():
    return make_env(
        MixEnvConfig(
            members=[
                MixMember(env=StatuteEnvConfig(), weight=1.0),
                MixMember(env=GdprEnvConfig(eval_grid=["none"], system="none"), weight=1.0),
            ]
        )
    )


def test_a_single_env_is_a_mixture_of_one_under_its_own_name():
    env = _statute()
    view = composite(env)
    assert type(view) is Composite and not view.labels_members
    assert view.members == {"statute": env} and members(env) == {"statute": env}
    tasks = env.tasks("test")[:3]
    groups = [Group(task, []) for task in tasks]
    (part,) = split_by_member(env, tasks, groups)
    assert (part.name, part.env, part.tasks, part.groups) == ("statute", env, tasks, groups)
    assert {view.member_name(task) for task in tasks} == {"statute"}
    # Its numbers keep their own names, and no member labels them.
    assert view.key("statute", "reward") == "reward" and view.labelled() == []
    # Its training tasks are `task_at` of the position; it keeps no per-env positions.
    for position in (0, 5, 1000):
        task, positions = view.train_task(position, {}, seed=3)
        assert task == task_at(env.tasks("train"), position, 3) and positions == {}


def test_a_mixtures_members_label_their_outputs_and_it_draws_as_the_mixture():
    env = _mixture()
    view = composite(env)
    assert view.labels_members and list(view.members) == ["statute", "gdpr"]
    assert view.members == env.members and view.labelled() == ["statute", "gdpr"]
    assert view.key("gdpr", "reward") == "gdpr/reward"
    tasks = env.tasks("test")
    assert {view.member_name(task) for task in tasks} == {"statute", "gdpr"}
    parts = view.split(tasks, None)
    assert [part.name for part in parts] == ["statute", "gdpr"]
    assert [part.tasks for part in parts] == [part.tasks for part in env.parts(tasks, None)]
    positions: dict[str, int] = {}
    expected: dict[str, int] = {}
    for position in range(20):
        task, positions = view.train_task(position, positions, seed=1)
        other, expected = env.train_task(position, expected, seed=1)
        assert task == other and positions == expected


def test_the_base_env_holds_nothing_of_a_mixtures():
    for name in ("train_task", "member_envs", "member_of", "parts"):
        assert not hasattr(Env, name), name


def test_actions_are_the_lead_roles_unless_a_step_names_its_role():
    env = _statute()
    # The statute env's decisions are its planner's, as its logs have always named them.
    assert lead_role(env) == "planner"
    assert role_actions(env) == {"planner": PLANNER_ACTIONS}
    assert step_role({"action": "exit"}, "planner") == "planner"
    assert step_role({"action": "x", "role": "judge"}, "planner") == "judge"

    class PerRole:
        roles = ("judge", "debater")
        actions = {"debater": ("concede", "argue")}

    assert role_actions(PerRole()) == {"debater": ("concede", "argue")}

    class NoRoles:
        roles = ()
        actions = ("exit",)

    assert role_actions(NoRoles()) == {} and lead_role(NoRoles()) is None


class _NoTasks:
    name = "empty_env"

    def tasks(self, split: str) -> list:
        return [] if split == "train" else ["a task"]


def test_an_env_with_no_tasks_of_a_split_is_one_data_error_naming_it():
    require_tasks(_NoTasks(), "test")
    with pytest.raises(DatasetError, match=r"^env empty_env: no 'train' tasks; check its data"):
        require_tasks(_NoTasks(), "train")
