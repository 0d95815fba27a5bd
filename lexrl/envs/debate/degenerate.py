"""The debate env's degenerate policies (`lexrl audit`), on multiple-choice questions: every role
naming one constant letter (debater Y then repeats X's option, an invalid debate), and the two
debaters always arguing fixed letters, A for X and B for Y, with the judge following one of them.
Open-ended questions get the generic ones only."""

from __future__ import annotations

import random

from lexrl.envs.degenerate import PolicyFactory, constant, generic_policies
from lexrl.rollout.policy import Messages, Teacher
from lexrl.types import Task

LETTERS = "ABCD"
"""Every multiple-choice dataset of the env has at least four options."""


def _naming(letter: str) -> str:
    return f"The answer is ###{letter}###."


def _fixed_sides(judge_letter: str) -> PolicyFactory:
    """X always argues A, Y always B, the judge always decides `judge_letter`."""
    letters = {"debater_x": "A", "debater_y": "B", "judge": judge_letter}

    def factory(task: Task, rng: random.Random) -> Teacher:
        def respond(role: str, messages: Messages) -> str:
            return _naming(letters[role])

        return respond

    return factory


def debate_policies(open_ended: bool) -> dict[str, PolicyFactory]:
    """The policies for the env's kind of question."""
    policies = generic_policies()
    if open_ended:
        return policies
    policies.update({f"always_{x}": constant(_naming(x)) for x in LETTERS})
    policies["y_always_B_judge_follows_y"] = _fixed_sides("B")
    policies["y_always_B_judge_follows_x"] = _fixed_sides("A")
    return policies
