"""LEXam's degenerate policies (`lexrl audit`): one constant letter on multiple-choice questions;
on open questions a content-free boilerplate answer and, where the policy is its own judge, a
self-grade of full marks."""

from __future__ import annotations

from lexrl.envs.degenerate import PolicyFactory, constant, generic_policies
from lexrl.rollout.policy import Messages

LETTERS = "ABCD"
"""Every LEXam MCQ configuration has at least four options."""
BOILERPLATE = (
    "The answer depends on the applicable provisions of the law and on the facts of the case; "
    "the court must weigh the interests of the parties under the relevant legal principles."
)


def lexam_policies(
    open_question: bool, brief: bool, policy_judge: bool
) -> dict[str, PolicyFactory]:
    """The policies for an env of the given kind: `brief` answers a bare `###X###` marker as the
    brief prompt asks, else `Correct Answer: ###X###`."""
    policies = generic_policies()
    if not open_question:
        prefix = "" if brief else "Correct Answer: "
        policies.update({f"always_{x}": constant(f"{prefix}###{x}###") for x in LETTERS})
        return policies
    policies["boilerplate"] = constant(BOILERPLATE)
    if policy_judge:

        def self_grade(role: str, messages: Messages) -> str:
            return "[[1.0]]" if role == "judge" else ""

        policies["self_grade_full"] = lambda task, rng: self_grade
    return policies
