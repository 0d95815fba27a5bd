import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lexrl.config import CHOICES, Config, ConfigError, load_config, option_names, read_yaml
from lexrl.registry import EnvConfig, discover_envs, env_names

CONFIG_DIR = Path(__file__).parents[1] / "configs"
CONFIGS = sorted([*CONFIG_DIR.glob("*.yaml"), *CONFIG_DIR.glob("api/*.yaml")])


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_every_shipped_config_loads(path):
    config = load_config(path)
    assert isinstance(config, Config)
    if path.parent.name == "api":
        # The papers' baselines: a served model evaluated, never trained.
        assert config.rollout.backend == "openai" and config.rollout.base_url


def test_override_sets_nested_field(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("grpo:\n  num_generations: 4\n")
    config = load_config(path, ["--grpo.num_generations", "6", "--env.alpha", "0.3"])
    assert config.grpo.num_generations == 6
    assert config.env.name == "statute"  # the default env, whose option `alpha` is
    assert config.env.alpha == 0.3
    config = load_config(path, ["--env.type", "lexam", "--env.source", "mine.jsonl"])
    assert (config.env.name, config.env.source) == ("lexam", "mine.jsonl")


def test_unknown_key_names_file_and_key(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("grpo:\n  num_gens: 4\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml.*num_gens"):
        load_config(path)


def test_wrong_type_names_the_dotted_key(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("env:\n  type: statute\n  max_iterations: four\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: `env\.max_iterations`"):
        load_config(path)


def test_bad_choice_is_rejected(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("grpo:\n  loss: ppo\n")
    with pytest.raises(ConfigError, match="grpo.loss"):
        load_config(path)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="nope.yaml"):
        load_config(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["--rollout.overlap", "true"], "rollout.overlap. needs .rollout.backend: vllm-server"),
        (["--env.eval.baselines", "[bm25,splade]"], "`env.eval.baselines` has 'splade'"),
        (
            ["--env.eval.final_reranker.model", "qwen-max"],
            "`env.eval.final_reranker.model` is set but `base_url` is empty",
        ),
        (
            ["--env.type", "statute", "--env.retrieval.first_stage", "dense"],
            "`env.retrieval.first_stage` is dense but `dense_model` is empty",
        ),
        (["--grpo.importance_sampling", "sometimes"], "grpo.importance_sampling"),
    ],
)
def test_inconsistent_settings_are_named(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("--grpo.nume_generations", r"^unknown option --grpo\.nume_generations; did you mean --grpo\.num_generations\?$"),
        ("--env.retrieval.bm25_varient=stard", r"did you mean --env\.retrieval\.bm25_variant\?$"),
        ("--zzz", r"^unknown option --zzz \(--help-all lists every key\)$"),
    ],
)  # fmt: skip
def test_a_mistyped_option_is_one_line_with_the_closest_key(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override, "3"])


def test_every_field_is_a_known_option():
    names = option_names()
    assert {"grpo.num_generations", "env.retrieval.dense_model", "run.seed"} <= set(names)
    assert {"env.type", "env.members", "env.source", "env.eval.final_reranker.model"} <= set(names)
    assert load_config(None, [f"--{name}" for name in ["run.seed"]] + ["5"]).run.seed == 5


