"""Options of the task mixture (`env.type: mix`): several envs trained as one policy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lexrl.errors import ConfigError
from lexrl.options import ABOVE_0, AT_LEAST_1
from lexrl.registry import EnvConfig, default_env, register_env

if TYPE_CHECKING:
    from lexrl.envs.base import Env


@dataclass
class MixMember:
    """One env of a mixture: its options, and how often it is drawn."""

    env: EnvConfig = field(default_factory=default_env)
    """The member env: `{type: NAME, ...its options}`, as a single env's `env` section."""
    weight: float = 1.0
    """Sampling weight with `mix_weighting: given` (normalised over the mixture)."""
    warmstart_share: int = 1
    """Warm-start tasks this member's scripted teacher plays for each one a member at 1 plays
    (`warmstart.num_episodes` is shared in these proportions): an env whose skill needs more
    supervised data than the others', such as argument's (docs/benchmarks.md), gets more."""

    BOUNDS = {"weight": ABOVE_0, "warmstart_share": AT_LEAST_1}


@register_env("mix")
@dataclass
class MixEnvConfig(EnvConfig):
    """Several envs trained as one policy, each task drawn from one member env."""

    members: list[MixMember] = field(default_factory=list)
    """The envs of the mixture, each at most once, e.g. `[{env: {type: gdpr}, weight: 2},
    {env: {type: argument, workflow: MA}}]`. A step draws each of its `grpo.tasks_per_step` tasks
    from one env with the probability `mix_weighting` gives; a group is always one task, so it
    never mixes envs."""
    mix_weighting: str = "given"
    """`given`: env e is drawn with probability proportional to `weight_e ** (1 / T)`; `size`:
    proportional to `n_e ** (1 / T)`, n_e its number of training tasks (T: `mix_temperature`)."""
    mix_temperature: float = 1.0
    """T above: 1 keeps the proportions, larger flattens them towards uniform (the temperature
    sampling of multilingual pre-training, Conneau et al. 2020 with T = 1 / alpha)."""

    CHOICES = {"mix_weighting": ("given", "size")}
    BOUNDS = {"mix_temperature": ABOVE_0}

    def check(self, path: str, config: Any) -> None:
        if not self.members:
            raise ConfigError(
                f"`{path}.type: mix` needs `{path}.members`, a list of "
                "`{env: {type: NAME, ...}, weight: W}` entries"
            )
        names: list[str] = []
        for index, member in enumerate(self.members):
            name = member.env.name
            if name == "mix":
                raise ConfigError(f"`{path}.members[{index}]` is a mixture; list its envs instead")
            if name in names:
                raise ConfigError(f"`{path}.members[{index}]`: {name!r} is listed twice")
            names.append(name)

    def member_names(self) -> list[str]:
        return [member.env.name for member in self.members]

    def sections(self, path: str = "env") -> dict[str, EnvConfig]:
        return {
            f"{path}.members[{index}].env": member.env for index, member in enumerate(self.members)
        }

    def build(self) -> Env:
        from lexrl.envs.mixture import MixtureEnv

        return MixtureEnv.from_config(self)
