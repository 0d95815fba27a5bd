"""Environments. Each is a plugin: an options class registered under its name
(`lexrl.registry.register_env`) and found through the entry-point group `lexrl.envs`, lexrl's
own envs included. `make_env(config.env)` builds the configured one, or the mixture of several
(`env.type: mix`, `lexrl.envs.mixture`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lexrl.envs.base import Env
    from lexrl.registry import EnvConfig


def make_env(config: EnvConfig) -> Env:
    """The env an `env` config section describes (its `build()`)."""
    return config.build()
