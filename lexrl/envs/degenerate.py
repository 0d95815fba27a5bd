"""Degenerate policies: cheap strategies a policy could fall into, replies that ignore the task's
content, as scripted teachers (`lexrl.rollout.policy.Teacher`). `lexrl audit` plays them through
an env's real workflow and compares their reward with the scripted teacher's, so a reward that a
content-free policy can earn most of shows up before training finds it.

This module holds the helpers and the policies that fit any env; each env adds its own in
`lexrl/envs/<env>/degenerate.py` and declares them with `Env.degenerate_policies`.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from lexrl.rollout.policy import Messages, Teacher
from lexrl.types import Task

PolicyFactory = Callable[[Task, random.Random], Teacher]
"""A degenerate policy: the teacher it plays for one task (an rng for any random choice)."""


def last_user_text(messages: Messages) -> str:
    """The text of the last user message (a bare string is one)."""
    if isinstance(messages, str):
        return messages
    return next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")


def constant(reply: str) -> PolicyFactory:
    """The same reply in every role, on every task."""

    def factory(task: Task, rng: random.Random) -> Teacher:
        return lambda role, messages: reply

    return factory


def echo(task: Task, rng: random.Random) -> Teacher:
    """The message it was sent, back (the question echoed)."""
    return lambda role, messages: last_user_text(messages)


def generic_policies() -> dict[str, PolicyFactory]:
    """The degenerate policies that fit any env: an empty reply and the message echoed."""
    return {"empty": constant(""), "echo": echo}
