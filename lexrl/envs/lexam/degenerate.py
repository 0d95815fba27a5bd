"""LEXam's degenerate policies (`lexrl audit`): the rules a reviewer would try on an exam without
knowing the law. On multiple-choice questions: one constant letter, a random letter, and an option
picked by its surface (shortest, longest, most or least word overlap with the question, most words
shared with the other options). On open questions: a content-free boilerplate answer; against an
outside judge the question copied and the most frequent English words; where the policy is its
own judge, a self-grade of full marks. Each reads only the message it is sent
(`last_user_text`), as a real rule would; none looks at the gold.
"""

from __future__ import annotations

import itertools
import random
import re
import string
from collections.abc import Callable, Iterator

from lexrl.envs.degenerate import TeacherFactory, constant, generic_policies, last_user_text
from lexrl.envs.mcq import option_label
from lexrl.policy import Messages, Teacher
from lexrl.types import Task

LETTERS = "ABCD"
"""Every LEXam MCQ configuration has at least four options."""
BOILERPLATE = (
    "The answer depends on the applicable provisions of the law and on the facts of the case; "
    "the court must weigh the interests of the parties under the relevant legal principles."
)
FREQUENT_WORDS = (
    "the the the the the the of of of of to to to and and and a a a in in is is be that"
)
"""English's most frequent words, about as often as they occur in running text: against a token
F1 judge (`builtin:reference-overlap`) they match part of any reference answer."""
_WORD = re.compile(r"\w+")

Picker = Callable[[str, list[str]], int]
"""A rule choosing an option (0-based) from the question's text and its options."""


def question_text(text: str) -> str:
    """The question in a message as the env writes it: `Question: <q>` (an MCQ's options
    appended), then `\\nAnswer:` or, to the reviewer, `\\n\\nDraft answer:\\n<draft>`."""
    body = text.partition("\n\nDraft answer:\n")[0].removesuffix("\nAnswer:")
    return body.removeprefix("Question: ")


def _labels(numbered: bool) -> Iterator[str]:
    return (str(i) for i in itertools.count(1)) if numbered else iter(string.ascii_uppercase)


def question_and_options(text: str) -> tuple[str, list[str]]:
    """The question (`question_text`) split into its stem and its options, each appended as
    `\\nA. <choice>` (numbered above 26 options, `format_choices`); without options, []."""
    body = question_text(text)
    # The options end the message, so their first label is the one last seen at a line's start
    # ("A." or "1."): the question may enumerate its own parts either way.
    numbered = body.rfind("\n1. ") > body.rfind("\nA. ")
    labels = _labels(numbered)
    first = next(labels)
    starts = [(body.rfind(f"\n{first}. "), first)]
    if starts[0][0] < 0:
        return body, []
    for label in labels:
        found = body.find(f"\n{label}. ", starts[-1][0] + 1)
        if found < 0:
            break
        starts.append((found, label))
    ends = [start for start, _ in starts[1:]] + [len(body)]
    choices = [
        body[start + len(label) + 3 : end] for (start, label), end in zip(starts, ends, strict=True)
    ]
    return body[: starts[0][0]], choices


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.casefold()))


def shortest(question: str, options: list[str]) -> int:
    """The option with the fewest characters (the first of a tie)."""
    return min(range(len(options)), key=lambda i: len(options[i]))


def longest(question: str, options: list[str]) -> int:
    """The option with the most characters (the first of a tie)."""
    return max(range(len(options)), key=lambda i: len(options[i]))


def most_overlap(question: str, options: list[str]) -> int:
    """The option sharing the most distinct words with the question (the first of a tie)."""
    asked = _words(question)
    return max(range(len(options)), key=lambda i: len(_words(options[i]) & asked))


def least_overlap(question: str, options: list[str]) -> int:
    """The option sharing the fewest distinct words with the question (the first of a tie)."""
    asked = _words(question)
    return min(range(len(options)), key=lambda i: len(_words(options[i]) & asked))


def most_shared(question: str, options: list[str]) -> int:
    """The option sharing the most words with the other options, summed over them (the first of
    a tie): the test-taker's rule that the answer is the option the distractors vary, which on a
    statement-combination MCQ picks the statements most options name."""
    words = [_words(option) for option in options]
    return max(
        range(len(options)),
        key=lambda i: sum(len(words[i] & other) for j, other in enumerate(words) if j != i),
    )


def picking(picker: Picker, prefix: str) -> TeacherFactory:
    """Answers, in every role, the marker of the option `picker` chooses from the message."""

    def factory(task: Task, rng: random.Random) -> Teacher:
        def respond(role: str, messages: Messages) -> str:
            question, options = question_and_options(last_user_text(messages))
            if not options:
                return ""
            return f"{prefix}###{option_label(picker(question, options), len(options))}###"

        return respond

    return factory


def random_letter(prefix: str) -> TeacherFactory:
    """A uniformly random option per question, drawn from the audit's rng when the task starts,
    so a seed replays it whatever order the episodes run in."""

    def factory(task: Task, rng: random.Random) -> Teacher:
        draw = rng.random()
        return picking(lambda question, options: int(draw * len(options)), prefix)(task, rng)

    return factory


def copy_question(task: Task, rng: random.Random) -> Teacher:
    """The question alone as the answer (`echo` also sends back the prompt's labels)."""
    return lambda role, messages: question_text(last_user_text(messages))


def lexam_policies(
    open_question: bool, brief: bool, policy_judge: bool
) -> dict[str, TeacherFactory]:
    """The policies for an env of the given kind: `brief` answers a bare `###X###` marker as the
    brief prompt asks (7 tokens or fewer under SmolLM2's tokenizer, inside the CPU demo's
    16-token cap), else `Correct Answer: ###X###`."""
    policies = generic_policies()
    if not open_question:
        prefix = "" if brief else "Correct Answer: "
        policies.update({f"always_{x}": constant(f"{prefix}###{x}###") for x in LETTERS})
        policies["random_letter"] = random_letter(prefix)
        rules = {
            "shortest_option": shortest,
            "longest_option": longest,
            "most_overlap_with_question": most_overlap,
            "least_overlap_with_question": least_overlap,
            "most_shared_with_options": most_shared,
        }
        policies.update({name: picking(rule, prefix) for name, rule in rules.items()})
        return policies
    policies["boilerplate"] = constant(BOILERPLATE)
    if policy_judge:

        def self_grade(role: str, messages: Messages) -> str:
            return "[[1.0]]" if role == "judge" else ""

        policies["self_grade_full"] = lambda task, rng: self_grade
        return policies
    # Against an outside judge, answers that match a reference by their words alone; with the
    # policy as judge its own verdict is the score, which `self_grade_full` games outright.
    policies["copy_question"] = copy_question
    policies["frequent_words"] = constant(FREQUENT_WORDS)
    return policies
