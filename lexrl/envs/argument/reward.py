"""Rewards of the 3-ply argument task: named components of a triple, and each ply's own score
for per-role credit (`grpo.advantages: role`). Pure functions of the scenario and the parsed
plies; the metrics they build on are `lexrl.envs.argument.metrics` (seed 004 sec. 4.4), which
stay the paper's: only the reward is gated.

The paper's goal (seed 004 sec. 1) is a model that argues from the cases' factors where an
argument can be grounded and abstains where it cannot, fabricating nothing either way. So every
credit of a ply is gated on its decision being right (`right_decision`):
- a ply that must abstain (`expected_abstentions`) is right when it abstains citing no factor
  its case lacks (a fabricated reason is manipulation too, sec. 1);
- a ply that can be argued is right when it argues and cites at least one factor its case has:
  an argument that uses no factor is not grounded (sec. 1, "poor factor utilization"), and an
  abstention there leaves the client without the argument the cases support.
A ply with the wrong decision earns nothing, not even the format credit: a content-free policy
(always abstain, always argue) then earns only on the triples its one decision fits. And an
abstaining ply earns no hallucination credit: it claims nothing, so "no fabrication" is free
(the paper scores Acc_H on the factors an argument mentions, and Rec_U 0 on an abstention,
sec. 4.4.2). A triple that can be argued is therefore worth more to the teacher (abstention,
hallucination, utilisation, format) than one that must be abstained on (abstention, format):
with the default weights and the test split's equal kinds, always abstaining earns 47% of the
teacher's reward and always arguing with every factor cited 53% (`lexrl audit`,
docs/benchmarks.md), where the ungated reward gave them 79% and 72%.

Components of a triple (each in [0, 1], weighted by the env's options):
- `abstention`: share of plies whose decision is right (`right_decision`);
- `hallucination`: max(0, Acc_H) over the citations of the plies that argue rightly, times their
  share of the three plies (Acc_H = 1 - N_h / N_gt, eq. 1-2; clipped so that one triple full of
  fabrications cannot outweigh the rest of its group's signal);
- `utilisation`: Rec_U = N_util / N_gt (eq. 3-4) over the citations of the plies that argue
  rightly, on triples whose every ply can be argued; 0 on the others (where abstention is the
  goal, so using factors earns nothing);
- `format`: share of plies that are the JSON asked for and right.

`ply_components` are the same gates for one ply, so an agent's role reward and the triple's
reward agree on which plies earn.
"""

from __future__ import annotations

from collections.abc import Sequence

from lexrl.envs.argument.metrics import factor_counts
from lexrl.envs.argument.parsing import ParsedPly
from lexrl.envs.argument.scenarios import CASES, PLIES, Scenario, expected_abstentions

COMPONENTS = ("abstention", "hallucination", "utilisation", "format")


def _fabricated_and_used(scenario: Scenario, ply: ParsedPly) -> tuple[int, int]:
    """The ply's citations of factors their case lacks, and of factors it has."""
    fabricated = sum(len(set(ply.factors[c]) - set(scenario.case(c))) for c in CASES)
    used = sum(len(set(ply.factors[c]) & set(scenario.case(c))) for c in CASES)
    return fabricated, used


def right_decision(scenario: Scenario, index: int, ply: ParsedPly) -> bool:
    """Whether ply `index` (0 plaintiff, 1 defendant, 2 rebuttal) decided rightly: abstained,
    fabricating nothing, where it must abstain; argued from at least one real factor where it
    can be argued."""
    fabricated, used = _fabricated_and_used(scenario, ply)
    if expected_abstentions(scenario)[index]:
        return ply.abstain and fabricated == 0
    return not ply.abstain and used > 0


def triple_components(scenario: Scenario, plies: Sequence[ParsedPly]) -> dict[str, float]:
    """The unweighted components of a triple's three final plies (plaintiff, defendant,
    rebuttal)."""
    right = [right_decision(scenario, i, ply) for i, ply in enumerate(plies)]
    arguing = [ply for ply, ok in zip(plies, right, strict=True) if ok and not ply.abstain]
    arguable = not any(expected_abstentions(scenario))
    counts = factor_counts(scenario, arguing)
    return {
        "abstention": sum(right) / len(PLIES),
        "hallucination": max(0.0, 1.0 - counts.n_h / counts.n_gt) * len(arguing) / len(PLIES),
        "utilisation": counts.n_util / counts.n_gt if arguable else 0.0,
        "format": sum(ply.valid and ok for ply, ok in zip(plies, right, strict=True)) / len(PLIES),
    }


def ply_components(scenario: Scenario, index: int, ply: ParsedPly) -> dict[str, float]:
    """The same components for ply `index` alone: the credit of the agent that wrote it.
    Hallucination and utilisation count this ply's citations against all of the triple's N_gt
    ground-truth factors."""
    if not right_decision(scenario, index, ply):
        return dict.fromkeys(COMPONENTS, 0.0)
    n_gt = sum(len(scenario.case(case)) for case in CASES)
    fabricated, used = _fabricated_and_used(scenario, ply)
    argues = not ply.abstain
    return {
        "abstention": 1.0,
        "hallucination": max(0.0, 1.0 - fabricated / n_gt) if argues else 0.0,
        "utilisation": used / n_gt if argues else 0.0,
        "format": float(ply.valid),
    }


def weighted(components: dict[str, float], weights: dict[str, float]) -> dict[str, float]:
    """Each component times its weight (a weight of 0 logs the component without rewarding)."""
    return {name: weights[name] * value for name, value in components.items()}
