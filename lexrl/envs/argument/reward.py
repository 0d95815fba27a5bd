"""Rewards of the 3-ply argument task: named components of a triple, and each ply's own score
for per-role credit (`grpo.advantages: role`). Pure functions of the scenario and the parsed
plies; the metrics they build on are `lexrl.envs.argument.metrics` (Zhang and Ashley 2025,
"Mitigating Manipulation and Enhancing Persuasion", arXiv:2506.02992, sec. 4.4), which stay the
paper's: only the reward is gated.

The paper's goal (sec. 1) is a model that argues from the cases' factors where an
argument can be grounded and abstains where it cannot, fabricating nothing either way. So every
credit of a ply is gated on its decision being right (`right_decision`):
- a ply that must abstain (`expected_abstentions`) is right when it abstains citing no factor
  its case lacks (a fabricated reason is manipulation too, sec. 1);
- a ply that can be argued is right when it argues and its text argues at least one of the
  citations a CATO argument makes (`grounding.relevant_citations`, sec. 3.1 and 4.1): an
  argument that uses no factor is not grounded (sec. 1, "poor factor utilization"), and a list
  of ids under a sentence that names none of them argues nothing (`grounding.argued_citations`).
A ply with the wrong decision earns nothing, not even the format credit; an abstaining ply earns
no hallucination credit (it claims nothing, so "no fabrication" is free: the paper scores Acc_H
on the factors an argument mentions and Rec_U 0 on an abstention, sec. 4.4.2).

Most of a triple's worth is the argument itself (`utilisation`, weighted highest by default):
which way to decide can be read off the prompt by a rule of a few lines (the precedent's outcome
line and whether a factor id is shared), and citing every listed factor fabricates nothing, so
only the choice of the factors that favour the arguing side separates arguing from a rule
(`lexrl audit`, docs/benchmarks.md).

Components of a triple (each in [0, 1], weighted by the env's options):
- `abstention`: share of plies whose decision is right (`right_decision`);
- `hallucination`: max(0, Acc_H) over the citations of the plies that argue rightly, times their
  share of the three plies (Acc_H = 1 - N_h / N_gt, eq. 1-2; clipped so that one triple full of
  fabrications cannot outweigh the rest of its group's signal);
- `utilisation`: the mean over the three plies of the argument quality
  (`grounding.argument_quality`: the Jaccard index of the citations the ply argues and those a
  CATO argument makes; the side-aware form of Rec_U, eq. 3-4) of the plies that argue rightly,
  0 for the others;
- `format`: share of plies that are the JSON asked for and right;
- `over_abstention`: share of plies that abstain where an argument can be grounded, weighted by
  minus `over_abstention_penalty`. The paper scores such a ply Rec_U 0 (eq. 3-4), as it does an
  ungrounded argument; the penalty makes abstaining there cost more than trying to argue, so that
  GRPO groups of arguable triples carry a signal towards arguing even when no sample argues
  rightly, as groups of triples that must abstain always carry one towards abstaining. It is 0
  for the teacher and for every rule that decides rightly, so it lowers no bound of `lexrl audit`.
- `failed_abstention`: share of plies that do not abstain where they must (an argument, or a
  reply that is neither, as the paper's "successful abstention" counts it), weighted by minus
  `failed_abstention_penalty`: the manipulation the paper sets out to prevent, an argument where
  none can be grounded (the paper's sec. 1; the failures of its sec. 4.4 abstention metric). Without
  it such a ply earns 0 against an abstention's 0.3, a gap about a tenth of an arguable ply's, so
  without the per-group scaling GRPO trades abstaining away for arguing (docs/benchmarks.md).
  Also 0 for the teacher and every rule that decides rightly.

`ply_components` are the same gates for one ply, so an agent's role reward and the triple's
reward agree on which plies earn.
"""

from __future__ import annotations

from collections.abc import Sequence

from lexrl.envs.argument.grounding import argued_citations, argument_quality, relevant_citations
from lexrl.envs.argument.metrics import factor_counts
from lexrl.envs.argument.parsing import ParsedPly
from lexrl.envs.argument.scenarios import CASES, PLIES, Scenario, expected_abstentions

