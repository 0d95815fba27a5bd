"""The task mixture (`env.type: mix`): its probabilities, the draw of training tasks and its
resumption, members that only ever see their own tasks, and the per-env split of an
evaluation."""

import asyncio
import random
from collections import Counter

import pytest
from transformers import AutoTokenizer

from lexrl.config import ConfigError, load_config
from lexrl.envs import make_env
from lexrl.envs.argument.options import ArgumentEnvConfig
from lexrl.envs.gdpr.env import balanced_credit
from lexrl.envs.gdpr.options import GdprEnvConfig
from lexrl.envs.mixture import MixtureEnv, mixture_probabilities
from lexrl.envs.mixture_options import MixEnvConfig, MixMember
from lexrl.envs.statute.options import StatuteEnvConfig
from lexrl.policy import ScriptedPolicy
from lexrl.registry import env_names
from lexrl.types import Group


def _config(weighting="given", temperature=1.0, weights=(3.0, 1.0, 1.0)):
    return MixEnvConfig(
        members=[
            MixMember(env=StatuteEnvConfig(), weight=weights[0]),
            MixMember(env=GdprEnvConfig(eval_grid=["none"], system="none"), weight=weights[1]),
            MixMember(env=ArgumentEnvConfig(test_per_kind=2), weight=weights[2]),
        ],
        mix_weighting=weighting,
        mix_temperature=temperature,
    )


@pytest.fixture(scope="module")
def env() -> MixtureEnv:
    return make_env(_config())


def test_probabilities_follow_the_weights_and_the_temperature():
    assert mixture_probabilities({"a": 3, "b": 1}, 1.0) == pytest.approx({"a": 0.75, "b": 0.25})
    # T = 2: sqrt(3) : 1.
    p = mixture_probabilities({"a": 3, "b": 1}, 2.0)
    assert p["a"] == pytest.approx(3**0.5 / (3**0.5 + 1))
    assert mixture_probabilities({"a": 100, "b": 1}, 1e6)["a"] == pytest.approx(0.5, abs=1e-4)
    for bad in ({"a": 0.0}, {}):
        with pytest.raises(ValueError):
            mixture_probabilities(bad, 1.0)
    with pytest.raises(ValueError):
        mixture_probabilities({"a": 1.0}, 0.0)


def test_size_weighting_uses_each_envs_training_tasks():
    env = make_env(_config("size", temperature=1.0))
    sizes = {name: len(member.tasks("train")) for name, member in env.members.items()}
    total = sum(sizes.values())
    assert env.probabilities == pytest.approx({n: s / total for n, s in sizes.items()})


def test_tasks_are_the_members_tasks_under_their_env(env):
    for split in ("train", "test"):
        tasks = env.tasks(split)
        by_member = env.member_tasks(split)
        assert len(tasks) == sum(len(m.tasks(split)) for m in env.members.values())
        assert len({t.id for t in tasks}) == len(tasks)
        for name, member in env.members.items():
            assert [t.id for t in by_member[name]] == [
                f"{name}:{t.id}" for t in member.tasks(split)
            ]
            assert all(env.member_of(t) == name for t in by_member[name])


def test_draws_follow_the_probabilities_and_count_each_envs_position(env):
    positions: dict[str, int] = {}
    drawn = Counter()
    for position in range(3000):
        task, positions = env.train_task(position, positions, seed=0)
        drawn[env.member_of(task)] += 1
    assert positions == dict(drawn)
    for name, p in env.probabilities.items():
        assert drawn[name] / 3000 == pytest.approx(p, abs=0.03)
    # Each env's tasks come in its own seeded order: an epoch visits each of them once.
    statute = [t.id for t in env.member_tasks("train")["statute"]]
    positions = {}
    seen = []
    position = 0
    while positions.get("statute", 0) < len(statute):
        task, positions = env.train_task(position, positions, seed=0)
        if env.member_of(task) == "statute":
            seen.append(task.id)
        position += 1
    assert sorted(seen) == sorted(statute)


def test_a_resumed_draw_goes_on_where_each_env_stopped(env):
    def run(start, stop, positions):
        tasks = []
        for position in range(start, stop):
            task, positions = env.train_task(position, positions, seed=3)
            tasks.append(task.id)
        return tasks, positions

    straight, end = run(0, 40, {})
    first, middle = run(0, 17, {})
    rest, resumed_end = run(17, 40, dict(middle))
    assert first + rest == straight and resumed_end == end
    # Another seed draws another sequence.
    other, positions = [], {}
    for position in range(40):
        task, positions = env.train_task(position, positions, seed=4)
        other.append(task.id)
    assert other != straight


