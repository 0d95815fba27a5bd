"""The debate env's degenerate policies (`lexrl audit`), on multiple-choice questions. Each one
plays every role from the prompt text alone (never the gold):

- every role naming one constant letter (debater Y then repeats X's option, an invalid debate),
  and the two debaters always arguing fixed letters, A for X and B for Y, with the judge
  following one of them;
- debaters arguing letters drawn with the factory's rng (X one, Y another), the judge following
  X, following Y, taking the letter the debate mentions most, or a letter neither argued;
- an option ranking that reads only the options' surface (the shortest, the longest, the one
  sharing most words with the question, the one sharing most words with the other options): X
  argues the first, Y the second, the judge decides the first.

Open-ended questions get the generic ones only.

`shortest_option` is the one a split made pay: held out by whole courses
(`lexam_split: course`), the sample's 20 test questions have the first shortest option right 14
times (Swiss Law, the training course: 32 of 130), so it earned 75% of the teacher's reward
there; under the sample's default `facts` split, 6 of 25.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable

from lexrl.envs.degenerate import TeacherFactory, constant, generic_policies, last_user_text
from lexrl.policy import Messages, Teacher
from lexrl.types import Task

LETTERS = "ABCD"
"""Every multiple-choice dataset of the env has at least four options."""
LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

Ranking = Callable[[str, list[str]], list[int]]
"""Option indices best first, from the question's stem and its options' texts."""

_SIDE = re.compile(r"Debater ([XY])'s \(for option ([A-Z])\)")
_MENTION = re.compile(r"(?:###|\b[Oo]ption\s+)([A-Z])(?![A-Za-z])")


def _naming(letter: str) -> str:
    return f"The answer is ###{letter}###."


def _fixed_sides(judge_letter: str) -> TeacherFactory:
    """X always argues A, Y always B, the judge always decides `judge_letter`."""
    letters = {"debater_x": "A", "debater_y": "B", "judge": judge_letter}

    def factory(task: Task, rng: random.Random) -> Teacher:
        def respond(role: str, messages: Messages) -> str:
            return _naming(letters[role])

        return respond

    return factory


def question_parts(text: str) -> tuple[str, list[str]]:
    """The stem and the option texts of the question a prompt opens with: the first run of
    `A. ...`, `B. ...` lines (`format_choices`); a debater's later line is not an option."""
    lines = text.splitlines()
    options: list[str] = []
    start = len(lines)
    for number, line in enumerate(lines):
        if len(options) < len(LABELS) and line.startswith(f"{LABELS[len(options)]}. "):
            start = min(start, number)
            options.append(line[3:])
        elif options:
            break
    return "\n".join(lines[:start]), options


def sides(text: str) -> dict[str, str]:
    """The debaters' letters as the judge's prompt states them ("Debater X's (for option B)")."""
    return dict(_SIDE.findall(text))


def most_mentioned(text: str) -> str | None:
    """The letter the debate part of a judge's prompt names most (a marker or "option B"),
    ties to the earliest named."""
    debate = text.partition("\n\nDebater X's")[2]
    counts = Counter(_MENTION.findall(debate))
    return counts.most_common(1)[0][0] if counts else None


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def shortest(stem: str, options: list[str]) -> list[int]:
    return sorted(range(len(options)), key=lambda i: len(options[i]))


def longest(stem: str, options: list[str]) -> list[int]:
    return sorted(range(len(options)), key=lambda i: -len(options[i]))


def question_overlap(stem: str, options: list[str]) -> list[int]:
    """Most words shared with the question's stem first."""
    return sorted(range(len(options)), key=lambda i: -len(_words(options[i]) & _words(stem)))


def shared_with_others(stem: str, options: list[str]) -> list[int]:
    """Most words shared with the other options first: the test-taker's "consensus" option (on
    LEXam's combinations of statements, the one holding the most often listed statements)."""
    words = [_words(option) for option in options]
    shared = [sum(len(w & v) for j, v in enumerate(words) if j != i) for i, w in enumerate(words)]
    return sorted(range(len(options)), key=lambda i: -shared[i])


def ranked(ranking: Ranking, judge: str = "own") -> TeacherFactory:
    """X argues `ranking`'s first option, Y its second, each beginning with the marker; the
    judge decides `judge`: `own` (the first), `x` / `y` (that debater's letter as its prompt
    states it), `most_mentioned`, or `neither` (the best ranked letter no debater argued). A
    judge with no debate to read (the single-agent system) decides the first."""

    def factory(task: Task, rng: random.Random) -> Teacher:
        def respond(role: str, messages: Messages) -> str:
            text = last_user_text(messages)
            stem, options = question_parts(text)
            order = [LABELS[i] for i in ranking(stem, options)]
            if role == "debater_x":
                return f"###{order[0]}### I argue for option {order[0]}."
            if role == "debater_y":
                return f"###{order[1]}### I argue for option {order[1]}."
            argued = sides(text)
            choice = {
                "x": argued.get("X"),
                "y": argued.get("Y"),
                "most_mentioned": most_mentioned(text),
                "neither": next((x for x in order if x not in argued.values()), None),
            }.get(judge)
            return f"I decide for ###{choice or order[0]}###."

        return respond

    return factory


def random_ranking(judge: str) -> TeacherFactory:
    """`ranked` over an order of the letters drawn once per task with the factory's rng."""

    def factory(task: Task, rng: random.Random) -> Teacher:
        keys = [rng.random() for _ in LABELS]

        def ranking(stem: str, options: list[str]) -> list[int]:
            return sorted(range(len(options)), key=keys.__getitem__)

        return ranked(ranking, judge)(task, rng)

    return factory


def debate_policies(open_ended: bool) -> dict[str, TeacherFactory]:
    """The policies for the env's kind of question."""
    policies = generic_policies()
    if open_ended:
        return policies
    policies.update({f"always_{x}": constant(_naming(x)) for x in LETTERS})
    policies["y_always_B_judge_follows_y"] = _fixed_sides("B")
    policies["y_always_B_judge_follows_x"] = _fixed_sides("A")
    for judge in ("x", "y", "most_mentioned", "neither"):
        name = judge if judge in ("most_mentioned", "neither") else f"follows_{judge}"
        policies[f"random_sides_judge_{name}"] = random_ranking(judge)
    policies["shortest_option"] = ranked(shortest)
    policies["longest_option"] = ranked(longest)
    policies["most_question_overlap_option"] = ranked(question_overlap)
    policies["most_shared_words_option"] = ranked(shared_with_others)
    return policies
