import subprocess
import sys
from pathlib import Path

import pytest

from lexrl.config import Config, ConfigError, load_config, option_names

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
    config = load_config(path, ["--grpo.num_generations", "6", "--env.statute.alpha", "0.3"])
    assert config.grpo.num_generations == 6
    assert config.env.statute.alpha == 0.3


def test_unknown_key_names_file_and_key(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("grpo:\n  num_gens: 4\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml.*num_gens"):
        load_config(path)


def test_wrong_type_names_the_dotted_key(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("env:\n  statute:\n    max_iterations: four\n")
    with pytest.raises(ConfigError, match=r"env\.statute\.max_iterations"):
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
        (
            ["--env.statute.eval.baselines", "[bm25,splade]"],
            "env.statute.eval.baselines. has 'splade'",
        ),
        (["--env.statute.eval.final_reranker.model", "qwen-max"], "base_url. is empty"),
        (["--env.statute.retrieval.first_stage", "dense"], "dense_model. is empty"),
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
        ("--env.statute.retrieval.bm25_varient=stard", r"did you mean --env\.statute\.retrieval\.bm25_variant\?$"),
        ("--zzz", r"^unknown option --zzz \(--help-all lists every key\)$"),
    ],
)  # fmt: skip
def test_a_mistyped_option_is_one_line_with_the_closest_key(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override, "3"])


def test_every_field_is_a_known_option():
    names = option_names()
    assert {"grpo.num_generations", "env.statute.retrieval.dense_model", "run.seed"} <= set(names)
    assert load_config(None, [f"--{name}" for name in ["run.seed"]] + ["5"]).run.seed == 5


def test_a_moved_key_names_its_new_place(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text("eval:\n  ks: [10]\n")
    with pytest.raises(ConfigError, match=r"old.yaml: `eval.ks` moved to `env.statute.eval.ks`"):
        load_config(path)
    with pytest.raises(ConfigError, match="--env.statute.eval.final_reranker.model"):
        load_config(None, ["--eval.final_reranker.model", "qwen-max"])


def test_adversarial_debate_needs_role_advantages(tmp_path):
    path = tmp_path / "debate.yaml"
    path.write_text("env:\n  name: debate\n  debate:\n    reward_mode: adversarial\n")
    with pytest.raises(ConfigError, match="grpo.advantages: role"):
        load_config(path)
    assert load_config(path, ["--grpo.advantages", "role"]).env.debate.reward_mode == "adversarial"


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
    registered = "statute, lexam, argument, debate, gdpr"
    with pytest.raises(ConfigError) as error:
        load_config(None, ["--env.name", "gpdr"])
    assert str(error.value) == f"`env.name` is 'gpdr'; registered: {registered}, or `mix`"
    with pytest.raises(ConfigError) as error:
        load_config(None, ["--env.name", "mix", "--env.mix", "[{name: gdpr}, {name: lexamm}]"])
    assert str(error.value) == f"`env.mix[1].name` is 'lexamm'; registered: {registered}"


def test_the_config_layer_knows_every_registered_env_by_name():
    from lexrl.config import ENV_NAMES
    from lexrl.envs import REGISTRY

    assert tuple(REGISTRY) == ENV_NAMES