def test_a_moved_key_names_its_new_place(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text("eval:\n  ks: [10]\n")
    with pytest.raises(ConfigError, match=r"old.yaml: `eval.ks` moved to `env.eval.ks`"):
        load_config(path)
    with pytest.raises(ConfigError, match="moved to --env.eval.final_reranker.model"):
        load_config(None, ["--eval.final_reranker.model", "qwen-max"])


def test_adversarial_debate_needs_role_advantages(tmp_path):
    path = tmp_path / "debate.yaml"
    path.write_text("env:\n  type: debate\n  reward_mode: adversarial\n")
    with pytest.raises(
        ConfigError, match="`env.reward_mode: adversarial` needs `grpo.advantages: role`"
    ):
        load_config(path)
    assert load_config(path, ["--grpo.advantages", "role"]).env.reward_mode == "adversarial"


@pytest.mark.parametrize("command", ["train", "eval", "rollout", "index", "serve"])
def test_help_lists_every_option_with_its_docstring(command):
    result = subprocess.run(
        [sys.executable, "-m", "lexrl.cli", command, "--help-all"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    missing = [name for name in option_names() if f"--{name} " not in result.stdout]
    assert missing == []
    # Docstrings that hold `%`, which argparse would take for a format.
    assert "(processes % G == 0" in result.stdout
    assert "for the 95%" in result.stdout


def test_a_yaml_syntax_error_names_file_and_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("run:\n  seed: 1\ngrpo:\n  loss: [reinforce\n  beta: 0.1\n")
    with pytest.raises(ConfigError, match=r"^\S*bad\.yaml:5: not valid YAML \(expected ',' or ']'"):
        load_config(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # A second `run:` would put run.output_dir back to its default without a word.
        (
            "run:\n  output_dir: x\ngrpo:\n  beta: 0.1\nrun:\n  max_steps: 3\n",
            ":5: .*`run` given twice, on lines 1 and 5",
        ),
        ("run:\n  seed: 1\n  seed: 2\n", ":3: .*`seed` given twice, on lines 2 and 3"),
    ],
)
def test_a_key_given_twice_names_both_lines(tmp_path, text, message):
    path = tmp_path / "twice.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"twice\.yaml{message}: give it once"):
        load_config(path)


def test_yaml_merge_keys_are_not_taken_for_a_key_given_twice(tmp_path):
    path = tmp_path / "merge.yaml"
    path.write_text("base: &base\n  seed: 1\nrun:\n  <<: *base\n  seed: 2\n")
    with pytest.raises(ConfigError, match="base") as refused:  # an unknown section
        load_config(path)
    assert "given twice" not in str(refused.value)


def test_a_config_nested_thousands_deep_is_one_line(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("run: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match=r"deep\.yaml: nested too deeply to be a config$"):
        load_config(path)


def test_a_control_character_names_file_and_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("run:\n  output_dir: a\x07b\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml:2: not valid YAML \(character #x0007"):
        load_config(path)


def test_a_byte_that_is_not_utf8_names_file_line_and_byte(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("run:\n  output_dir: runs/café\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin1\.yaml:2: not UTF-8 \(byte 0xe9 at byte 27\)"):
        load_config(path)


@pytest.mark.parametrize(("text", "kind"), [("- run\n- grpo\n", "list"), ("demo\n", "str")])
def test_a_top_level_that_is_no_mapping_names_the_file(tmp_path, text, kind):
    path = tmp_path / "flat.yaml"
    path.write_text(text)
    with pytest.raises(
        ConfigError, match=rf"flat\.yaml: the top level must be a mapping .* {kind}$"
    ):
        load_config(path)


def test_an_empty_file_is_the_defaults(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing set\n")
    assert load_config(path) == Config()


def test_a_bad_command_line_value_is_one_line():
    with pytest.raises(ConfigError, match=r"^command-line value '\[a' is not valid YAML \("):
        load_config(None, ["--lora.target_modules", "[a"])
    for path in (None, CONFIGS[0]):
        with pytest.raises(ConfigError) as error:
            load_config(path, ["--run.max_steps", "x"])
        # The value is the command line's: no file named.
        assert str(error.value) == "`run.max_steps`: Couldn't parse 'x' into an int"


def test_a_wrongly_shaped_value_is_one_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("lora:\n  target_modules: 5\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: `lora\.target_modules`") as error:
        load_config(path)
    assert "\n" not in str(error.value)


def test_an_unregistered_env_lists_the_registered_ones():
    registered = env_names()
    with pytest.raises(ConfigError) as error:
        load_config(None, ["--env.type", "gpdr"])
    message = str(error.value)
    assert "\n" not in message and "env.type` is 'gpdr'" in message
    assert all(name in message for name in registered), message
    members = "[{env: {type: gdpr}}, {env: {type: lexamm}}]"
    with pytest.raises(ConfigError) as error:
        load_config(None, ["--env.type", "mix", "--env.members", members])
    message = str(error.value)
    assert "\n" not in message and "'lexamm'" in message
    # Named like the file's members (`env.members[1].env.type`), with the registered names.
    assert "`env.members[1].env.type` is 'lexamm'; registered: " in message, message
    assert all(name in message for name in registered), message


def test_the_config_layer_knows_every_registered_env_by_name():
    envs = discover_envs()
    # lexrl's own envs are plugins like any other: found through their entry points.
    assert {"statute", "lexam", "argument", "debate", "gdpr", "mix"} <= set(envs)
    names = set(option_names())
    for name, cls in envs.items():
        assert issubclass(cls, EnvConfig) and cls().name == name
        # Every registered env's options can be set on the command line, below `env`.
        for item in dataclasses.fields(cls):
            key = f"env.{item.name}"
            assert key in names or any(n.startswith(f"{key}.") for n in names), key
        assert (
            load_config(
                None,
                ["--env.type", name]
                if name != "mix"
                else ["--env.type", "mix", "--env.members", "[{env: {type: statute}}]"],
            ).env.name
            == name
        )
    # The core's choices are the core's own: each env carries its own.
    assert not any(key.startswith("env.") for key in CHOICES)
    assert Config().env.name == "statute"


def _old_shape(env: dict) -> dict:
    """An `env` section as it was written before envs became plugins: `name` and a section per
    env (`{name: T, T: {...}}`), a mixture's members under `mix` as `{name: T, weight: W}`."""
    env = dict(env)
    name = env.pop("type", "statute")
    old: dict = {"name": name}
    if name != "mix":
        if env:
            old[name] = env
        return old
    members = []
    for member in env.pop("members"):
        member = dict(member)
        options = dict(member.pop("env"))
        member_name = options.pop("type", "statute")
        members.append({"name": member_name, **member})
        if options:
            old[member_name] = options
    return {**old, "mix": members, **env}


WITH_ENV = [path for path in CONFIGS if "env" in read_yaml(path)]


def test_the_old_shape_conversion_covers_single_envs_and_mixtures():
    assert len(WITH_ENV) >= 20
    assert _old_shape({"type": "lexam", "source": "x"}) == {
        "name": "lexam",
        "lexam": {"source": "x"},
    }
    mix = {
        "type": "mix",
        "members": [{"env": {"type": "gdpr", "system": "none"}, "weight": 2, "warmstart_share": 1}],
        "mix_weighting": "given",
    }
    assert _old_shape(mix) == {
        "name": "mix",
        "mix": [{"name": "gdpr", "weight": 2, "warmstart_share": 1}],
        "gdpr": {"system": "none"},
        "mix_weighting": "given",
    }


@pytest.mark.parametrize("path", WITH_ENV, ids=[p.name for p in WITH_ENV])
def test_a_shipped_config_in_the_old_env_shape_is_refused_as_moved(path, tmp_path):
    data = read_yaml(path)
    data["env"] = _old_shape(data["env"])
    old = tmp_path / path.name
    old.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ConfigError) as error:
        load_config(old)
    message = str(error.value)
    assert "\n" not in message and "moved" in message, message
    assert message.startswith(f"{old}: `env."), message


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["--env.name", "lexam"], "option --env.name moved to --env.type"),
        (["--env.statute.alpha", "0.3"], "option --env.statute.alpha moved to --env.alpha"),
        (["--env.lexam.source", "x.jsonl"], "option --env.lexam.source moved to --env.source"),
        (["--env.mix", "[{name: gdpr}]"], "option --env.mix moved to --env.members"),
    ],
)
def test_an_old_env_key_on_the_command_line_is_one_line_naming_its_new_place(overrides, message):
    with pytest.raises(ConfigError) as error:
        load_config(None, overrides)
    assert "\n" not in str(error.value) and str(error.value).startswith(message), error.value
