"""The option types envs share (`lexrl.env_options`), and the argument env's experiment switches
gathered under `env.ablation`."""

from __future__ import annotations

import typing
from dataclasses import dataclass, fields, is_dataclass

import pytest
from draccus.wrappers import docstring

from lexrl.config import load_config, read_yaml
from lexrl.env_options import (
    ChatEndpoint,
    HeldOutSplit,
    JudgeEnsemble,
    TurnSampling,
    declaring_class,
    with_defaults,
)
from lexrl.envs.argument.options import ArgumentEnvConfig
from lexrl.envs.debate.options import DebateEnvConfig
from lexrl.envs.gdpr.options import GdprEnvConfig
from lexrl.envs.statute.options import FinalRerankerConfig
from lexrl.errors import ConfigError
from lexrl.help import field_docstrings
from lexrl.options import AT_LEAST_1, Bound, class_rules
from lexrl.registry import discover_envs
from lexrl.rewards.judge_config import JudgeConfig
from tests.env_options import load_env


def _option_classes(cls: type, seen: set[type]) -> None:
    seen.add(cls)
    hints = typing.get_type_hints(cls)
    for item in fields(cls):
        hint = hints[item.name]
        if typing.get_origin(hint) is list:
            hint = typing.get_args(hint)[0]
        if is_dataclass(hint) and hint not in seen:
            _option_classes(hint, seen)


def test_every_env_option_has_a_docstring_where_it_is_declared():
    classes: set[type] = set()
    for cls in discover_envs().values():
        _option_classes(cls, classes)
    missing = [
        f"{cls.__name__}.{item.name}"
        for cls in classes
        for item in fields(cls)
        if not field_docstrings(declaring_class(cls, item.name)).get(item.name)
    ]
    assert missing == []


def test_draccus_help_reads_a_shared_options_docstring_from_its_declaring_class():
    # draccus itself looks only along a class's first base (`EnvConfig` for an env's options).
    for cls, name, start in [
        (DebateEnvConfig, "judge_aggregate", "How several judges' scores"),
        (GdprEnvConfig, "split_seed", "Seed of that split"),
        (FinalRerankerConfig, "timeout_s", "Per-request timeout"),
        (FinalRerankerConfig, "model", "Chat model of the zero-shot listwise reranker"),
        (JudgeConfig, "base_url", "OpenAI-compatible base URL"),
    ]:
        assert docstring.get_attribute_docstring(cls, name).docstring_below.startswith(start)


def test_with_defaults_keeps_the_field_its_place_and_its_docstring():
    @dataclass
    @with_defaults(timeout_s=5.0)
    class Slow(ChatEndpoint):
        extra: int = 1
        """An option of its own."""

    assert [item.name for item in fields(Slow)][:5] == [item.name for item in fields(ChatEndpoint)][
        :5
    ]
    assert Slow("http://x/v1", "m").timeout_s == 5.0 and ChatEndpoint("u", "m").timeout_s == 60.0
    assert (
        docstring.get_attribute_docstring(Slow, "timeout_s").docstring_below
        == "Per-request timeout."
    )
    with pytest.raises(TypeError, match="no inherited field"):
        with_defaults(nothing=1)(type("Bare", (ChatEndpoint,), {}))


def test_rules_merge_along_the_classes_a_class_derives_from():
    @dataclass
    class Narrow(HeldOutSplit):
        BOUNDS = {"eval_fraction": Bound(0, 0.2)}

    assert class_rules(Narrow, "BOUNDS") == {
        "eval_fraction": Bound(0, 0.2),
        "split_seed": Bound(0, 2**32 - 1),
    }
    assert class_rules(TurnSampling, "BOUNDS") == {
        "max_new_tokens": AT_LEAST_1,
        "temperature": Bound(0),
    }
    assert class_rules(JudgeEnsemble, "CHOICES") == {"judge_aggregate": ("min", "mean")}


