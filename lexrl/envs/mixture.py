"""Several environments played by one policy (`env.type: mix`): the tasks of every member env,
drawn with the mixture's probabilities, each episode played by the env that made its task.

A task of the mixture is a member's task under the id `<env>:<id>` with `meta["env"]` naming the
member; the member itself only ever sees its own, unchanged tasks. Because a GRPO group is the K
episodes of one task, a group never mixes envs, and the advantages, computed per group, compare
episodes of one env with one reward scale. How the envs' different reward scales are handled is
`grpo.scale_rewards`' choice: `group` divides by each group's std, so every env's advantages have
unit scale; `batch` divides by the std over the batch's groups of the SAME env (per-env
normalisation); `none` leaves them as they are, and an env with larger rewards weighs more.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import TYPE_CHECKING

from lexrl.envs.base import Env, EnvPart, task_at
from lexrl.envs.degenerate import TeacherFactory
from lexrl.errors import ConfigError
from lexrl.policy import Policy, Teacher
from lexrl.types import Group, Task, Trajectory

if TYPE_CHECKING:
    from lexrl.envs.mixture_options import MixEnvConfig


def mixture_probabilities(weights: dict[str, float], temperature: float) -> dict[str, float]:
    """p_e = w_e ** (1 / T) / sum_f w_f ** (1 / T) for weights w (given, or the envs' sizes) and
    temperature T > 0: T = 1 keeps the proportions, T -> infinity tends to uniform."""
    if not weights or not temperature > 0 or any(not w > 0 for w in weights.values()):
        raise ValueError(f"weights must be > 0 and the temperature > 0: {weights}, {temperature}")
    scaled = {name: weight ** (1.0 / temperature) for name, weight in weights.items()}
    total = sum(scaled.values())
    return {name: value / total for name, value in scaled.items()}


class MixtureEnv(Env):
    """The envs `members` played by one policy: training and evaluation see it, as every env,
    through `lexrl.envs.composite` (`MixtureComposite`), whose members label their outputs."""

    name = "mix"

    def __init__(
        self,
        members: dict[str, Env],
        probabilities: dict[str, float],
        warmstart_shares: dict[str, int] | None = None,
    ):
        if set(members) != set(probabilities):
            raise ValueError(f"members {sorted(members)} != probabilities {sorted(probabilities)}")
        self.members = members
        self.probabilities = probabilities
        self.warmstart_shares = {name: 1 for name in members} | (warmstart_shares or {})
        self.roles = tuple(dict.fromkeys(role for env in members.values() for role in env.roles))
        self._tasks: dict[str, list[Task]] = {}
        self._originals: dict[str, Task] = {}
        self._by_member: dict[str, dict[str, list[Task]]] = {}

    @classmethod
    def from_config(cls, config: MixEnvConfig) -> MixtureEnv:
        members = {m.env.name: m.env.build() for m in config.members}
        if config.mix_weighting == "size":
            weights = {name: float(len(env.tasks("train"))) for name, env in members.items()}
            empty = [name for name, weight in weights.items() if weight == 0]
            if empty:
                raise ConfigError(f"env.members: {', '.join(empty)} has no training tasks")
        else:
            weights = {m.env.name: m.weight for m in config.members}
        shares = {m.env.name: m.warmstart_share for m in config.members}
        return cls(members, mixture_probabilities(weights, config.mix_temperature), shares)

    def _tagged(self, name: str, tasks: list[Task]) -> list[Task]:
        tagged = []
        for task in tasks:
            mixed = Task(f"{name}:{task.id}", task.inputs, task.gold, {**task.meta, "env": name})
            self._originals[mixed.id] = task
            tagged.append(mixed)
        return tagged

    def tasks(self, split: str) -> list[Task]:
        """Every member's tasks of `split`, member by member in the order of `env.members`."""
        if split not in self._tasks:
            self._tasks[split] = [
                task
                for name, env in self.members.items()
                for task in self._tagged(name, env.tasks(split))
            ]
        return self._tasks[split]

    def member_tasks(self, split: str) -> dict[str, list[Task]]:
        """The mixture's tasks of `split`, by member env."""
        if split not in self._by_member:
            by_member: dict[str, list[Task]] = {name: [] for name in self.members}
            for task in self.tasks(split):
                by_member[self.member_of(task)].append(task)
            self._by_member[split] = by_member
        return self._by_member[split]

    def train_task(
        self, position: int, positions: dict[str, int], seed: int
    ) -> tuple[Task, dict[str, int]]:
        """The training task at global data `position`: a member drawn with the mixture's
        probabilities from (seed, position) alone, so every process draws the same, then that
        member's next task in its own seeded order. `positions` (each member's data position,
        saved in checkpoints) comes back with the drawn member's one higher, so a resumed run
        goes on where each env stopped, even with changed weights."""
        rng = random.Random(f"{seed}:mix:{position}")
        names = list(self.probabilities)
        name = rng.choices(names, weights=[self.probabilities[n] for n in names])[0]
        at = positions.get(name, 0)
        task = task_at(self.member_tasks("train")[name], at, seed)
        return task, {**positions, name: at + 1}

    async def run_episode(self, task: Task, policy: Policy) -> Trajectory:
        trajectory = await self.members[self.member_of(task)].run_episode(
            self._originals[task.id], policy
        )
        trajectory.task_id = task.id
        return trajectory

    def declared_components(self, task: Task) -> tuple[str, ...]:
        return self.members[self.member_of(task)].declared_components(self._originals[task.id])

    def teacher(self, task: Task, rng: random.Random) -> Teacher:
        return self.members[self.member_of(task)].teacher(self._originals[task.id], rng)

    def degenerate_policies(self) -> dict[str, TeacherFactory]:
        """The policies every member declares (the generic ones at least), each playing a task
        as its member's policy of that name does. `lexrl audit` audits each member with its own."""
        first, *others = (env.degenerate_policies() for env in self.members.values())
        names = [name for name in first if all(name in other for other in others)]
        return {name: self._forwarded(name) for name in names}

    def _forwarded(self, name: str) -> TeacherFactory:
        def factory(task: Task, rng: random.Random) -> Teacher:
            member = self.members[self.member_of(task)]
            return member.degenerate_policies()[name](self._originals[task.id], rng)

        return factory

    def warmstart_tasks(self) -> list[Task]:
        """The warm-start tasks of the members whose scripted teacher has tasks to play (a
        member without a teacher, or gdpr's live form, is left to GRPO), taken in rounds of
        `warmstart_share` tasks from each member, the shorter lists cycled, so that the first N
        tasks the warm-start plays are shared between them in those proportions."""
        lists = [
            (self.warmstart_shares[name], self._tagged(name, env.warmstart_tasks()))
            for name, env in self.members.items()
            if type(env).teacher is not Env.teacher
        ]
        lists = [(share, tasks) for share, tasks in lists if tasks]
        rounds = max((-(-len(tasks) // share) for share, tasks in lists), default=0)
        return [
            tasks[(round_ * share + i) % len(tasks)]
            for round_ in range(rounds)
            for share, tasks in lists
            for i in range(share)
        ]

    def text_corpus(self) -> list[str]:
        return [text for env in self.members.values() for text in env.text_corpus()]

    def evaluation_label(self) -> str:
        return "-".join(label for env in self.members.values() if (label := env.evaluation_label()))

    def member_of(self, task: Task) -> str:
        """The name of the member that made `task` (a task of the mixture's)."""
        return task.meta["env"]

    def member_envs(self) -> dict[str, Env]:
        """The member envs by name (`members`); training and evaluation read them through
        `lexrl.envs.composite`."""
        return self.members

    def parts(self, tasks: list[Task], groups: list[Group] | None) -> list[EnvPart]:
        """Each member with its own tasks and groups, as the member made them (original ids)."""
        parts = []
        for name, env in self.members.items():
            mine = [i for i, task in enumerate(tasks) if self.member_of(task) == name]
            if not mine:
                continue
            originals = [self._originals[tasks[i].id] for i in mine]
            member_groups = None
            if groups is not None:
                member_groups = [
                    Group(task, [replace(t, task_id=task.id) for t in groups[i].trajectories])
                    for task, i in zip(originals, mine, strict=True)
                ]
            parts.append(EnvPart(name, env, originals, member_groups))
        return parts