def test_a_member_plays_its_own_unchanged_task(env, tiny_model_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    task = env.member_tasks("test")["gdpr"][0]

    def teacher(role, messages):
        return '{"rationale": "r", "answer": "Yes"}'

    trajectory = asyncio.run(env.run_episode(task, ScriptedPolicy(tokenizer, task.id, teacher)))
    assert trajectory.task_id == task.id
    original = env.members["gdpr"].tasks("test")[0]
    assert original.id == task.id.removeprefix("gdpr:") and "env" not in original.meta
    assert trajectory.metrics["parsed"] == 1.0
    gdpr = env.members["gdpr"]
    expected = balanced_credit("Yes", original.gold, original.inputs["kind"], gdpr.label_weights)
    assert trajectory.reward == pytest.approx(expected)  # the answer parses: no format cost


def test_parts_give_each_member_its_tasks_and_groups_with_original_ids(env):
    tasks = env.tasks("test")
    rng = random.Random(0)
    picked = rng.sample(tasks, 12)
    groups = [Group(t, []) for t in picked]
    parts = env.parts(picked, groups)
    assert sum(len(p.tasks) for p in parts) == 12
    for part in parts:
        assert part.env is env.members[part.name]
        member_ids = {t.id for t in part.env.tasks("test")}
        assert {t.id for t in part.tasks} <= member_ids
        assert [g.task.id for g in part.groups] == [t.id for t in part.tasks]


def test_warm_start_covers_the_members_with_a_teacher_in_turn(env):
    names = ("statute", "gdpr", "argument")
    tasks = env.warmstart_tasks()
    assert [env.member_of(t) for t in tasks[:6]] == list(names) * 2
    longest = max(len(env.members[n].warmstart_tasks()) for n in names)
    assert len(tasks) == 3 * longest
    for name in names:
        mine = {t.id for t in tasks if env.member_of(t) == name}
        assert mine == {f"{name}:{t.id}" for t in env.members[name].warmstart_tasks()}


def test_a_warm_start_share_gives_a_member_that_many_tasks_a_round():
    config = _config()
    config.members[2].warmstart_share = 3  # argument
    env = make_env(config)
    tasks = env.warmstart_tasks()
    assert [env.member_of(t) for t in tasks[:10]] == ["statute", "gdpr", *["argument"] * 3] * 2
    counts = Counter(env.member_of(t) for t in tasks[: 5 * 40])
    assert counts == {"statute": 40, "gdpr": 40, "argument": 120}
    argument = [t.id for t in tasks if env.member_of(t) == "argument"]
    assert set(argument) == {f"argument:{t.id}" for t in env.members["argument"].warmstart_tasks()}


def test_a_member_whose_teacher_has_no_tasks_is_left_to_grpo():
    config = _config()
    config.members[1].env.system = "live"  # the live form's decomposition has no scripted teacher
    env = make_env(config)
    assert env.members["gdpr"].warmstart_tasks() == []
    tasks = env.warmstart_tasks()
    assert [env.member_of(t) for t in tasks[:4]] == ["statute", "argument"] * 2


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("env:\n  type: mix\n", "needs `env.members`"),
        (
            "env:\n  type: mix\n  members: [{env: {type: gdpr}}, {env: {type: gdpr}}]\n",
            "`env.members[1]`: 'gdpr' is listed twice",
        ),
        (
            "env:\n  type: mix\n  members: [{env: {type: gdpr}, weight: 0}]\n",
            "`env.members[0].weight`",
        ),
        (
            "env:\n  type: mix\n  members: [{env: {type: gdpr}, warmstart_share: 0}]\n",
            "`env.members[0].warmstart_share`",
        ),
        (
            "env:\n  type: mix\n  members:\n    - {env: {type: gdpr}}\n"
            "    - {env: {type: mix, members: [{env: {type: argument}}]}}\n",
            "`env.members[1]` is a mixture",
        ),
        ("env:\n  type: gdpr\n  members: [{env: {type: gdpr}}]\n", "`members` are not valid"),
        (
            "env:\n  type: mix\n  members: [{env: {type: gdpr}}]\n  mix_temperature: 0\n",
            "`env.mix_temperature`",
        ),
        (
            "env:\n  type: mix\n  members: [{env: {type: gdpr}}]\n  mix_weighting: odd\n",
            "`env.mix_weighting`",
        ),
        (
            "env:\n  type: mix\n  members: [{env: {type: debate, reward_mode: adversarial}}]\n",
            "`env.members[0].env.reward_mode: adversarial` needs `grpo.advantages: role`",
        ),
    ],
)
def test_bad_mixtures_are_refused_naming_the_key(tmp_path, yaml_text, message):
    path = tmp_path / "mix.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_config(path)


def test_an_unregistered_member_is_named(tmp_path):
    path = tmp_path / "mix.yaml"
    path.write_text(
        "env:\n  type: mix\n  members:\n    - {env: {type: statute}}\n"
        "    - {env: {type: gdpr}}\n    - {env: {type: argument}}\n    - {env: {type: nope}}\n"
    )
    with pytest.raises(
        ConfigError, match=r"`env.members\[3\].env.type` is 'nope'; registered: "
    ) as error:
        load_config(path)
    assert all(name in str(error.value) for name in env_names())


def test_a_mixture_config_loads(tmp_path):
    path = tmp_path / "mix.yaml"
    path.write_text(
        "env:\n  type: mix\n  members: [{env: {type: gdpr}, weight: 2}, {env: {type: argument}}]\n"
    )
    config = load_config(path)
    assert [(m.env.name, m.weight) for m in config.env.members] == [
        ("gdpr", 2.0),
        ("argument", 1.0),
    ]
    assert config.env.member_names() == ["gdpr", "argument"]
