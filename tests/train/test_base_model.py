"""The base model a config names: a command that plays the tiny base (`lexrl eval`, `rollout`,
`serve`) says in one line that it builds the warm-start first, and how to skip it, only when that
warm-start is not cached yet."""

import contextlib
from pathlib import Path
from types import SimpleNamespace

from lexrl.config import load_config
from lexrl.train.base_model import resolve_base, warmstart_notice

ONE_PROCESS = SimpleNamespace(main_process_first=contextlib.nullcontext)
NOTICE = "the tiny base is warm-started first"


def _tiny_lexam(cache: Path, *overrides: str):
    return load_config(
        None,
        [
            "--env.type", "lexam", "--model.cache_dir", str(cache),
            "--rollout.max_new_tokens", "8", "--warmstart.enabled", "true",
            "--warmstart.num_episodes", "4", "--warmstart.epochs", "1", *overrides,
        ],
    )  # fmt: skip


def test_the_notice_is_one_line_with_the_build_and_the_ways_around_it():
    config = load_config("configs/demo_cpu.yaml", [])
    line = warmstart_notice(config, rows=8041, command="eval")
    assert "\n" not in line and line.startswith(f"eval: {NOTICE}")
    # 1500 episodes, 2 epochs of ceil(8041 / 16) = 503 batches.
    assert "teacher's 1500 episodes: 1006 steps, 2 epochs" in line
    assert "`--warmstart.enabled false` evaluates the un-warm-started tiny model" in line
    assert "`--checkpoint` of a trained run" in line
    served = warmstart_notice(config, rows=8041, command="serve")
    assert "serves the un-warm-started tiny model" in served and "--checkpoint" not in served


def test_eval_announces_a_warm_start_it_builds_and_not_one_cached(tmp_path, capsys):
    from lexrl.envs import make_env

    config = _tiny_lexam(tmp_path / "cache")
    env = make_env(config.env)
    built = Path(resolve_base(config, env, ONE_PROCESS, command="eval"))
    said = capsys.readouterr().out
    assert said.count(NOTICE) == 1 and f"eval: {NOTICE}" in said
    assert said.index(NOTICE) < said.index("warm-start: 1 SFT steps on 4 scripted rows")
    assert built.parent == tmp_path / "cache" and "-warm-" in built.name

    again = Path(resolve_base(config, env, ONE_PROCESS, command="eval"))
    said = capsys.readouterr().out
    assert again == built
    assert NOTICE not in said and f"warm-start: cached {built}" in said

    # Training builds its warm-start as it always has, without the notice.
    other = _tiny_lexam(tmp_path / "cache", "--warmstart.learning_rate", "0.001")
    trained_on = Path(resolve_base(other, env, ONE_PROCESS))
    said = capsys.readouterr().out
    assert trained_on != built and NOTICE not in said and "1 SFT steps" in said


def test_without_the_warm_start_the_tiny_base_is_used_as_built(tmp_path, capsys):
    from lexrl.envs import make_env

    config = _tiny_lexam(tmp_path / "cache", "--warmstart.enabled", "false")
    base = Path(resolve_base(config, make_env(config.env), ONE_PROCESS, command="eval"))
    assert "-warm-" not in base.name and (base / "config.json").is_file()
    assert NOTICE not in capsys.readouterr().out
