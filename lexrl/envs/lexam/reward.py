"""LEXam MCQ reward components and the authors' parity scorer (Fan et al. 2025, "LEXam:
Benchmarking Legal Reasoning on 340 Law Exams", arXiv:2505.12864, sec. 3.2, App. E.4). Option
labels and answer markers are parsed by `lexrl.envs.mcq`, which the debate env shares.

The examinee ends its reply with `Correct Answer: ###C###`; the LAST valid marker is its answer
and a reply without one is wrong. The env's reward is `total(components, format_weight)`:
`correct + format_weight * format`, where `format` pays an answer only as far as it beats a
guess and counts a missing marker as wrong (`mcq_reward`), so neither a constant letter nor
silence can live on it; a weight of 0 is the paper's accuracy alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from lexrl.envs.mcq import parse_mcq_answer

_PARITY_MARKER = re.compile(r"###([ABCD])###")


def parse_mcq_answer_lexam_parity(text: str) -> int | None:
    """The LEXam authors' MCQ scorer, for parity with their numbers: the LAST match of
    `###([ABCD])###` anywhere in `text` (no `</think>` handling: their scorer is handed the
    final answer only) as 0..3, None (= wrong) without a match. Four options only."""
    matches = _PARITY_MARKER.findall(text)
    return "ABCD".index(matches[-1]) if matches else None


def mcq_reward(
    text: str, gold: int, n_options: int, chance_normalised: bool = False
) -> dict[str, float]:
    """Named reward components of one reply.

    `correct`: the paper's accuracy, 1.0 when the parsed answer is `gold`, else 0.0 (no marker
    is wrong, as in the authors' scorer). With `chance_normalised`, (acc - 1/k) / (1 - 1/k) for k =
    `n_options`: 1 when right, -1/(k-1) when wrong, so guessing earns 0 in expectation whatever
    the option count (for mixing mcq_4 .. mcq_32 in one run).

    `format`: the answer's chance-normalised accuracy, 1.0 when right and -1/(k-1) when wrong,
    a reply without a marker counted as wrong (-1/(k-1)), as the authors' scorer counts it. A
    flat credit for any marker paid a constant letter `format_weight` on every question: on the
    CPU demo (weight 0.5) half the teacher's reward, and the demo's GRPO runs settled on one
    letter (docs/benchmarks.md). LEXam balances the gold labels by permutation, so a random
    predictor's accuracy is 1/k (Fan et al. 2025, sec. 3.2, "Evaluation Metric"); a guess,
    constant or random, thus earns 0 from `format` in expectation and only an answer better than
    chance earns more. An unmarked reply earns what a marked wrong one does, never more: scoring
    it 0 paid a model below chance to stop answering (the CPU demo stopped marking after one
    update, docs/envs/lexam.md), and now not answering is the worst a reply can do.
    """
    if n_options < 2 or not 0 <= gold < n_options:
        raise ValueError(f"gold {gold} / n_options {n_options}: need 0 <= gold < n_options, n >= 2")
    predicted = parse_mcq_answer(text, n_options)
    right = float(predicted == gold)
    chance = 1.0 / n_options
    beyond_chance = (right - chance) / (1.0 - chance)
    return {
        "correct": beyond_chance if chance_normalised else right,
        "format": beyond_chance,
    }


def total(components: Mapping[str, float], format_weight: float) -> float:
    """The env's scalar reward: `correct + format_weight * format` (`mcq_reward`)."""
    return components["correct"] + format_weight * components["format"]
