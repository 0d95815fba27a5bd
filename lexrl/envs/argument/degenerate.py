"""The argument env's degenerate policies (`lexrl audit`): plies that ignore whether the triple
can be argued. Each plays every arguer ply (and the single agent's triple) the same way; as
analyst and polisher (RMA) it rubber-stamps every draft, the reviewers' own cheap strategy."""

from __future__ import annotations

import json
import random

from lexrl.envs.argument.scenarios import CASES, PLIES
from lexrl.envs.degenerate import PolicyFactory, generic_policies
from lexrl.rollout.policy import Messages, Teacher
from lexrl.types import Task

ABSTENTION = "TERMINATE: no grounded argument can be made from these cases."
ARGUMENT = "The cases share relevant factors, and the precedents support this side's position."
REVIEWS = {"analyst": "VALID_ARGUMENT", "polisher": "The argument is fine.\nREVISE: no"}


def _ply(abstain: bool, cite_all: bool, task: Task) -> dict:
    """A ply in the JSON schema: every case's own factors cited for it, or none."""
    factors = {case: list(task.inputs[case]) if cite_all else [] for case in CASES}
    return {"argument": ABSTENTION if abstain else ARGUMENT, "abstain": abstain, "factors": factors}


def _plies(abstain: bool, cite_all: bool) -> PolicyFactory:
    def factory(task: Task, rng: random.Random) -> Teacher:
        ply = _ply(abstain, cite_all, task)
        triple = json.dumps(dict.fromkeys(PLIES, ply))

        def respond(role: str, messages: Messages) -> str:
            if role in REVIEWS:
                return REVIEWS[role]
            return triple if role == "single" else json.dumps(ply)

        return respond

    return factory


def argument_policies() -> dict[str, PolicyFactory]:
    """Abstain always (citing nothing, or every factor), argue always (citing every factor of
    each case, or none)."""
    return {
        **generic_policies(),
        "always_abstain": _plies(abstain=True, cite_all=False),
        "abstain_citing_every_factor": _plies(abstain=True, cite_all=True),
        "cite_every_factor": _plies(abstain=False, cite_all=True),
        "never_abstain_uncited": _plies(abstain=False, cite_all=False),
    }
