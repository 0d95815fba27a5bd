"""Every numeric option has a range: the core sections' in `lexrl.config.BOUNDS`, each registered
env's in its own options class (`BOUNDS` on it and on the dataclasses nested in it), and a value
outside it is refused in one line naming the key, the bound and the value."""

import dataclasses
import re
import types
import typing

import pytest

from lexrl.config import BOUNDS, Config, ConfigError, load_config, validate
from lexrl.envs.mixture_options import MixMember
from lexrl.envs.statute.options import StatuteEnvConfig
from lexrl.options import Bound, class_rules, declared_bounds, numeric_options
from lexrl.registry import discover_envs


def _numeric_fields(cls: type, prefix: str = "") -> set[str]:
    """The int and float fields below `cls`, through nested dataclasses and lists of them
    (`name[]`), found here apart from `lexrl.options.numeric_options`."""
    found = set()
    hints = typing.get_type_hints(cls)
    for item in dataclasses.fields(cls):
        hint, key = hints[item.name], f"{prefix}{item.name}"
        while typing.get_origin(hint) in (list, types.UnionType, typing.Union):
            if typing.get_origin(hint) is list:
                key += "[]"
            hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
        if dataclasses.is_dataclass(hint):
            found |= _numeric_fields(hint, f"{key}.")
        elif hint in (int, float):
            found.add(key)
    return found


ENVS = discover_envs()


def test_every_core_numeric_option_has_a_bound():
    numeric = _numeric_fields(Config)
    assert {"grpo.num_generations", "rollout.vllm_gpu_memory_utilization", "run.seed"} <= numeric
    # The env's options are its own options class's (below), not the core's.
    assert not any(key.startswith("env.") for key in numeric | set(BOUNDS))
    assert sorted(numeric - set(BOUNDS)) == [], "add their ranges to lexrl.config.BOUNDS"
    assert sorted(set(BOUNDS) - numeric) == [], "BOUNDS names options that do not exist"


def test_the_registry_holds_every_shipped_env():
    assert {"statute", "lexam", "argument", "debate", "gdpr", "mix"} <= set(ENVS)


@pytest.mark.parametrize("name", ENVS)
def test_every_numeric_option_of_each_env_has_a_bound(name):
    cls = ENVS[name]
    numeric = _numeric_fields(cls)
    assert numeric == set(numeric_options(cls))
    expected = {
        "mix": {"members[].weight", "members[].warmstart_share", "mix_temperature"},
        "statute": {"eval.ks[]", "retrieval.batch_size", "eval.final_reranker.top_k"},
        "debate": {"rubric_judges[].timeout_s"},
        "lexam": {"judges[].timeout_s", "eval_fraction"},
    }.get(name, set())
    assert expected <= numeric
    covered = declared_bounds(cls)
    assert sorted(numeric - covered) == [], f"add their ranges to {cls.__name__}'s BOUNDS"
    assert sorted(covered - numeric) == [], (
        f"{cls.__name__}'s BOUNDS name options that do not exist"
    )


def _bound(cls: type, key: str) -> Bound:
    """The bound a dotted key (`retrieval.batch_size`) of the options class `cls` has, from the
    `BOUNDS` of the dataclass that holds the field."""
    head, _, rest = key.partition(".")
    if rest and head in {item.name for item in dataclasses.fields(cls)}:
        hint = typing.get_type_hints(cls)[head]
        if dataclasses.is_dataclass(hint) and rest not in class_rules(cls, "BOUNDS"):
            return _bound(hint, rest)
    return class_rules(cls, "BOUNDS")[key]


def _set(target: object, key: str, value: object) -> None:
    *parents, name = key.split(".")
    for parent in parents:
        target = getattr(target, parent)
    setattr(target, name, value)


def _outside(bound: Bound) -> list[float]:
    values = [bound.low if bound.low_open else bound.low - 1]
    if bound.high is not None:
        values.append(bound.high if bound.high_open else bound.high + 1)
    return [*values, float("nan"), float("inf")]


def _message(key: str) -> str:
    return rf"^`{re.escape(key)}` must be (None or )?(>=? |in [\[(]).*, not "


# Each option whose value is no list element, as (where it is set, its bound): `Config` for a
# core key, else the name of the env whose options class holds it (beside `env.type: NAME`).
SCALARS = [pytest.param(None, key, BOUNDS[key], id=key) for key in BOUNDS if "[]" not in key] + [
    pytest.param(name, key, _bound(cls, key), id=f"env.type={name}:env.{key}")
    for name, cls in ENVS.items()
    for key in sorted(declared_bounds(cls))
    if "[]" not in key
]


