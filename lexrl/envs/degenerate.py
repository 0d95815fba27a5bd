"""Degenerate policies: cheap strategies a policy could fall into, replies that ignore the task's
content, as scripted teachers (`lexrl.policy.Teacher`). `lexrl audit` plays them through
an env's real workflow and compares their reward with the scripted teacher's, so a reward that a
content-free policy can earn most of shows up before training finds it.

This module holds the helpers and the policies that fit any env; each env adds its own in
`lexrl/envs/<env>/degenerate.py` and declares them with `Env.degenerate_policies`. Beside them the
audit plays the generic probes (`generic_probes`) on every env, plugins included, with no code in
the env: content-free replies (`empty`, `echo`, `unparsable`, `copy_prompt`) and the teacher's own
replies put where they do not belong (another task's, another role's, the most common one, half
of it). They find the holes nobody thought to write a policy for, such as an unparsable issue list
scored like an explicit "none".
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from lexrl.errors import LexrlError
from lexrl.generation import Completion, Sampling
from lexrl.policy import Messages, ScriptedPolicy, Teacher, conversation
from lexrl.types import Task

if TYPE_CHECKING:
    from lexrl.envs.base import Env

TeacherFactory = Callable[[Task, random.Random], Teacher]
"""A degenerate policy, as `Env.degenerate_policies` names it: called with the task about to be
played and an rng (for any random choice; the audit seeds it, so a run repeats), it returns the
`Teacher` that answers every `chat` of that one episode. `Env.teacher` has the same signature, so
the audit plays the reference teacher and the degenerate policies alike. A factory may read the
task (its options, to pick one by a rule that ignores the question) but never its `gold`, or
the audit measures nothing; a policy whose name starts with `random` is played over several
seeds and averaged (`lexrl.eval.audit.RANDOM_SEEDS`)."""


def last_user_text(messages: Messages) -> str:
    """The text of the last user message (a bare string is one)."""
    if isinstance(messages, str):
        return messages
    return next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")


def constant(reply: str) -> TeacherFactory:
    """The same reply in every role, on every task."""

    def factory(task: Task, rng: random.Random) -> Teacher:
        return lambda role, messages: reply

    return factory


def echo(task: Task, rng: random.Random) -> Teacher:
    """The message it was sent, back (the question echoed)."""
    return lambda role, messages: last_user_text(messages)


def generic_policies() -> dict[str, TeacherFactory]:
    """The degenerate policies that fit any env, by name: `empty` (an empty reply in every role)
    and `echo` (the last user message sent back). `Env.degenerate_policies` returns these by
    default; an env extends them (`{**generic_policies(), ...}`) with the shortcuts its own
    reward might pay for. The audit plays them on every env anyway (`generic_probes`)."""
    return {"empty": constant(""), "echo": echo}


UNPARSABLE = "zorvick plume tansy murrow quelt vantle glimp orrow"
"""The `unparsable` probe's reply: made-up lowercase words with no punctuation, so no answer
line, marker, option letter, label (yes, no, none) or list for any parser to find."""
CONTENT_FREE = ("empty", "echo", "unparsable", "copy_prompt")
"""The probes whose replies carry nothing of an answer: a reward component that pays them is one
GRPO can collect without doing the task (`lexrl.eval.audit.COMPONENT_BOUND`)."""
OTHER_TASKS = 8
"""The tasks `other_task_teacher` tries, in order, for one whose teacher answers the call."""
COMMON_REPLY_TASKS = 100
"""Training tasks the teacher plays to find each role's most common reply (a seeded sample):
enough to find a majority, cheap on any scripted env."""


class ProbeUnplayable(Exception):
    """A probe that cannot be played on an env: the borrowed teacher raised for a task or role
    it was not written for. The audit notes why and leaves the probe out."""


class CopyPrompt:
    """The `copy_prompt` probe's teacher: every message of the call, the system prompt included,
    copied back. It asks `ProbePolicy` for the system prompt (`sees_system`), which a `Teacher`
    is otherwise not shown."""

    sees_system: ClassVar[bool] = True

    def __call__(self, role: str, messages: Messages) -> str:
        return "\n\n".join(m["content"] for m in conversation("", messages) if m["content"])


class ProbePolicy(ScriptedPolicy):
    """A `ScriptedPolicy` that shows a teacher asking for it (`sees_system`) the whole
    conversation, the system prompt first, in place of the messages alone."""

    async def _complete(
        self, role: str, system: str, messages: Messages, prompt_ids: list[int], sampling: Sampling
    ) -> Completion:
        if getattr(self.teacher, "sees_system", False):
            messages = conversation(system, messages)
        return await super()._complete(role, system, messages, prompt_ids, sampling)


def copy_prompt(task: Task, rng: random.Random) -> Teacher:
    """The whole prompt back (`CopyPrompt`)."""
    return CopyPrompt()


def teachable(env: Env, tasks: list[Task]) -> list[Task]:
    """The tasks `env`'s scripted teacher can play (an env may have none, or lack one for some
    systems: the gdpr env's live form)."""
    rng = random.Random(0)
    out = []
    for task in tasks:
        try:
            env.teacher(task, rng)
        except NotImplementedError:
            continue
        out.append(task)
    return out


