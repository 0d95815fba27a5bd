"""Where envs come from: every env is a plugin, found by its entry point.

An env's options are a dataclass deriving `EnvConfig` (a `draccus.ChoiceRegistry`, as LeRobot
registers its env configs), registered under the env's name with `@register_env("name")`
beside the env's code. A YAML config picks one with `env: {type: name, ...its options}`, and
`--env.type name` on the command line. The registered classes are found through the entry-point
group `lexrl.envs` (`ENTRY_POINT_GROUP`): lexrl's own envs declare theirs in its
`pyproject.toml` exactly as a third-party package does in its own, so `pip install my-legal-task`
is all it takes for `lexrl envs`, `train`, `eval`, `audit`, `serve-env` and the verifiers adapter
to know it. An entry point names the options class: `qa = "my_legal_task.options:QaEnvConfig"`.

A plugin that fails to import is reported in one line naming its package and error, and the
other envs still load; two packages that register one name are an error naming both (gym's
entry-point plugins are namespaced for the same reason, openai/gym#2345). Importing this module
imports no env: discovery happens on the first `discover_envs()`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any, ClassVar

import draccus

from lexrl.errors import ConfigError
from lexrl.options import Bound

if TYPE_CHECKING:
    from lexrl.envs.base import Env

ENTRY_POINT_GROUP = "lexrl.envs"
"""The entry-point group every env package declares its options class in."""

DEFAULT_ENV = "statute"
"""The env a config trains when it sets no `env.type`: lexrl's first task, LegalMALR statute
retrieval (what `lexrl train` without a config has always run)."""


SERVICE_KEYS = frozenset(
    {
        "base_url",
        "api_key_env",
        "max_retries",
        "concurrency",
        "timeout_s",
        "device",
        "batch_size",
        "index_dir",
        "cache_size",
        "judge_cache_dir",
        "dense_endpoint",
        "reranker_endpoint",
    }
)
"""Option names, in any env and any section of it, that say where a service runs or how it is
reached, not what is trained: a resume may change them (`EnvConfig.objective_options`)."""


@dataclass
class EnvConfig(draccus.ChoiceRegistry):
    """The options of one env: subclass it as a dataclass whose field docstrings document each
    option, register it with `@register_env("name")`, and point an entry point of the group
    `lexrl.envs` at it.

    Class attributes carry what draccus' type check cannot: `CHOICES` (field -> the allowed
    values) and `BOUNDS` (field -> `lexrl.options.Bound`), keyed by field name (`ks[]` for each
    element of a list; a nested dataclass may declare its own). Rules across fields go in
    `check`. `build` makes the env, importing its code only then, so that loading a config
    imports no model code.
    """

    CHOICES: ClassVar[dict[str, tuple[Any, ...]]] = {}
    BOUNDS: ClassVar[dict[str, Bound]] = {}
    MOVED: ClassVar[dict[str, str]] = {}
    """Options of this env that moved within its options, old key -> new key, both below `env`
    (`{"factor_layout": "ablation.factor_layout"}`): a config or a `--env.KEY` setting an old
    one is refused in one line naming the new one (`lexrl.config.moved_env_option`)."""
    RESUME_MAY_CHANGE: ClassVar[tuple[str, ...]] = ()
    """Options a resume may change besides `SERVICE_KEYS`: dotted keys, a section's name
    covering its keys (`("eval",)`), for options that say how a run is evaluated, not what it
    trains on or for."""

    @classmethod
    def default_choice_name(cls) -> str | None:
        return DEFAULT_ENV

    @property
    def name(self) -> str:
        """The name the env is registered under (what `env.type` says)."""
        return registered_name(type(self))

    def check(self, path: str, config: Any) -> None:
        """Refuse, with a `ConfigError` naming the key by its `path` (`env`, or
        `env.members[1].env` in a mixture), a combination of options the env cannot run.
        `config` is the whole `lexrl.config.Config`, for a rule on another section. Called after
        `CHOICES` and `BOUNDS` were checked; the default has no rule."""

    def build(self) -> Env:
        """The env these options describe."""
        raise NotImplementedError(f"{type(self).__name__} does not say how to build its env")

    def objective_options(self) -> dict[str, Any]:
        """Dotted key -> JSON value of every option that sets what a run trains on and for (its
        data, its workflow, its reward): each checkpoint records them, and a resume with another
        value is refused. Leaves out `SERVICE_KEYS` and `RESUME_MAY_CHANGE`."""
        # As a checkpoint's JSON holds them (tuples as lists), so that equal options compare equal.
        tree = json.loads(json.dumps(asdict(self), default=str))
        options: dict[str, Any] = {}

        def walk(values: dict[str, Any], prefix: str) -> None:
            for key, value in values.items():
                dotted = f"{prefix}{key}"
                if key in SERVICE_KEYS or any(
                    dotted == kept or dotted.startswith(f"{kept}.")
                    for kept in self.RESUME_MAY_CHANGE
                ):
                    continue
                if isinstance(value, dict):
                    walk(value, f"{dotted}.")
                else:
                    options[dotted] = value

        walk(tree, "")
        return options

    def member_names(self) -> list[str]:
        """The envs this config trains: its own name, or a mixture's members."""
        return [self.name]

    def sections(self, path: str = "env") -> dict[str, EnvConfig]:
        """The options of each env this config trains by its dotted path: `{path: self}`, or a
        mixture's members (`env.members[1].env`)."""
        return {path: self}