def _config(env: str | None, key: str, value: object) -> tuple[Config, str]:
    config = Config()
    if env is None:
        _set(config, key, value)
        return config, key
    config.env = ENVS[env]()
    if env == "mix":  # a mixture needs a member to be valid at all
        config.env.members = [MixMember(env=StatuteEnvConfig())]
    _set(config.env, key, value)
    return config, f"env.{key}"


@pytest.mark.parametrize(("env", "key", "bound"), SCALARS)
def test_a_value_outside_its_bound_is_refused_naming_key_bound_and_value(env, key, bound):
    for value in _outside(bound):
        config, path = _config(env, key, value)
        with pytest.raises(ConfigError, match=_message(path)) as error:
            validate(config)
        assert "\n" not in str(error.value)


@pytest.mark.parametrize(("env", "key", "bound"), SCALARS)
def test_the_closed_ends_of_a_bound_are_allowed(env, key, bound):
    for value, open_end in [(bound.low, bound.low_open), (bound.high, bound.high_open)]:
        if value is not None and not open_end:
            config, _ = _config(env, key, value)
            validate(config)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["--run.max_steps", "-5"], "`run.max_steps` must be >= 1, not -5"),
        (["--run.save_every", "0"], "`run.save_every` must be >= 1, not 0"),
        (["--eval.max_tasks", "0"], "`eval.max_tasks` must be None or >= 1, not 0"),
        (["--run.max_steps", "null"], "`run.max_steps` must be >= 1, not None"),
        (["--grpo.learning_rate", "0"], "`grpo.learning_rate` must be > 0, not 0.0"),
        (
            ["--rollout.vllm_gpu_memory_utilization", "1.5"],
            "`rollout.vllm_gpu_memory_utilization` must be None or in (0, 1], not 1.5",
        ),
        (["--env.type", "lexam", "--env.eval_fraction", "0.7"], "`env.eval_fraction` must be in (0, 0.5], not 0.7"),
        (["--env.alpha", "-1"], "`env.alpha` must be >= 0, not -1.0"),
        (["--env.type", "statute", "--env.retrieval.batch_size", "0"], "`env.retrieval.batch_size` must be >= 1, not 0"),
        (["--env.type", "statute", "--env.reward_recall_k", "0"], "`env.reward_recall_k` must be None or >= 1, not 0"),
        (["--run.seed", "-1"], "`run.seed` must be in [0, 4294967295], not -1"),
        (
            ["--grpo.num_generations", "1"],
            "`grpo.num_generations` must be >= 2, not 1: GRPO normalises within a group",
        ),
        (["--model.dtype", "fp16"], "`model.dtype` is 'fp16'; expected one of float32, bfloat16, float16"),
        (["--env.language", "fr"], "`env.language` is 'fr'; expected one of en, zh"),
    ],
)  # fmt: skip
def test_an_out_of_range_override_is_one_line(overrides, message):
    with pytest.raises(ConfigError) as error:
        load_config(None, overrides)
    assert str(error.value) == message


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("env:\n  type: statute\n  eval:\n    ks: [10, 0]\n", "`env.eval.ks[1]` must be >= 1, not 0"),
        (
            "env:\n  type: lexam\n  judges:\n    - {base_url: 'http://judge:8000/v1', model: m, timeout_s: 0}\n",
            "`env.judges[0].timeout_s` must be > 0, not 0.0",
        ),
        (
            "env:\n  type: debate\n  rubric_judges:\n    - {base_url: 'http://judge:8000/v1', model: m, concurrency: 0}\n",
            "`env.rubric_judges[0].concurrency` must be >= 1, not 0",
        ),
        (
            "env:\n  type: mix\n  members:\n    - {env: {type: gdpr}}\n    - {env: {type: statute}, weight: -1}\n",
            "`env.members[1].weight` must be > 0, not -1.0",
        ),
        (
            "env:\n  type: mix\n  members:\n    - {env: {type: gdpr}}\n    - {env: {type: statute, eval: {ks: [10, 0]}}}\n",
            "`env.members[1].env.eval.ks[1]` must be >= 1, not 0",
        ),
    ],
)  # fmt: skip
def test_an_element_of_a_list_is_named_by_its_index(tmp_path, yaml_text, message):
    path = tmp_path / "c.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(error.value) == message


def test_dapo_clips_higher_above_than_below():
    overrides = ["--grpo.epsilon", "0.3", "--grpo.epsilon_high", "0.2"]
    with pytest.raises(ConfigError, match=r"`grpo.epsilon_high` must be >= `grpo.epsilon` \(0.3\)"):
        load_config(None, [*overrides, "--grpo.loss", "dapo"])
    assert load_config(None, [*overrides, "--grpo.loss", "grpo"]).grpo.epsilon_high == 0.2