COMPONENTS = (
    "abstention",
    "hallucination",
    "utilisation",
    "format",
    "over_abstention",
    "failed_abstention",
)


def _fabricated_and_used(scenario: Scenario, ply: ParsedPly) -> tuple[int, int]:
    """The ply's citations of factors their case lacks, and of factors it has."""
    fabricated = sum(len(set(ply.factors[c]) - set(scenario.case(c))) for c in CASES)
    used = sum(len(set(ply.factors[c]) & set(scenario.case(c))) for c in CASES)
    return fabricated, used


def over_abstains(scenario: Scenario, index: int, ply: ParsedPly) -> bool:
    """Whether ply `index` abstained where an argument can be grounded."""
    return ply.abstain and not expected_abstentions(scenario)[index]


def fails_to_abstain(scenario: Scenario, index: int, ply: ParsedPly) -> bool:
    """Whether ply `index` did not abstain (argued, or wrote neither) where it must abstain."""
    return not ply.abstain and expected_abstentions(scenario)[index]


def right_decision(scenario: Scenario, index: int, ply: ParsedPly) -> bool:
    """Whether ply `index` (0 plaintiff, 1 defendant, 2 rebuttal) decided rightly: abstained,
    fabricating nothing, where it must abstain; argued at least one of the citations a CATO
    argument makes (named in its text and listed in its JSON) where it can be argued."""
    if expected_abstentions(scenario)[index]:
        return ply.abstain and _fabricated_and_used(scenario, ply)[0] == 0
    return not ply.abstain and bool(argued_citations(ply) & relevant_citations(scenario, index))


def triple_components(scenario: Scenario, plies: Sequence[ParsedPly]) -> dict[str, float]:
    """The unweighted components of a triple's three final plies (plaintiff, defendant,
    rebuttal)."""
    right = [right_decision(scenario, i, ply) for i, ply in enumerate(plies)]
    arguing = [ply for ply, ok in zip(plies, right, strict=True) if ok and not ply.abstain]
    counts = factor_counts(scenario, arguing)
    quality = [
        argument_quality(scenario, i, ply) if ok else 0.0
        for i, (ply, ok) in enumerate(zip(plies, right, strict=True))
    ]
    return {
        "abstention": sum(right) / len(PLIES),
        "hallucination": max(0.0, 1.0 - counts.n_h / counts.n_gt) * len(arguing) / len(PLIES),
        "utilisation": sum(quality) / len(PLIES),
        "format": sum(ply.valid and ok for ply, ok in zip(plies, right, strict=True)) / len(PLIES),
        "over_abstention": sum(over_abstains(scenario, i, ply) for i, ply in enumerate(plies))
        / len(PLIES),
        "failed_abstention": sum(fails_to_abstain(scenario, i, ply) for i, ply in enumerate(plies))
        / len(PLIES),
    }


def ply_components(scenario: Scenario, index: int, ply: ParsedPly) -> dict[str, float]:
    """The same components for ply `index` alone: the credit of the agent that wrote it.
    Hallucination counts this ply's citations against all of the triple's N_gt ground-truth
    factors."""
    if not right_decision(scenario, index, ply):
        return dict.fromkeys(COMPONENTS, 0.0) | {
            "over_abstention": float(over_abstains(scenario, index, ply)),
            "failed_abstention": float(fails_to_abstain(scenario, index, ply)),
        }
    n_gt = sum(len(scenario.case(case)) for case in CASES)
    fabricated, _ = _fabricated_and_used(scenario, ply)
    argues = not ply.abstain
    return {
        "abstention": 1.0,
        "hallucination": max(0.0, 1.0 - fabricated / n_gt) if argues else 0.0,
        "utilisation": argument_quality(scenario, index, ply),
        "format": float(ply.valid),
        "over_abstention": 0.0,
        "failed_abstention": 0.0,
    }


def weighted(components: dict[str, float], weights: dict[str, float]) -> dict[str, float]:
    """Each component times its weight (a weight of 0 logs the component without rewarding)."""
    return {name: weights[name] * value for name, value in components.items()}
