"""Debate rewards (the MAD_legal technical report, "Multi-Agent Debate for Brazilian Legal
Reasoning" (2024)): the judge's final answer against the gold.

Multiple choice. Components of the episode reward, already weighted:
- `correct`: 1 when the judge's letter is the gold one (the report's sec. 5.1, exact match);
- `format`: `format_weight` x the share of the policy's letter-bearing turns (the openings of
  the debaters it plays, and its judgment) that name an option (`parsing`);
- `invalid`: `-invalid_penalty` when debater Y, re-asked once, still argued no option other than
  X's (a Y that agrees with X would make the debate moot; the report's sec. 3.1).

`cooperative` mode rewards every role with that sum (the paper's objective: the right final
answer). `adversarial` mode gives each role its own reward (`adversarial_role_rewards`), used
with `grpo.advantages: role`.

Open-ended (OAB): `rubric` (`rubric_weight` x the rubric judge's (correctness + reasoning +
citations) / 11) and `citation_f1` (`citation_weight` x the F1 of the answer's citations against
the reference's), the report's sec. 5.2.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class McqOutcome:
    """The options of one multiple-choice debate, as 0-based indices (None: none named)."""

    gold: int
    judge: int | None
    x: int | None = None
    """Debater X's opening position (None in the single-agent system)."""
    y: int | None = None
    """Debater Y's opening position after its re-ask; None when it named no option, or X's."""
    y_invalid: bool = False
    """Y still argued X's option (or none) after the re-ask."""


def mcq_components(
    outcome: McqOutcome, parsed: list[bool], format_weight: float, invalid_penalty: float
) -> dict[str, float]:
    """The weighted components of the episode reward; `parsed` holds, per letter-bearing turn
    the policy wrote, whether its letter parsed (empty: no such turn, format 0)."""
    share = sum(parsed) / len(parsed) if parsed else 0.0
    return {
        "correct": float(outcome.judge == outcome.gold),
        "format": format_weight * share,
        "invalid": -invalid_penalty * float(outcome.y_invalid),
    }


def adversarial_role_rewards(
    outcome: McqOutcome,
    parsed: dict[str, bool],
    format_weight: float,
    invalid_penalty: float,
) -> dict[str, float]:
    """Each role's own reward in self-play: debater X and the judge earn 1 for a correct final
    answer, debater Y earns 1 when the judge adopts Y's (valid) letter, minus `invalid_penalty`
    when its action stayed invalid; each role adds `format_weight` when its own letter parsed
    (`parsed[role]`; a role missing there wrote no letter-bearing turn)."""
    correct = float(outcome.judge == outcome.gold)
    adopted = float(outcome.y is not None and outcome.judge == outcome.y)
    base = {
        "debater_x": correct,
        "debater_y": adopted - invalid_penalty * float(outcome.y_invalid),
        "judge": correct,
    }
    return {
        role: value + format_weight * float(parsed.get(role, False)) for role, value in base.items()
    }


def debate_metrics(outcome: McqOutcome) -> dict[str, float]:
    """Per-episode numbers logged as env/<name>: final accuracy, whether the judge's letter
    parsed, X's accuracy, whether Y's action was valid, and whether the judge sided with X / Y."""
    metrics = {
        "accuracy": float(outcome.judge == outcome.gold),
        "parsed": float(outcome.judge is not None),
    }
    metrics["x_accuracy"] = float(outcome.x == outcome.gold)
    metrics["y_valid"] = float(not outcome.y_invalid)
    metrics["judge_follows_x"] = float(outcome.x is not None and outcome.judge == outcome.x)
    metrics["judge_follows_y"] = float(outcome.y is not None and outcome.judge == outcome.y)
    return metrics
