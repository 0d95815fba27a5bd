"""Every env as the envs it is made of: a mixture's members, or a single env as a mixture of one.

Training, evaluation and the integrations take an env's `composite` and loop over its members
alike; none of them asks whether an env is a mixture. Where a mixture's outputs differ from a
single env's (metrics under `<env>/`, a report section and a folder per env, before/after
numbers keyed `<env>/<metric>`), they follow one field, `Composite.labels_members`.
"""

from __future__ import annotations

from lexrl.envs.base import Env, EnvPart, task_at
from lexrl.envs.mixture import MixtureEnv
from lexrl.errors import DatasetError
from lexrl.types import Group, Task


class Composite:
    """A single env seen as a mixture of one: its only member is itself, under its own name, and
    its outputs name no member."""

    labels_members = False
    """Whether outputs name the member each number comes from (`<env>/` metric prefixes, a report
    section and a folder per env): a mixture's do, a single env's are as the env reports them."""

    def __init__(self, env: Env):
        self.env = env

    @property
    def members(self) -> dict[str, Env]:
        """The envs by name, in their order: `{env.name: env}` for a single env."""
        return {self.env.name: self.env}

    def member_name(self, task: Task) -> str:
        """The name of the member that made `task`."""
        return self.env.name

    def split(self, tasks: list[Task], groups: list[Group] | None) -> list[EnvPart]:
        """`tasks` and their `groups` (None: no groups) by the member that made them, each
        member with its own tasks as it made them; a member with none is left out."""
        return [EnvPart(self.env.name, self.env, tasks, groups)]

    def train_task(
        self, position: int, positions: dict[str, int], seed: int
    ) -> tuple[Task, dict[str, int]]:
        """The training task at global data `position`, and the members' data positions after
        it (`positions`, saved in checkpoints; a single env keeps none: `task_at` of the position
        alone)."""
        return task_at(self.env.tasks("train"), position, seed), positions

    def key(self, member: str, name: str) -> str:
        """What outputs call a member's number `name`: `<member>/<name>` where members are
        labelled, `name` itself otherwise."""
        return f"{member}/{name}" if self.labels_members else name

    def labelled(self) -> list[str]:
        """The member names that outputs label numbers with: every member's, or none."""
        return list(self.members) if self.labels_members else []


class MixtureComposite(Composite):
    """A mixture (`lexrl.envs.mixture`): its members, each labelling its own outputs."""

    labels_members = True
    env: MixtureEnv

    @property
    def members(self) -> dict[str, Env]:
        return self.env.members

    def member_name(self, task: Task) -> str:
        return self.env.member_of(task)

    def split(self, tasks: list[Task], groups: list[Group] | None) -> list[EnvPart]:
        return self.env.parts(tasks, groups)

    def train_task(
        self, position: int, positions: dict[str, int], seed: int
    ) -> tuple[Task, dict[str, int]]:
        return self.env.train_task(position, positions, seed)


def composite(env: Env) -> Composite:
    """`env` as the envs it is made of (the one place that tells a mixture from a single env)."""
    return MixtureComposite(env) if isinstance(env, MixtureEnv) else Composite(env)


def members(env: Env) -> dict[str, Env]:
    """The envs `env` is made of, by name: a mixture's members, or `{env.name: env}`."""
    return composite(env).members


def split_by_member(
    env: Env, tasks: list[Task], groups: list[Group] | None = None
) -> list[EnvPart]:
    """`Composite.split` of `env`'s composite."""
    return composite(env).split(tasks, groups)


def require_tasks(env: Env, split: str) -> None:
    """Refuse, in one line, an env (or a mixture member) with no `split` tasks: checked before
    any model is built, so an empty data file costs seconds, not a model load."""
    empty = [name for name, member in composite(env).members.items() if not member.tasks(split)]
    if empty:
        raise DatasetError(
            f"env {', '.join(empty)}: no {split!r} tasks; check its data (a `{split}` split in "
            "the data file, the options that size or select it)"
        )
