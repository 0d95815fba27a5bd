"""Rewards of the 3-ply argument task: named components of a triple, and each ply's own score
for per-role credit (`grpo.advantages: role`). Pure functions of the scenario and the parsed
plies; the metrics they build on are `lexrl.envs.argument.metrics` (seed 004 sec. 4.4).

Components of a triple (each in [0, 1], weighted by the env's options):
- `abstention`: share of plies that abstain exactly where they cannot be grounded;
- `hallucination`: max(0, Acc_H), Acc_H = 1 - N_h / N_gt (eq. 1-2; clipped so that one triple
  full of fabrications cannot outweigh the rest of its group's signal);
- `utilisation`: Rec_U = N_util / N_gt (eq. 3-4) on triples whose every ply can be argued, 0 on
  the others (where abstention is the goal, so using factors earns nothing);
- `format`: share of plies that are the JSON asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

from lexrl.envs.argument.metrics import (
    abstention_accuracy,
    format_validity,
    hallucination_accuracy,
    utilisation_recall,
)
from lexrl.envs.argument.parsing import ParsedPly
from lexrl.envs.argument.scenarios import CASES, Scenario, expected_abstentions

COMPONENTS = ("abstention", "hallucination", "utilisation", "format")


def triple_components(scenario: Scenario, plies: Sequence[ParsedPly]) -> dict[str, float]:
    """The unweighted components of a triple's three final plies (plaintiff, defendant,
    rebuttal)."""
    arguable = not any(expected_abstentions(scenario))
    return {
        "abstention": abstention_accuracy(scenario, plies),
        "hallucination": max(0.0, hallucination_accuracy(scenario, plies)),
        "utilisation": utilisation_recall(scenario, plies) if arguable else 0.0,
        "format": format_validity(scenario, plies),
    }


def ply_components(scenario: Scenario, index: int, ply: ParsedPly) -> dict[str, float]:
    """The same components for ply `index` (0 plaintiff, 1 defendant, 2 rebuttal) alone: the
    credit of the agent that wrote it. Hallucination and utilisation count this ply's
    citations against all of the triple's N_gt ground-truth factors."""
    n_gt = sum(len(scenario.case(case)) for case in CASES)
    fabricated = sum(len(set(ply.factors[c]) - set(scenario.case(c))) for c in CASES)
    used = sum(len(set(ply.factors[c]) & set(scenario.case(c))) for c in CASES)
    must_abstain = expected_abstentions(scenario)[index]
    return {
        "abstention": float(ply.abstain == must_abstain),
        "hallucination": max(0.0, 1.0 - fabricated / n_gt),
        "utilisation": used / n_gt if not must_abstain and not ply.abstain else 0.0,
        "format": float(ply.valid),
    }


def weighted(components: dict[str, float], weights: dict[str, float]) -> dict[str, float]:
    """Each component times its weight (a weight of 0 logs the component without rewarding)."""
    return {name: weights[name] * value for name, value in components.items()}
