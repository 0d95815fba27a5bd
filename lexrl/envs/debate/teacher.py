"""The debate env's scripted teacher: the reward's upper reference in `lexrl audit`, and the
warm-start's episodes. It reads the task's gold, as a teacher may.

Multiple choice: debater X argues the gold option (the neutral side takes "the position that
the law best supports"), debater Y a different option drawn with the rng (the protocol's valid
adversarial action), each reply beginning with its `###X###` marker as the debater format asks,
openings and rebuttals alike; the judge decides the gold after a one-clause rationale, the
marker last. IRAC and vanilla replies differ in wording, as their prompts do.

The replies are short enough for the CPU demo's caps (configs/debate_cpu.yaml: 32 tokens a
debater turn, 16 a judgment, SmolLM2's tokenizer): an option's text is quoted up to
`SNIPPET_WORDS` words and the rationales are fixed clauses (tests/envs/test_debate_teacher.py
measures the cut share).

Open-ended (OAB): X and the judge write the reference answer (its citations are the expected
ones by construction, `data.oab_task`); Y, the adversarial side, challenges X to show that those
provisions govern the facts. Nothing is cut: the OAB configs run with the paper's caps.
"""

from __future__ import annotations

import random

from lexrl.envs.degenerate import last_user_text
from lexrl.envs.mcq import option_label
from lexrl.policy import Messages, Teacher
from lexrl.types import Task

SNIPPET_WORDS = 6
"""Words of an option's text a debater quotes: LEXam's options ("i, ii, and iv") fit whole, a
bar-exam sentence is cut so the turn stays within 32 tokens."""

# The debater replies of each family: {mine} and {theirs} are labels, {text} the quoted option.
MCQ_DEBATER = {
    "irac": {
        ("debater_x", "opening"): "###{mine}### Issue: which option the law supports. Rule and "
        "application: {text} fits the facts. Conclusion: {mine}.",
        ("debater_y", "opening"): "###{mine}### Issue: X overlooks a rule. Applied to the facts, "
        "{text} fits better. Conclusion: {mine}.",
        ("debater_x", "rebuttal"): "###{mine}### Y misapplies the rule; applied to the facts, "
        "{text} holds. Conclusion: {mine}.",
        ("debater_y", "rebuttal"): "###{mine}### X's rule leaves out an exception; {text} holds. "
        "Conclusion: {mine}.",
    },
    "vanilla": {
        ("debater_x", "opening"): "###{mine}### Option {mine}, {text}, is what the law provides.",
        ("debater_y", "opening"): "###{mine}### X is wrong: option {mine}, {text}, is correct.",
        ("debater_x", "rebuttal"): "###{mine}### Y's option {theirs} misreads the law; {text} "
        "stands.",
        ("debater_y", "rebuttal"): "###{mine}### X's option {theirs} ignores the facts; {text} "
        "stands.",
    },
}
MCQ_JUDGE = {
    "irac": "Rule and application favour X. ###{gold}###",
    "vanilla": "Debater X's reading is right. ###{gold}###",
    "single": "Applying the rule to the facts: ###{gold}###",
}


def snippet(text: str) -> str:
    """An option's text as a debater quotes it: its first `SNIPPET_WORDS` words."""
    words = text.split()
    cut = " ".join(words[:SNIPPET_WORDS])
    return f"{cut} ..." if len(words) > SNIPPET_WORDS else cut


def turn(messages: Messages) -> str:
    """`opening` or `rebuttal`: the env ends a rebuttal's request with "Your rebuttal:"."""
    return "rebuttal" if last_user_text(messages).rstrip().endswith("rebuttal:") else "opening"


def mcq_teacher(task: Task, rng: random.Random) -> Teacher:
    """X for the gold, Y for another option drawn with `rng`, the judge for the gold."""
    n = task.meta["n_options"]
    gold = task.gold
    other = rng.choice([i for i in range(n) if i != gold])
    sides = {"debater_x": (gold, other), "debater_y": (other, gold)}
    system = task.meta["system"]
    choices = task.inputs["choices"]

    def respond(role: str, messages: Messages) -> str:
        if role == "judge":
            return MCQ_JUDGE[system].format(gold=option_label(gold, n))
        mine, theirs = sides[role]
        return MCQ_DEBATER[system][role, turn(messages)].format(
            mine=option_label(mine, n),
            theirs=option_label(theirs, n),
            text=snippet(choices[mine]),
        )

    return respond


def open_teacher(task: Task) -> Teacher:
    """X and the judge answer with the reference; Y challenges its provisions."""
    reference = task.gold["reference"]
    provisions = "; ".join(task.gold["citations"]) or "the provisions it relies on"
    challenge = f"Debater X must still show that {provisions} govern these facts."

    def respond(role: str, messages: Messages) -> str:
        return challenge if role == "debater_y" else reference

    return respond