def other_task_teacher(env: Env, tasks: list[Task]) -> TeacherFactory:
    """On each task of `tasks`, the teacher of another one in the same role, given the same
    messages: a fluent, well-formed reply about another case. The other task is half the list
    away, not the next one: a split grouped by question (one per system) or sorted by label
    would hand the next task's teacher the same answer. From there it is the first, in order,
    whose teacher answers the call without raising (a task of another system may have a teacher
    for other calls), of `OTHER_TASKS`; the episode keeps to it while it answers. Raises
    `ProbeUnplayable` for a call none of them answers."""
    position = {task.id: i for i, task in enumerate(tasks)}

    def factory(task: Task, rng: random.Random) -> Teacher:
        at = position.get(task.id, -1) + len(tasks) // 2
        others = [t for k in range(len(tasks)) if (t := tasks[(at + k) % len(tasks)]) != task]
        others = others[:OTHER_TASKS]
        teachers: dict[int, Teacher] = {}
        chosen = 0

        def reply(role: str, messages: Messages) -> str:
            nonlocal chosen
            for index in range(chosen, len(others)):
                if index not in teachers:
                    teachers[index] = env.teacher(others[index], rng)
                try:
                    text = teachers[index](role, messages)
                except Exception:  # noqa: BLE001 - a task it cannot play here: try the next
                    continue
                chosen = index
                return text
            raise ProbeUnplayable(f"no other task's teacher answers role {role!r} without raising")

        return reply

    return factory


def other_role_teacher(env: Env) -> TeacherFactory:
    """Asked in a role, the teacher's reply in another of `env.roles` to the same messages: the
    right task, the wrong job. The other role is the first after it (in order, the last followed
    by the first) whose teacher reply differs from the asked role's own and does not raise: a
    teacher that answers two roles alike (the argument env's two arguers) would otherwise be
    played as itself. Raises `ProbeUnplayable` for a call no other role answers so."""
    roles = env.roles

    def factory(task: Task, rng: random.Random) -> Teacher:
        own = env.teacher(task, rng)
        borrowed: dict[str, Teacher] = {}

        def reply(role: str, messages: Messages) -> str:
            mine = own(role, messages)
            start = roles.index(role) + 1 if role in roles else 0
            for other in (*roles[start:], *roles[:start]):
                if other == role:
                    continue
                if other not in borrowed:
                    borrowed[other] = env.teacher(task, rng)
                try:
                    text = borrowed[other](other, messages)
                except Exception:  # noqa: BLE001 - a role it cannot play here: try the next
                    continue
                if text != mine:
                    return text
            raise ProbeUnplayable(
                f"no other role's teacher reply differs from role {role!r}'s without raising"
            )

        return reply

    return factory


def half_teacher(env: Env) -> TeacherFactory:
    """The teacher's reply cut to its first half, by characters: an answer left unfinished."""

    def factory(task: Task, rng: random.Random) -> Teacher:
        teacher = env.teacher(task, rng)

        def reply(role: str, messages: Messages) -> str:
            text = teacher(role, messages)
            return text[: len(text) // 2]

        return reply

    return factory


def common_replies(env: Env, seed: int) -> dict[str, str]:
    """Per role, the teacher's most common reply (the first seen among equals) on a seeded
    sample of at most `COMMON_REPLY_TASKS` of the training tasks it can play, whole replies.
    Raises `ProbeUnplayable` when it can play none."""
    try:
        train = teachable(env, env.tasks("train"))
    except (LexrlError, KeyError, ValueError) as error:
        raise ProbeUnplayable(f"no training split ({error})") from error
    if not train:
        raise ProbeUnplayable("the teacher plays no training task")
    rng = random.Random(seed)
    sample = rng.sample(train, min(COMMON_REPLY_TASKS, len(train)))
    seen: dict[str, Counter[str]] = {}

    def recorded(teacher: Teacher) -> Teacher:
        def reply(role: str, messages: Messages) -> str:
            text = teacher(role, messages)
            seen.setdefault(role, Counter())[text] += 1
            return text

        return reply

    async def episodes() -> None:
        played = [ScriptedPolicy(None, t.id, recorded(env.teacher(t, rng))) for t in sample]
        await asyncio.gather(*map(env.run_episode, sample, played))

    asyncio.run(episodes())
    return {role: counts.most_common(1)[0][0] for role, counts in seen.items()}


def by_role(replies: dict[str, str]) -> TeacherFactory:
    """A constant reply per role (`replies`), empty in a role it has none for."""

    def factory(task: Task, rng: random.Random) -> Teacher:
        return lambda role, messages: replies.get(role, "")

    return factory


def generic_probes(
    env: Env, tasks: list[Task], seed: int
) -> tuple[dict[str, TeacherFactory], dict[str, str]]:
    """The probes the audit plays on every env, whatever its `degenerate_policies`, for the
    audited `tasks` (of one split, in order); and the probes left out, each with why. The
    content-free ones fit any env; the others borrow the env's teacher, so an env without one
    (`NotImplementedError`), or one whose teacher raises where a probe plays it, goes without
    them. `common_teacher_reply` plays the teacher on the training split (`common_replies`)."""
    probes: dict[str, TeacherFactory] = {
        **generic_policies(),
        "unparsable": constant(UNPARSABLE),
        "copy_prompt": copy_prompt,
    }
    skipped: dict[str, str] = {}
    playable = teachable(env, tasks)
    if not playable:
        reason = "the env has no scripted teacher" if tasks else "no task to play"
        names = ("other_task_teacher", "other_role_teacher", "common_teacher_reply")
        return probes, dict.fromkeys((*names, "half_teacher"), reason)
    if len(playable) > 1:
        probes["other_task_teacher"] = other_task_teacher(env, playable)
    else:
        skipped["other_task_teacher"] = "needs 2 tasks the teacher plays"
    if len(env.roles) > 1:
        probes["other_role_teacher"] = other_role_teacher(env)
    else:
        skipped["other_role_teacher"] = "the env has one role"
    try:
        probes["common_teacher_reply"] = by_role(common_replies(env, seed))
    except ProbeUnplayable as error:
        skipped["common_teacher_reply"] = str(error)
    probes["half_teacher"] = half_teacher(env)
    return probes, skipped