def registered_name(cls: type) -> str:
    """The name an `EnvConfig` subclass is registered under."""
    try:
        return EnvConfig.get_choice_name(cls)
    except ValueError:
        raise ConfigError(
            f"{cls.__module__}.{cls.__name__} is not a registered env: decorate it with "
            "`@register_env(NAME)`"
        ) from None


def register_env(name: str):  # noqa: ANN201 - a class decorator
    """Register an `EnvConfig` subclass under `name` (what `env.type` selects). A name another
    class already holds is an error naming both classes' modules."""

    def decorate(cls: type[EnvConfig]) -> type[EnvConfig]:
        if not (isinstance(cls, type) and issubclass(cls, EnvConfig)):
            raise TypeError(f"@register_env({name!r}) decorates an EnvConfig subclass, not {cls}")
        holder = EnvConfig.get_known_choices().get(name)
        if holder is not None and holder is not cls and _origin(holder) != _origin(cls):
            raise ConfigError(
                f"env name {name!r} is registered twice: by {_origin(holder)} and by "
                f"{_origin(cls)}; uninstall one, or rename one's env"
            )
        EnvConfig.get_known_choices()[name] = cls
        return cls

    return decorate


def _origin(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


@dataclass
class _Discovery:
    done: bool = False
    failures: dict[str, str] | None = None


_DISCOVERY = _Discovery()


def _distribution(entry_point: metadata.EntryPoint) -> str:
    dist = getattr(entry_point, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else entry_point.value


def discover_envs() -> dict[str, type[EnvConfig]]:
    """Import every entry point of `lexrl.envs` once and return the registered envs by name.
    A plugin that fails to load is reported on stderr in one line (`failed_plugins` keeps it)
    and left out; two packages declaring one name raise a `ConfigError` naming both."""
    if not _DISCOVERY.done:
        _DISCOVERY.failures = {}
        seen: dict[str, metadata.EntryPoint] = {}
        for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
            earlier = seen.get(entry_point.name)
            if earlier is not None:
                if earlier.value == entry_point.value:
                    continue  # one package found twice on the path
                raise ConfigError(
                    f"env name {entry_point.name!r} is declared by two packages: "
                    f"{_distribution(earlier)} ({earlier.value}) and "
                    f"{_distribution(entry_point)} ({entry_point.value}); uninstall one"
                )
            seen[entry_point.name] = entry_point
        for name, entry_point in seen.items():
            _load(name, entry_point)
        _DISCOVERY.done = True
    return dict(EnvConfig.get_known_choices())


def _load(name: str, entry_point: metadata.EntryPoint) -> None:
    try:
        cls = entry_point.load()
        if not (isinstance(cls, type) and issubclass(cls, EnvConfig)):
            raise TypeError(f"{entry_point.value} is not an EnvConfig subclass")
        if EnvConfig.get_known_choices().get(name) is not cls:
            raise TypeError(
                f"{entry_point.value} is not registered as {name!r}: decorate it with "
                f"`@register_env({name!r})`"
            )
    except ConfigError:
        raise
    except Exception as error:  # a plugin's bug must not stop the other envs
        message = f"{type(error).__name__}: {error}".splitlines()[0]
        _DISCOVERY.failures[name] = f"{_distribution(entry_point)}: {message}"
        print(
            f"lexrl: env plugin {name!r} from {_distribution(entry_point)} failed to load "
            f"({message}); the other envs are available",
            file=sys.stderr,
        )


def failed_plugins() -> dict[str, str]:
    """The plugins that failed to load, by env name -> `package version: error`."""
    discover_envs()
    return dict(_DISCOVERY.failures or {})


def env_names() -> list[str]:
    """Every registered env name, sorted."""
    return sorted(discover_envs())


def env_config_class(name: str, key: str = "env.type") -> type[EnvConfig]:
    """The options class registered as `name`, or a `ConfigError` naming `key`, the registered
    names and, if its plugin failed to load, why."""
    known = discover_envs()
    if name in known:
        return known[name]
    failure = failed_plugins().get(name)
    where = key if key.endswith("`") else f"`{key}`"
    if failure:
        raise ConfigError(f"{where} is {name!r}, whose plugin failed to load ({failure})")
    raise ConfigError(f"{where} is {name!r}; registered: {', '.join(sorted(known))}")


def default_env() -> EnvConfig:
    """The options of `DEFAULT_ENV` at their defaults: the env a config that names none trains."""
    return env_config_class(DEFAULT_ENV)()


def describe(cls: type) -> str:
    """The first paragraph of an env options class's docstring on one line: what `lexrl envs`
    prints."""
    paragraph = (cls.__doc__ or "").strip().split("\n\n")[0]
    return " ".join(paragraph.split())
