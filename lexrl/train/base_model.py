"""The base model a config names — a Hub id or local folder, or a built-in model built once
(`tiny` also warm-started) — and the LoRA policy on it.

Training, `lexrl eval`, `lexrl rollout` and `lexrl serve` load their model from here, so the
commands that only play a model never import the training loop (`lexrl.train.trainer`).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from accelerate import Accelerator
from transformers import PreTrainedTokenizerBase

from lexrl.config import Config
from lexrl.envs import make_env
from lexrl.envs.base import Env
from lexrl.models import SMOLLM2, add_lora, load_base, smollm2_model_dir, tiny_model_dir
from lexrl.train.warmstart import build_warmstarted_base

PLAYS = {"eval": "evaluates", "rollout": "plays", "serve": "serves"}
"""What each command that may warm-start the tiny base does with the model (the notice's verb)."""


def resolve_base(
    config: Config, env: Env, accelerator: Accelerator, command: str | None = None
) -> Path | str:
    """The base model path; a built-in model is built once on the main process (`tiny` is also
    warm-started). With `command` (`eval`, `rollout`, `serve`), a warm-start that is not cached
    yet is announced in one line before it is built, with how to do without it."""
    if config.model.name_or_path == SMOLLM2:
        with accelerator.main_process_first():
            return smollm2_model_dir(config.model.cache_dir)
    if config.model.name_or_path != "tiny":
        return config.model.name_or_path
    with accelerator.main_process_first():
        base_dir = tiny_model_dir(config.model, env.text_corpus())
        if not config.warmstart.enabled:
            return base_dir
        return build_warmstarted_base(
            env,
            base_dir,
            config.warmstart,
            seed=config.model.tiny_seed,
            load=lambda path: load_base(config.model, path=path),
            announce=None if command is None else partial(_announce, config, command),
        )


def _announce(config: Config, command: str, rows: int, target: Path) -> None:
    print(warmstart_notice(config, rows, command), flush=True)


def warmstart_notice(config: Config, rows: int, command: str) -> str:
    """The one line said before a command other than `train` builds the tiny base's warm-start:
    what is built, how long it is, and how to do without it."""
    warmstart = config.warmstart
    steps = warmstart.epochs * -(-rows // warmstart.batch_size)
    plays = PLAYS.get(command, "uses")
    skip = f"`--warmstart.enabled false` {plays} the un-warm-started tiny model"
    if command != "serve":
        skip += ", or `--checkpoint` of a trained run uses the base its adapter names"
    return (
        f"{command}: the tiny base is warm-started first (SFT on the teacher's "
        f"{warmstart.num_episodes} episodes: {steps} steps, {warmstart.epochs} epochs; built once "
        f"and cached); to skip it, {skip}"
    )


def build_policy(
    config: Config,
    accelerator: Accelerator,
    base_path: str | None = None,
    env: Env | None = None,
    command: str | None = None,
) -> tuple[Env, Any, PreTrainedTokenizerBase, str]:
    """The env (`env`, or the config's), the LoRA policy on its frozen base, the tokenizer, and
    the base's path (`base_path`, or the config's base, built or warm-started if need be; with
    `command`, see `resolve_base`)."""
    env = env or make_env(config.env)
    base_path = base_path or str(resolve_base(config, env, accelerator, command))
    model, tokenizer = load_base(config.model, path=base_path)
    return env, add_lora(model, config.lora, config.run.seed), tokenizer, base_path
