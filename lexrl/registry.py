"""Where envs come from: every env is a plugin, found by its entry point.

An env's options are a dataclass deriving `EnvConfig` (a `draccus.ChoiceRegistry`, as LeRobot
registers its env configs), registered under the env's name with `@register_env("name")`
beside the env's code. A YAML config picks one with `env: {type: name, ...its options}`, and
`--env.type name` on the command line. The registered classes are found through the entry-point
group `lexrl.envs` (`ENTRY_POINT_GROUP`): lexrl's own envs declare theirs in its
`pyproject.toml` exactly as a third-party package does in its own, so `pip install my-legal-task`
is all it takes for `lexrl envs`, `train`, `eval`, `audit`, `serve-env` and the verifiers adapter
to know it. An entry point names the options class: `qa = "my_legal_task.options:QaEnvConfig"`.

A plugin that fails to import, whatever it raises (`sys.exit` and `KeyboardInterrupt` included:
a plugin running `argparse` at import exits), or whose entry point is not `module:Class`, or
whose options take a name lexrl reserves (`RESERVED_OPTION_NAMES`), is reported in one line
naming its package and what happened, and the other envs still load; two packages that register
one name are an error naming both (gym's entry-point plugins are namespaced for the same reason,
openai/gym#2345). Importing this module imports no env: discovery happens on the first
`discover_envs()`.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import re
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any, ClassVar, TextIO, get_origin

import draccus

from lexrl.errors import ConfigError, LexrlError
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


RESERVED_OPTION_NAMES = frozenset(
    {"type", *(attribute for attribute in dir(EnvConfig) if not attribute.startswith("_"))}
)
"""Names no env's option may take (`register_env` refuses them): `type`, the key that picks the
env in `env: {type: NAME}` and `--env.type`, and every public attribute of `EnvConfig` (`name`,
`check`, `build`, `sections`, `member_names`, `objective_options`, `CHOICES`, `BOUNDS`, `MOVED`,
`RESUME_MAY_CHANGE`, draccus' choice methods), which an option of that name would replace on
every instance."""


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
    """Register an `EnvConfig` subclass under `name` (what `env.type` selects). An option named
    in `RESERVED_OPTION_NAMES` is a `ConfigError` naming the class and the option; a name
    another class already holds is one naming both classes' modules."""

    def decorate(cls: type[EnvConfig]) -> type[EnvConfig]:
        if not (isinstance(cls, type) and issubclass(cls, EnvConfig)):
            raise TypeError(f"@register_env({name!r}) decorates an EnvConfig subclass, not {cls}")
        reserved = sorted(_option_names(cls) & RESERVED_OPTION_NAMES)
        if reserved:
            raise ConfigError(
                f"{_origin(cls)} has option {', '.join(map(repr, reserved))}, a name reserved "
                "by lexrl (`lexrl.registry.RESERVED_OPTION_NAMES`): rename the option"
            )
        holder = EnvConfig.get_known_choices().get(name)
        if holder is not None and holder is not cls and _origin(holder) != _origin(cls):
            raise _NameTaken(
                f"env name {name!r} is registered twice: by {_origin(holder)} and by "
                f"{_origin(cls)}; uninstall one, or rename one's env"
            )
        EnvConfig.get_known_choices()[name] = cls
        return cls

    return decorate


class _NameTaken(ConfigError):
    """Two classes registering one env name: which one a config means cannot be told, so
    discovery stops at it rather than leaving one out."""


def _origin(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _option_names(cls: type) -> set[str]:
    """The options `cls` and its bases below `EnvConfig` declare: their annotated names that are
    not `ClassVar`s, read from the annotations so that `@register_env` finds them on either
    side of `@dataclass`."""
    names = set()
    for klass in cls.__mro__:
        if klass in EnvConfig.__mro__:
            continue
        for key, annotation in inspect.get_annotations(klass).items():
            # Under `from __future__ import annotations` an annotation is its source text.
            if isinstance(annotation, str):
                if not re.match(r"(typing\.)?ClassVar\b", annotation.strip()):
                    names.add(key)
            elif annotation is not ClassVar and get_origin(annotation) is not ClassVar:
                names.add(key)
    return names


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
    A plugin that fails to load, whatever it raised at import, is reported on stderr in one
    line (`failed_plugins` keeps it) and left out; two packages declaring one name raise a
    `ConfigError` naming both."""
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
    """Import `entry_point`'s class and check it is registered as `name`. Whatever it raises is
    reported in one line and the plugin left out, except a name two classes register and a real
    Ctrl-C. What it prints meanwhile is held back: passed on unchanged unless it fails, when its
    first line is quoted in the one line instead."""
    writes: list[tuple[TextIO, str]] = []
    pressed = threading.Event()
    try:
        with _noting_ctrl_c(pressed), _holding_output(writes):
            _check_plugin(name, entry_point)
    except _NameTaken:
        _pass_on(writes)
        raise
    except BaseException as error:  # a plugin's bug, sys.exit included, must not stop the others
        if pressed.is_set() or isinstance(error, GeneratorExit):
            _pass_on(writes)
            raise
        printed = _first_line("".join(text for _, text in writes))
        message = _what_happened(error) + (f"; it printed {printed!r}" if printed else "")
        _DISCOVERY.failures[name] = f"{_distribution(entry_point)}: {message}"
        print(
            f"lexrl: env plugin {name!r} from {_distribution(entry_point)} failed to load "
            f"({message}); the other envs are available",
            file=sys.stderr,
        )
    else:
        _pass_on(writes)


class _PluginFault(Exception):
    """A plugin's entry point or class is not one lexrl can load; the message says how."""


def _check_plugin(name: str, entry_point: metadata.EntryPoint) -> None:
    # `EntryPoint.load` reads a value its pattern does not match as None.group(...).
    match = entry_point.pattern.match(entry_point.value)
    if match is None or not match.group("attr"):
        raise _PluginFault(
            f"its entry point {name!r} is {entry_point.value!r}, not `module:Class`: the "
            'package\'s `[project.entry-points."lexrl.envs"]` must name its options class'
        )
    cls = entry_point.load()
    if not (isinstance(cls, type) and issubclass(cls, EnvConfig)):
        raise _PluginFault(f"{entry_point.value} is not an EnvConfig subclass")
    if EnvConfig.get_known_choices().get(name) is not cls:
        raise _PluginFault(
            f"{entry_point.value} is not registered as {name!r}: decorate it with "
            f"`@register_env({name!r})`"
        )


def _what_happened(error: BaseException) -> str:
    """`error`, raised while a plugin loaded, as its one line says it."""
    if isinstance(error, (_PluginFault, LexrlError)):  # a message written for the user
        return str(error)
    if isinstance(error, SystemExit):
        return f"called sys.exit({'' if error.code is None else repr(error.code)}) at import"
    said = type(error).__name__
    if str(error):
        said = f"{said}: {error}".splitlines()[0]
    # Not an exception (KeyboardInterrupt, ...): the plugin raised it; a real Ctrl-C is re-raised.
    return said if isinstance(error, Exception) else f"raised {said} at import"


def _first_line(text: str, width: int = 120) -> str:
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line if len(line) <= width else f"{line[: width - 3]}..."


class _Held(io.TextIOBase):
    """Stands in for stdout or stderr while a plugin is imported: each write is kept in `writes`
    with the stream it was meant for, one list for both streams, so their order is kept."""

    def __init__(self, stream: TextIO, writes: list[tuple[TextIO, str]]) -> None:
        self.stream, self.writes = stream, writes

    def write(self, text: str) -> int:
        self.writes.append((self.stream, text))
        return len(text)


@contextlib.contextmanager
def _holding_output(writes: list[tuple[TextIO, str]]) -> Iterator[None]:
    """What the block writes to `sys.stdout` and `sys.stderr` goes to `writes` instead (what a
    library writes to the file descriptors itself still reaches the terminal)."""
    with (
        contextlib.redirect_stdout(_Held(sys.stdout, writes)),
        contextlib.redirect_stderr(_Held(sys.stderr, writes)),
    ):
        yield


def _pass_on(writes: list[tuple[TextIO, str]]) -> None:
    for stream, text in writes:
        stream.write(text)


@contextlib.contextmanager
def _noting_ctrl_c(pressed: threading.Event) -> Iterator[None]:
    """Set `pressed` when SIGINT (Ctrl-C) arrives while the block runs, interrupting as before,
    so that a `KeyboardInterrupt` with `pressed` unset is known to be raised by code. SIGINT is
    handled in the main thread only: elsewhere, or where it is ignored, nothing is set."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield
        return

    def note(signum: int, frame: Any) -> None:
        pressed.set()
        previous(signum, frame)

    signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        # A handler the plugin set at import is its own to keep.
        if signal.getsignal(signal.SIGINT) is note:
            signal.signal(signal.SIGINT, previous)


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
