"""Checks of typed options that draccus' type check cannot make: a choice among strings, and the
range of a number. A section of the config, or any dataclass nested in it, declares them as
class attributes keyed by field name (`CHOICES`, `BOUNDS`; `name[]` for each element of a list,
`a.b` for a field of a nested dataclass), a class's own merged over those of the classes it
derives from (`class_rules`: a shared option type of `lexrl.env_options` brings its ranges
along), and `check_section` walks a whole tree of them. The core
config (`lexrl.config`) and every env's options (`lexrl.registry.EnvConfig`) use the same
machinery. Imports nothing of lexrl but its errors, so an env's options module stays cheap.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from lexrl.errors import ConfigError


@dataclass(frozen=True)
class Bound:
    """The interval a numeric option must lie in, from `low` up to `high` (None: no upper end);
    `why` is added to the error. None passes where the field's type allows it (`int | None`)."""

    low: float
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    why: str = ""

    def __contains__(self, value: float) -> bool:
        # Written as what passes, so that NaN (YAML `.nan`) fails every bound; no option means
        # anything by infinity (YAML `.inf`), and a learning rate or cap of it trains on NaN.
        above = value > self.low if self.low_open else value >= self.low
        if self.high is None:
            return above and value < math.inf
        return above and (value < self.high if self.high_open else value <= self.high)

    def __str__(self) -> str:
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {self.low}"
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"in {left}{self.low}, {self.high}{right}"


AT_LEAST_0 = Bound(0)
AT_LEAST_1 = Bound(1)
ABOVE_0 = Bound(0, low_open=True)
SEED = Bound(0, 2**32 - 1)
"""numpy's seeds, which `set_seed` also sets."""
HELD_OUT = Bound(0, 0.5, low_open=True)
"""A held-out share: `lexrl.envs.data.split_by_group` keeps the test split at most half."""


def numeric_options(cls: type, prefix: str = "") -> dict[str, bool]:
    """Every int and float option below the dataclass `cls`, as its dotted key (`name[]` for
    the elements of a list) -> whether it may be None."""
    options = {}
    hints = typing.get_type_hints(cls)
    for item in fields(cls):
        options |= _numeric(hints[item.name], f"{prefix}{item.name}")
    return options


def _numeric(hint: object, key: str) -> dict[str, bool]:
    if typing.get_origin(hint) is list:
        return _numeric(typing.get_args(hint)[0], f"{key}[]")
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        inner = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return {key: True} if inner in ([int], [float]) else {}
    if is_dataclass(hint):
        return numeric_options(hint, f"{key}.")
    return {key: False} if hint in (int, float) else {}


def values_at(value: object, key: str, path: str) -> Iterator[tuple[str, object]]:
    """The values a dotted key (`a.b`, `ks[]`) names below `value`, each with its full path
    (`env.members[1].weight`); `path` is the path of `value` itself."""
    yield from _at(value, key.split("."), path)


def _at(value: object, parts: list[str], path: str) -> Iterator[tuple[str, object]]:
    if not parts:
        yield path, value
        return
    name = parts[0].removesuffix("[]")
    child, child_path = getattr(value, name), f"{path}.{name}".lstrip(".")
    if parts[0].endswith("[]"):
        for index, element in enumerate(child):
            yield from _at(element, parts[1:], f"{child_path}[{index}]")
    else:
        yield from _at(child, parts[1:], child_path)


def check_choices(value: object, choices: dict[str, tuple[Any, ...]], path: str = "") -> None:
    """Refuse a field of `value` outside its choices, naming its path and the choices."""
    for key, allowed in choices.items():
        for where, chosen in values_at(value, key, path):
            if chosen not in allowed:
                raise ConfigError(
                    f"`{where}` is {chosen!r}; expected one of {', '.join(map(str, allowed))}"
                )


def check_bounds(value: object, bounds: dict[str, Bound], path: str = "") -> None:
    """Refuse a numeric field of `value` outside its bound, naming the path, the bound and the
    value."""
    may_be_none = numeric_options(type(value))
    for key, bound in bounds.items():
        for where, number in values_at(value, key, path):
            # draccus lets YAML's null through for any field.
            if (number is None and may_be_none[key]) or (number is not None and number in bound):
                continue
            allowed = f"None or {bound}" if may_be_none[key] else str(bound)
            why = f": {bound.why}" if bound.why else ""
            raise ConfigError(f"`{where}` must be {allowed}, not {number!r}{why}")


def class_rules(cls: type, name: str) -> dict[str, Any]:
    """The `CHOICES` or `BOUNDS` (`name`) of `cls` and of every class it derives from, merged
    along the MRO: a subclass's entry for a key replaces its base's."""
    rules: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        rules |= klass.__dict__.get(name, {})
    return rules


def check_section(value: object, path: str, root: object) -> None:
    """Check a dataclass and every dataclass below it (lists of them included) against their own
    `CHOICES` and `BOUNDS`, then their `check(path, root)` cross-field rules, if they define
    one. `root` is the whole config, for rules that span sections (an env option that needs a
    `grpo` setting)."""
    if not is_dataclass(value):
        return
    check_choices(value, class_rules(type(value), "CHOICES"), path)
    check_bounds(value, class_rules(type(value), "BOUNDS"), path)
    for item in fields(value):
        child = getattr(value, item.name)
        if isinstance(child, list):
            for index, element in enumerate(child):
                check_section(element, f"{path}.{item.name}[{index}]", root)
        else:
            check_section(child, f"{path}.{item.name}", root)
    check = getattr(value, "check", None)
    if callable(check):
        check(path, root)


def declared_bounds(cls: type, prefix: str = "") -> set[str]:
    """Every dotted key below the dataclass `cls` that a `BOUNDS` of it or of a dataclass nested
    in it covers (`judges[].timeout_s`), for the test that every number has a range."""
    covered = {f"{prefix}{key}" for key in class_rules(cls, "BOUNDS")}
    hints = typing.get_type_hints(cls)
    for item in fields(cls):
        hint, key = hints[item.name], f"{prefix}{item.name}"
        if typing.get_origin(hint) is list:
            hint, key = typing.get_args(hint)[0], f"{key}[]"
        if is_dataclass(hint):
            covered |= declared_bounds(hint, f"{key}.")
    return covered
