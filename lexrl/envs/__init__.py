"""Environments, registered by name: `make_env(config.env)` builds the configured one."""

from __future__ import annotations

from collections.abc import Callable

from lexrl.config import EnvConfig
from lexrl.envs.base import Env


def _statute(config: EnvConfig) -> Env:
    from lexrl.envs.statute import StatuteEnv

    return StatuteEnv.from_config(config.statute)


REGISTRY: dict[str, tuple[Callable[[EnvConfig], Env], str]] = {
    "statute": (_statute, "LegalMALR multi-agent statute retrieval (planner + six rewrite agents)"),
}


def make_env(config: EnvConfig) -> Env:
    if config.name not in REGISTRY:
        raise ValueError(
            f"unknown env `env.name: {config.name}`; registered: {', '.join(REGISTRY)}"
        )
    return REGISTRY[config.name][0](config)
