"""The rubric judge of open-ended OAB answers (the MAD_legal technical report, "Multi-Agent
Debate for Brazilian Legal Reasoning" (2024), sec. 5.2.3): correctness 0-4, reasoning 0-3 and
citations 0-4 against the reference answer, scored (sum) / 11.

The judge's prompt is `prompts/rubric_judge_system.txt` and `prompts/rubric_judge_user.txt`
(task, question, reference, candidate answer and criteria in XML tags, as the report). Its reply
ends with one whole number per criterion, either as tags or as lines:

    <correctness>3</correctness>         Correctness: 3
    <reasoning>2</reasoning>             **Reasoning (0-3):** 2/3
    <citations>4</citations>             - Citations = 4 out of 4

Everything up to the last `</think>` is dropped first; the last score of a criterion in the
rest wins, whichever way it is written. A missing, fractional or out-of-range score raises
JudgeParseError naming the criterion, which `JudgeClient` re-asks with, followed by
`RUBRIC_FORMAT`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lexrl.envs.base import prompt_text
from lexrl.rewards.judge import JudgeParseError, strip_thinking


@dataclass(frozen=True)
class Criterion:
    name: str
    """The tag / line label of the criterion in the judge's reply."""
    maximum: int
    """Scores run from 0 to this."""
    levels: tuple[str, ...]
    """What each score from 0 to `maximum` means (the report's sec. 5.2.3), as the prompt says."""


RUBRIC = (
    Criterion(
        "correctness",
        4,
        (
            "Completely incorrect or irrelevant",
            "Partially correct with serious errors",
            "Correct but incomplete",
            "Correct and complete",
            "Exceptionally well-founded",
        ),
    ),
    Criterion(
        "reasoning",
        3,
        (
            "No legal logic or incoherent",
            "Basic reasoning present",
            "Clear and structured reasoning",
            "Excellent reasoning (e.g., IRAC-like structure)",
        ),
    ),
    Criterion(
        "citations",
        4,
        (
            "No citation or completely wrong",
            "Correct law/code but wrong article",
            "Related/nearby article cited",
            "Correct article but incomplete (missing paragraphs/incisos)",
            "Perfect and complete citation",
        ),
    ),
)
MAX_TOTAL = sum(criterion.maximum for criterion in RUBRIC)

RUBRIC_FORMAT = (
    "End your reply with the three scores as whole numbers in tags: "
    "<correctness>0-4</correctness> <reasoning>0-3</reasoning> <citations>0-4</citations>."
)

# A sign and a fraction are read so that "-1" and "2.5" are refused by name rather than missed;
# at most nine digits, so int() never meets an absurd length.
_VALUE = r"(?P<value>-?\d{1,9}(?:[.,]\d{1,9})?)(?!\d)(?:\s*(?:/|out\s+of|of)\s*(?P<of>\d{1,9}))?"


def _patterns(name: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    tag = re.compile(rf"<\s*{name}\s*>\s*{_VALUE}\s*<\s*/\s*{name}\s*>", re.IGNORECASE)
    # Markdown around the label ("**Reasoning:**", "- Citations (0-4) =") is allowed.
    line = re.compile(
        rf"^[\s*#>_-]*{name}[\s*_]*(?:\(\s*0\s*-\s*\d+\s*\)[\s*_]*)?[:=][\s*_]*{_VALUE}",
        re.IGNORECASE | re.MULTILINE,
    )
    return tag, line


_PATTERNS = {criterion.name: _patterns(criterion.name) for criterion in RUBRIC}


@dataclass(frozen=True)
class RubricScore:
    correctness: int
    """0-4."""
    reasoning: int
    """0-3."""
    citations: int
    """0-4."""

    @property
    def total(self) -> int:
        """0-11."""
        return self.correctness + self.reasoning + self.citations

    @property
    def score(self) -> float:
        """The report's normalised score, total / 11, in [0, 1]."""
        return self.total / MAX_TOTAL


def parse_rubric(reply: str) -> RubricScore:
    """The three criterion scores of a judge's reply (format in the module docstring).

    Raises JudgeParseError (and nothing else) naming every criterion that is missing, not a
    whole number, out of its range, or given out of another maximum ("Reasoning: 3/4").
    """
    text = strip_thinking(reply)
    scores: dict[str, int] = {}
    problems: list[str] = []
    missing: list[str] = []
    for criterion in RUBRIC:
        matches = [m for pattern in _PATTERNS[criterion.name] for m in pattern.finditer(text)]
        if not matches:
            missing.append(criterion.name)
            continue
        last = max(matches, key=lambda match: match.start())
        value, out_of = last.group("value"), last.group("of")
        name, maximum = criterion.name, criterion.maximum
        if out_of is not None and int(out_of) != maximum:
            problems.append(f"{name} is scored out of {maximum}, not {out_of}")
        elif not value.lstrip("-").isdigit():
            problems.append(f"{name} must be a whole number from 0 to {maximum}, not {value}")
        elif not 0 <= int(value) <= maximum:
            problems.append(f"{name} is {value}, outside 0-{maximum}")
        else:
            scores[criterion.name] = int(value)
    if missing:
        problems.insert(0, "no score for " + ", ".join(missing))
    if problems:
        raise JudgeParseError("; ".join(problems))
    return RubricScore(**scores)


def _prompt(name: str) -> str:
    return prompt_text("lexrl.envs.debate", name)


def rubric_messages(question: str, reference: str, answer: str) -> list[dict[str, str]]:
    """The judge's [system, user] messages for one candidate answer."""
    user = _prompt("rubric_judge_user").format(
        question=question.strip(), reference=reference.strip(), answer=answer.strip()
    )
    return [
        {"role": "system", "content": _prompt("rubric_judge_system")},
        {"role": "user", "content": user},
    ]
