"""The options a debater argues or a judge picks, read from free text.

The prompts ask for the LEXam marker (`###B###`), which `lexrl.envs.mcq.mcq_answers`
reads. A small model answers in its own words instead ("B. i and iii", "The answer is B"), so
without a marker the stated forms count too: "answer is B", "answer: (B)", "option B", "I
choose B", and a reply that BEGINS with "B." / "B)" / "(B)" (only at the start: a reply that
lists the options line by line picks none of them). A debater's position is its first option,
the judge's decision its last. Labels are letters (up to 26 options).
"""

from __future__ import annotations

import re
import string

from lexrl.envs.mcq import mcq_answers

_STATED = re.compile(
    r"(?:\banswer(?:\s*(?:is|:|=|-))?|\boption|\bchoice|\bchoose|\bpick|\bselect)"
    r"[\s*_:\-]*\(?(?-i:([A-Z]))\)?[*_]*(?!\w)",
    re.IGNORECASE,
)
_LEADING = re.compile(r"\s*[*_#]*\(?(?-i:([A-Z]))(?:\)|\.|:)(?!\w)")


def stated_options(text: str, n_options: int) -> list[int]:
    """0-based indices of the options `text` names, in order: the `###X###` markers when there
    are any, else the stated forms of the module docstring. Everything up to the last
    `</think>` is dropped. Never raises on any string."""
    markers = mcq_answers(text, n_options)
    if markers:
        return markers
    text = text.rpartition("</think>")[2]
    labels = string.ascii_uppercase[:n_options]
    found: list[tuple[int, int]] = []
    leading = _LEADING.match(text)
    if leading and leading.group(1) in labels:
        found.append((leading.start(1), labels.index(leading.group(1))))
    for match in _STATED.finditer(text):
        if match.group(1) in labels:
            found.append((match.start(1), labels.index(match.group(1))))
    return [index for _, index in sorted(found)]


def position(text: str, n_options: int) -> int | None:
    """A debater's option: the first one it names (it states its side up front)."""
    options = stated_options(text, n_options)
    return options[0] if options else None


def decision(text: str, n_options: int) -> int | None:
    """The judge's option: the last one it names (its conclusion)."""
    options = stated_options(text, n_options)
    return options[-1] if options else None
