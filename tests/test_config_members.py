"""A mixture member's env spec, from the file or from `--env.members`, gets the one-line errors a
single env's does: a moved option named by its new key, an env named by `name` instead of
`type`; and a member's option on the command line is answered with a spelling that is taken."""

from __future__ import annotations

import pytest

from lexrl.config import ConfigError, load_config

MIXTURE = "env:\n  type: mix\n  members:\n    - env: {type: gdpr}\n    - env: {type: argument}\n"


@pytest.fixture()
def mixture(tmp_path):
    path = tmp_path / "mix.yaml"
    path.write_text(MIXTURE)
    return path


def test_a_moved_option_in_a_command_line_member_names_its_new_key(mixture):
    members = "[{env: {type: gdpr}}, {env: {type: argument, factor_layout: by_factor}}]"
    with pytest.raises(ConfigError) as error:
        load_config(mixture, ["--env.members", members])
    assert str(error.value) == (
        "--env.members: `env.members[1].env.factor_layout` moved to "
        "`env.members[1].env.ablation.factor_layout`"
    )


def test_a_moved_option_in_a_file_member_names_its_new_key(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text(MIXTURE.replace("{type: argument}", "{type: argument, factor_layout: x}"))
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(error.value) == (
        f"{path}: `env.members[1].env.factor_layout` moved to "
        "`env.members[1].env.ablation.factor_layout`"
    )


def test_a_member_named_by_name_is_refused_saying_type(tmp_path, mixture):
    path = tmp_path / "named.yaml"
    path.write_text(MIXTURE.replace("{type: argument}", "{name: lexam}"))
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(error.value) == (
        f"{path}: `env.members[1].env.name` is no option: name the env with `type: lexam` "
        "(without a `type`, `env.members[1].env` is the default env, statute)"
    )
    with pytest.raises(ConfigError, match=r"^--env.members: `env.members\[0\].env.name` .*"):
        load_config(mixture, ["--env.members", "[{env: {name: lexam}}, {env: {type: gdpr}}]"])


def test_a_single_env_named_by_name_is_refused_saying_type(tmp_path):
    path = tmp_path / "named.yaml"
    path.write_text("env:\n  name: lexam\n")
    with pytest.raises(ConfigError, match=r"`env.name` moved to `env.type`$"):
        load_config(path)


@pytest.mark.parametrize(
    "key",
    [
        "env.members.0.env.typo",
        "env.members.0.env.dataset",
        "env.members.1.env.factor_layout",
        "env.members[0].weight",
        "env.members.1.weight",
    ],
)
def test_a_members_option_on_the_command_line_gets_a_spelling_that_is_taken(mixture, key):
    with pytest.raises(ConfigError) as error:
        load_config(mixture, [f"--{key}", "2"])
    message = str(error.value)
    assert message.startswith(
        f"option --{key}: a mixture member's options cannot be set one by one"
    )
    assert "did you mean" not in message and "moved to" not in message
    # The spelling it offers is taken.
    members = "[{env: {type: gdpr, max_subtasks: 3}, weight: 2}, {env: {type: argument}}]"
    config = load_config(mixture, ["--env.members", members])
    assert config.env.member_names() == ["gdpr", "argument"]
    assert (config.env.members[0].weight, config.env.members[0].env.max_subtasks) == (2, 3)


def test_a_mistyped_members_key_still_gets_its_closest_key(mixture):
    with pytest.raises(
        ConfigError, match=r"^unknown option --env.member; did you mean --env.members\?$"
    ):
        load_config(mixture, ["--env.member", "[]"])
