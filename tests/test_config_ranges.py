"""Every numeric option has a range in `lexrl.config.BOUNDS`, and a value outside it is refused
in one line naming the key, the bound and the value."""

import dataclasses
import re
import types
import typing

import pytest

from lexrl.config import BOUNDS, Config, ConfigError, load_config, validate


def _numeric_fields(cls: type, prefix: str = "") -> set[str]:
    """The int and float fields below `cls`, through nested dataclasses and lists of them
    (`name[]`), found here apart from `lexrl.config.numeric_options`."""
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


def test_every_numeric_option_has_a_bound():
    numeric = _numeric_fields(Config)
    assert {
        "env.mix[].weight",
        "env.statute.eval.ks[]",
        "env.debate.rubric_judges[].timeout_s",
    } <= numeric
    assert sorted(numeric - set(BOUNDS)) == [], "add their ranges to lexrl.config.BOUNDS"
    assert sorted(set(BOUNDS) - numeric) == [], "BOUNDS names options that do not exist"


def _set(config: Config, key: str, value: object) -> None:
    *parents, name = key.split(".")
    target = config
    for parent in parents:
        target = getattr(target, parent)
    setattr(target, name, value)


def _outside(key: str) -> list[float]:
    bound = BOUNDS[key]
    values = [bound.low if bound.low_open else bound.low - 1]
    if bound.high is not None:
        values.append(bound.high if bound.high_open else bound.high + 1)
    return values


SCALARS = [key for key in BOUNDS if "[]" not in key]


@pytest.mark.parametrize("key", SCALARS)
def test_a_value_outside_its_bound_is_refused_naming_key_bound_and_value(key):
    message = rf"^`{re.escape(key)}` must be (None or )?(>=? |in [\[(]).*, not "
    for value in [*_outside(key), float("nan"), float("inf")]:
        config = Config()
        _set(config, key, value)
        with pytest.raises(ConfigError, match=message):
            validate(config)


@pytest.mark.parametrize("key", SCALARS)
def test_the_closed_ends_of_a_bound_are_allowed(key):
    bound = BOUNDS[key]
    for value, open_end in [(bound.low, bound.low_open), (bound.high, bound.high_open)]:
        if value is not None and not open_end:
            config = Config()
            _set(config, key, value)
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
        (["--env.lexam.eval_fraction", "0.7"], "`env.lexam.eval_fraction` must be in (0, 0.5], not 0.7"),
        (["--run.seed", "-1"], "`run.seed` must be in [0, 4294967295], not -1"),
        (
            ["--grpo.num_generations", "1"],
            "`grpo.num_generations` must be >= 2, not 1: GRPO normalises within a group",
        ),
        (["--model.dtype", "fp16"], "`model.dtype` is 'fp16'; expected one of float32, bfloat16, float16"),
    ],
)  # fmt: skip
def test_an_out_of_range_override_is_one_line(overrides, message):
    with pytest.raises(ConfigError) as error:
        load_config(None, overrides)
    assert str(error.value) == message


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("env:\n  statute:\n    eval:\n      ks: [10, 0]\n", "`env.statute.eval.ks[1]` must be >= 1, not 0"),
        (
            "env:\n  lexam:\n    judges:\n      - {base_url: 'http://judge:8000/v1', model: m, timeout_s: 0}\n",
            "`env.lexam.judges[0].timeout_s` must be > 0, not 0.0",
        ),
        (
            "env:\n  debate:\n    rubric_judges:\n      - {base_url: 'http://judge:8000/v1', model: m, concurrency: 0}\n",
            "`env.debate.rubric_judges[0].concurrency` must be >= 1, not 0",
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
