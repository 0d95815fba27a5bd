"""Multiple-choice questions' option labels, option lists and `###X###` answer markers, shared by
the envs that pose them: LEXam (`lexrl.envs.lexam`, whose reward scores the marker) and debate
(`lexrl.envs.debate`, whose debaters and judge name options by it).

The format is LEXam's (Fan et al. 2025, "LEXam: Benchmarking Legal Reasoning on 340 Law Exams",
arXiv:2505.12864, App. E.4): options appended to the question as "\\nA. <choice>", and an answer
written as `###C###`, the LAST valid marker of a reply being its answer.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

_LETTERS = string.ascii_uppercase
# A lookahead finds overlapping candidates, so in "###A###B###" the marker that ends last (B)
# can win, as a reader of the text would take it.
_MARKER = re.compile(r"(?=###([A-Z]|[0-9]{1,3})###)")


def option_label(i: int, n_options: int) -> str:
    """Label of option `i` (0-based) among `n_options`: "A".."Z" for up to 26 options; above 26
    EVERY option is numbered "1".."n" (the paper: numbers instead of letters above 26 options;
    the authors' `mcq_numbers` variant numbers all options too), so one question never mixes
    letters and numbers."""
    if not 0 <= i < n_options:
        raise ValueError(f"option {i} out of range for {n_options} options")
    return _LETTERS[i] if n_options <= len(_LETTERS) else str(i + 1)


def format_choices(choices: Sequence[str]) -> str:
    """The options as the paper appends them to the question: "\\nA. <choice>" each, in order."""
    return "".join(
        f"\n{option_label(i, len(choices))}. {choice}" for i, choice in enumerate(choices)
    )


def _label_index(label: str, n_options: int) -> int | None:
    if n_options <= len(_LETTERS):
        index = _LETTERS.find(label) if len(label) == 1 else -1
    else:
        # "01" is not how any option is labelled, so it is no answer.
        index = int(label) - 1 if label.isdigit() and str(int(label)) == label else -1
    return index if 0 <= index < n_options else None


def mcq_answers(text: str, n_options: int) -> list[int]:
    """0-based indices of every `###X###` in `text` whose X labels one of `n_options` options
    (see `option_label`), in order of where they end. Everything up to the last `</think>` is
    dropped first, so a reasoning model's scratch pad cannot answer. Never raises on any
    string."""
    answers = []
    for match in _MARKER.finditer(text.rpartition("</think>")[2]):
        index = _label_index(match.group(1), n_options)
        if index is not None:
            answers.append(index)
    return answers


def parse_mcq_answer(text: str, n_options: int) -> int | None:
    """The LAST valid answer marker of `text` (`mcq_answers`) as a 0-based index, or None."""
    answers = mcq_answers(text, n_options)
    return answers[-1] if answers else None