def test_the_endpoints_keep_their_defaults():
    judge = JudgeConfig("http://judge/v1", "m")
    assert (judge.api_key_env, judge.max_tokens, judge.timeout_s, judge.max_retries) == (
        "",
        512,
        60.0,
        3,
    )
    assert (judge.concurrency, judge.temperature, judge.max_parse_retries) == (8, 0.0, 2)
    reranker = FinalRerankerConfig()
    assert (reranker.model, reranker.base_url, reranker.api_key_env) == ("", "", "OPENAI_API_KEY")
    assert (reranker.max_tokens, reranker.timeout_s, reranker.max_retries) == (256, 120.0, 2)
    assert (reranker.top_k, reranker.max_candidates, reranker.max_chars) == (10, 30, 300)


@pytest.mark.parametrize(
    ("env", "options", "message"),
    [
        ("lexam", {"eval_fraction": 0.7}, r"`env.eval_fraction` must be in \(0, 0.5\]"),
        ("debate", {"split_seed": -1}, "`env.split_seed` must be in"),
        ("lexam", {"judge_aggregate": "median"}, "`env.judge_aggregate` is 'median'"),
        ("argument", {"temperature": -1}, "`env.temperature` must be >= 0"),
        ("gdpr", {"max_new_tokens": 0}, "`env.max_new_tokens` must be None or >= 1"),
        ("statute", {"eval.final_reranker.timeout_s": 0}, "`env.eval.final_reranker.timeout_s`"),
        (
            "lexam",
            {"judges": [{"base_url": "http://j/v1", "model": "m", "concurrency": 0}]},
            "concurrency",
        ),
    ],
)
def test_a_shared_options_range_is_checked_in_every_env(env, options, message):
    with pytest.raises(ConfigError, match=message):
        load_env(env, **options)


def test_each_env_keeps_its_own_defaults_of_a_shared_option():
    assert load_env("gdpr", eval_fraction=0.7).env.eval_fraction == 0.7  # gdpr allows below 0.95
    assert load_env("debate").env.judge_aggregate == "mean"
    assert load_env("lexam").env.judge_aggregate == "min"


def test_the_argument_demo_reads_its_switches_where_the_env_reads_them():
    env = load_config("configs/argument_cpu.yaml").env
    assert (env.factor_names, env.factor_layout) == (False, "by_factor")
    for old, new in ArgumentEnvConfig.MOVED.items():
        assert getattr(env, old) == getattr(env.ablation, new.removeprefix("ablation."))
    options = env.objective_options()
    assert options["ablation.factor_layout"] == "by_factor" and "factor_layout" not in options


@pytest.mark.parametrize("key", sorted(ArgumentEnvConfig.MOVED))
def test_an_argument_switch_at_its_old_key_is_one_line_naming_the_new_one(key, tmp_path):
    path = tmp_path / "old.yaml"
    data = read_yaml("configs/argument_cpu.yaml")
    data["env"].pop("ablation")
    value = {"factor_names": False, "warmstart_kinds": ["arguable"]}.get(key, "x")
    path.write_text(f"env:\n  type: argument\n  {key}: {value!r}\n".replace("'", ""))
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(error.value) == f"{path}: `env.{key}` moved to `env.ablation.{key}`"
    with pytest.raises(ConfigError) as error:
        load_config(None, ["--env.type", "argument", f"--env.{key}", "x"])
    assert str(error.value) == f"option --env.{key} moved to --env.ablation.{key}"


def test_a_mixture_members_old_switch_is_named_by_its_path(tmp_path):
    path = tmp_path / "mix.yaml"
    path.write_text(
        "env:\n  type: mix\n  members:\n    - env: {type: gdpr}\n"
        "    - env: {type: argument, factor_layout: by_factor}\n"
    )
    with pytest.raises(
        ConfigError,
        match=r"`env.members\[1\].env.factor_layout` moved to "
        r"`env.members\[1\].env.ablation.factor_layout`",
    ):
        load_config(path)


def test_a_moved_switch_is_no_move_for_an_env_that_never_had_it(tmp_path):
    path = tmp_path / "lexam.yaml"
    path.write_text("env:\n  type: lexam\n  factor_layout: by_factor\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert "moved to" not in str(error.value)
