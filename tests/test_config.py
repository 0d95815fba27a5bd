from pathlib import Path

import pytest

from lexrl.config import Config, ConfigError, load_config, option_names

CONFIGS = sorted((Path(__file__).parents[1] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_every_shipped_config_loads(path):
    assert isinstance(load_config(path), Config)


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
        ("--zzz", r"^unknown option --zzz \(--help lists the keys\)$"),
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
