"""Environments, registered by name: `make_env(config.env)` builds the configured one, or the
mixture of several (`env.name: mix`, `lexrl.envs.mixture`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from lexrl.errors import ConfigError

if TYPE_CHECKING:
    # Typing only: `lexrl.config` composes the envs' options modules, which import this package.
    from lexrl.config import EnvConfig
    from lexrl.envs.base import Env


def _statute(config: EnvConfig) -> Env:
    from lexrl.envs.statute.env import StatuteEnv

    return StatuteEnv.from_config(config.statute)


def _lexam(config: EnvConfig) -> Env:
    from lexrl.envs.lexam.env import LexamEnv

    return LexamEnv.from_config(config.lexam)


def _argument(config: EnvConfig) -> Env:
    from lexrl.envs.argument.env import ArgumentEnv

    return ArgumentEnv.from_config(config.argument)


def _debate(config: EnvConfig) -> Env:
    from lexrl.envs.debate.env import DebateEnv

    return DebateEnv.from_config(config.debate)


def _gdpr(config: EnvConfig) -> Env:
    from lexrl.envs.gdpr.env import GdprEnv

    return GdprEnv.from_config(config.gdpr)


REGISTRY: dict[str, tuple[Callable[[EnvConfig], Env], str]] = {
    "statute": (_statute, "LegalMALR multi-agent statute retrieval (planner + six rewrite agents)"),
    "lexam": (_lexam, "LEXam law-exam questions: MCQ by answer marker, open ones by LLM judges"),
    "argument": (
        _argument,
        "3-ply legal arguments over CATO factors that must abstain when they cannot be grounded",
    ),
    "debate": (
        _debate,
        "debaters X and Y and a judge: bar-exam MCQ (letters) or OAB open questions (rubric, "
        "citation F1)",
    ),
    "gdpr": (
        _gdpr,
        "MASLegalBench GDPR questions answered by a Meta-LLM over its F / LR / AR / CS agents",
    ),
}


def make_env(config: EnvConfig) -> Env:
    if config.name == "mix":
        from lexrl.envs.mixture import MixtureEnv

        return MixtureEnv.from_config(config)
    if config.name not in REGISTRY:
        raise ConfigError(
            f"unknown env `env.name: {config.name}`; registered: {', '.join(REGISTRY)}"
        )
    return REGISTRY[config.name][0](config)
