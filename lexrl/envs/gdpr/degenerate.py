"""The gdpr env's degenerate policies (`lexrl audit`): the Meta-LLM's JSON answer with one
constant label, or the training split's majority label of the question's kind (the prior a
policy learns when it ignores the case). Every role gets the same reply, so the live form's
decomposition and agents are content-free too."""

from __future__ import annotations

import json
import random
from collections import Counter

from lexrl.envs.degenerate import PolicyFactory, constant, generic_policies
from lexrl.envs.gdpr.parsing import LABELS
from lexrl.rollout.policy import Teacher
from lexrl.types import Task

RATIONALE = "The context and the question decide it."


def answer(label: str) -> str:
    """The reply the prompt asks for, naming `label`."""
    return json.dumps({"rationale": RATIONALE, "answer": label})


def majority_labels(train: list[Task]) -> dict[str, str]:
    """The most frequent gold label of each question kind among `train`."""
    counts: dict[str, Counter[str]] = {}
    for task in train:
        counts.setdefault(task.inputs["kind"], Counter())[task.gold] += 1
    return {kind: counter.most_common(1)[0][0] for kind, counter in counts.items()}


def gdpr_policies(train: list[Task]) -> dict[str, PolicyFactory]:
    """Each label always, and the majority label of the kind (from the training tasks)."""
    majority = majority_labels(train)

    def majority_label(task: Task, rng: random.Random) -> Teacher:
        reply = answer(majority.get(task.inputs["kind"], LABELS[task.inputs["kind"]][0]))
        return lambda role, messages: reply

    labels = dict.fromkeys(label for kind in LABELS.values() for label in kind)
    policies = {f"always_{label}": constant(answer(label)) for label in labels}
    return {**generic_policies(), **policies, "majority_label": majority_label}
