"""The gdpr env's degenerate policies (`lexrl audit`): answers that a reviewer would try before
believing that a policy reads the case. Constant labels and the training split's majority label
of the question's kind (the prior a policy learns when it ignores everything); and surface rules
that read the prompt but not the case: a negation or compliance word decides Yes/No, the
longest option, an "all of the above" option, the option sharing most words with the question
or with the whole prompt, a uniformly random label, and the training split's majority label of
questions worded alike.

A rule reads only the last user message it is sent (`last_user_text`), never the task, and
answers with the Meta-LLM's JSON (a short reply: the audit cuts replies at
`max_new_tokens`). Every role gets a reply: in the live form the decomposition request is
answered with the same JSON, which names no sub-task, so no agent is called and the Meta-LLM
answers from the question alone; a message without options (an agent's sub-task) gets the
bare rationale.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from lexrl.envs.degenerate import TeacherFactory, constant, generic_policies, last_user_text
from lexrl.envs.gdpr.parsing import LABELS
from lexrl.policy import Messages, Teacher
from lexrl.types import Task

RATIONALE = "The context and the question decide it."
NEGATIONS = frozenset({"not", "no", "never", "without", "nor", "neither", "none", "cannot"})
"""Words whose presence in a Yes/No question `negation_no` reads as a "No" (with any "n't")."""
COMPLIANCE = re.compile(
    r"\b(compl(y|ied|ies|iant|iance)|lawful(ly)?|adequate(ly)?|sufficient(ly)?|appropriate(ly)?"
    r"|justified|proportionate|reasonabl[ey])\b",
    re.IGNORECASE,
)
"""Words of a question asking whether a party did right, which `compliance_no` answers "No"
(every case is a penalty notice, so a reviewer would guess the party was found at fault)."""
SUMMARY_OPTION = re.compile(r"\b((all|both) (of )?the above|both [A-D] and [A-D])\b", re.IGNORECASE)
"""An option that gathers the others, which test writers often make the right one."""
_OPTION = re.compile(r"(Yes|No|[A-D])\. (.*)")
_WORD = re.compile(r"[a-z0-9]+")
_QUESTION = "Question: "
_ANSWER_LINE = "\n\nAnswer with "


@dataclass(frozen=True)
class Prompt:
    """What a surface rule reads of a user message of the env (`GdprEnv.user_message`, or the
    live form's decomposition request)."""

    question: str
    """The question's text, without its options."""
    options: dict[str, str]
    """Label -> option text, in the prompt's order; empty when the message shows no question
    (an agent's sub-task)."""
    context: str
    """The `Context:` part (retrieved chunks, or the agents' findings); empty without one."""


def read_prompt(text: str) -> Prompt:
    """The question, options and context of a user message: the options are the `<label>. <text>`
    lines that end the text after its last "Question: "."""
    head, marker, rest = text.rpartition(_QUESTION)
    if not marker:
        return Prompt("", {}, "")
    lines = rest.partition(_ANSWER_LINE)[0].splitlines()
    options: dict[str, str] = {}
    while lines and (match := _OPTION.fullmatch(lines[-1])) and match[1] not in options:
        options[match[1]] = match[2]
        lines.pop()
    context = head.strip().removeprefix("Context:").strip()
    return Prompt("\n".join(lines), dict(reversed(options.items())), context)


def answer(label: str) -> str:
    """The reply the prompt asks for, naming `label`."""
    return json.dumps({"rationale": RATIONALE, "answer": label})


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def most(prompt: Prompt, score: Callable[[str], float]) -> str:
    """The label whose option text scores highest; the first in the prompt's order on a tie."""
    return max(prompt.options, key=lambda label: score(prompt.options[label]))


def rule_policy(choose: Callable[[Prompt], str]) -> TeacherFactory:
    """The label `choose` picks from each prompt, as the JSON answer, in every role."""

    def factory(task: Task, rng: random.Random) -> Teacher:
        def respond(role: str, messages: Messages) -> str:
            prompt = read_prompt(last_user_text(messages))
            return answer(choose(prompt)) if prompt.options else RATIONALE

        return respond

    return factory


def random_label(task: Task, rng: random.Random) -> Teacher:
    """A uniformly random label of the prompt's options, drawn once per task (the episode's calls
    then agree, and the draw does not depend on the order episodes run in)."""
    draw = rng.random()
    return rule_policy(lambda prompt: list(prompt.options)[int(draw * len(prompt.options))])(
        task, rng
    )


def majority_labels(train: list[Task]) -> dict[str, str]:
    """The most frequent gold label of each question kind among `train`."""
    counts: dict[str, Counter[str]] = {}
    for task in train:
        counts.setdefault(task.inputs["kind"], Counter())[task.gold] += 1
    return {kind: counter.most_common(1)[0][0] for kind, counter in counts.items()}


def kind_of(prompt: Prompt) -> str:
    return "yes_no" if set(prompt.options) == set(LABELS["yes_no"]) else "abcd"


def wording_cue(question: str) -> str:
    """The question's first word, lower-cased: "did" questions are mostly "Yes" in the release,
    "does" and "according" ones lean "No"."""
    return next(iter(_WORD.findall(question.lower())), "")


def wording_majority(train: Iterable[Task], fallback: dict[str, str]) -> Callable[[Prompt], str]:
    """The training split's majority label among the questions of the prompt's kind with the
    same `wording_cue`; the kind's majority label (`fallback`) for a cue training never saw."""
    counts: dict[tuple[str, str], Counter[str]] = {}
    for task in train:
        key = (task.inputs["kind"], wording_cue(task.inputs["question"]))
        counts.setdefault(key, Counter())[task.gold] += 1
    majority = {key: counter.most_common(1)[0][0] for key, counter in counts.items()}

    def choose(prompt: Prompt) -> str:
        kind = kind_of(prompt)
        label = majority.get((kind, wording_cue(prompt.question)))
        return label or fallback.get(kind, next(iter(prompt.options)))

    return choose


def gdpr_policies(train: list[Task]) -> dict[str, TeacherFactory]:
    """Each label always, the kind's majority label and the surface rules (module docstring),
    their priors from the training tasks. A Yes/No rule answers an A-D question with the
    training majority letter, so its row is the cue's gain over the prior."""
    majority = majority_labels(train)

    def prior(prompt: Prompt) -> str:
        return majority.get(kind_of(prompt), next(iter(prompt.options)))

    def yes_no_rule(says_no: Callable[[str], bool]) -> Callable[[Prompt], str]:
        def choose(prompt: Prompt) -> str:
            if kind_of(prompt) != "yes_no":
                return prior(prompt)
            return "No" if says_no(prompt.question) else "Yes"

        return choose

    def negated(question: str) -> bool:
        return bool(words(question) & NEGATIONS) or "n't" in question.lower()

    def summary_or_longest(prompt: Prompt) -> str:
        gathering = [label for label, text in prompt.options.items() if SUMMARY_OPTION.search(text)]
        return gathering[0] if gathering else most(prompt, len)

    def overlap(prompt: Prompt, text: str) -> str:
        return most(prompt, lambda option: len(words(option) & words(text)))

    labels = dict.fromkeys(label for kind in LABELS.values() for label in kind)
    rules: dict[str, Callable[[Prompt], str]] = {
        "majority_label": prior,
        "negation_no": yes_no_rule(negated),
        "compliance_no": yes_no_rule(lambda question: bool(COMPLIANCE.search(question))),
        "wording_majority": wording_majority(train, majority),
        "longest_option": lambda prompt: most(prompt, len),
        "all_of_the_above": summary_or_longest,
        "question_overlap": lambda prompt: overlap(prompt, prompt.question),
        "prompt_overlap": lambda prompt: overlap(prompt, f"{prompt.context}\n{prompt.question}"),
    }
    return {
        **generic_policies(),
        **{f"always_{label}": constant(answer(label)) for label in labels},
        **{name: rule_policy(rule) for name, rule in rules.items()},
        "random_label": random_label,
    }
