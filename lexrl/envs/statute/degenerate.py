"""The statute env's degenerate policies (`lexrl audit`): a planner that exits at once, or
that passes the question on unchanged (once, or every iteration until the forced exit) through
the single-element agent, which returns it as it is."""

from __future__ import annotations

import json
import random

from lexrl.envs.degenerate import TeacherFactory, generic_policies
from lexrl.policy import Messages, Teacher
from lexrl.types import Task

EXIT = json.dumps({"action": "exit", "reason": "the question is clear as it is"})
PASS_ON = json.dumps({"action": "single_element", "reason": "search the question"})


def _unchanged(rewrites: int | None) -> TeacherFactory:
    """The question itself as every agent's query, the planner asking for it `rewrites` times
    (None: until the env's forced exit)."""

    def factory(task: Task, rng: random.Random) -> Teacher:
        query = json.dumps({"query": task.inputs["query"]}, ensure_ascii=False)
        planned = {"calls": 0}

        def respond(role: str, messages: Messages) -> str:
            if role == "planner":
                planned["calls"] += 1
                return EXIT if rewrites is not None and planned["calls"] > rewrites else PASS_ON
            if role == "abnormality_analyzer":
                return json.dumps({"anomaly": "none", "diagnosis": "none"})
            return query

        return respond

    return factory


def statute_policies() -> dict[str, TeacherFactory]:
    """Exit at once; pass the question on unchanged once; never exit."""
    return {
        **generic_policies(),
        "exit_at_once": _unchanged(rewrites=0),
        "pass_query_unchanged": _unchanged(rewrites=1),
        "never_exit": _unchanged(rewrites=None),
    }
