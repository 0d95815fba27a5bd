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


def constant(reply: str) -> PolicyFactory:
    """The same reply in every role, on every task."""

    def factory(task: Task, rng: random.Random) -> Teacher:
        return lambda role, messages: reply

    return factory


def echo(task: Task, rng: random.Random) -> Teacher:
    """The message it was sent, back (the question echoed)."""
    return lambda role, messages: last_user_text(messages)


def generic_policies() -> dict[str, PolicyFactory]:
    """The degenerate policies that fit any env, by name: `empty` (an empty reply in every role)
    and `echo` (the last user message sent back). `Env.degenerate_policies` returns these by
    default; an env extends them (`{**generic_policies(), ...}`) with the shortcuts its own
    reward might pay for."""
    return {"empty": constant(""), "echo": echo}
