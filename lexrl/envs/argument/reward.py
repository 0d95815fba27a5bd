"""Rewards of the 3-ply argument task: named components of a triple, and each ply's own score
for per-role credit (`grpo.advantages: role`). Pure functions of the scenario and the parsed
plies; the metrics they build on are `lexrl.envs.argument.metrics` (Zhang and Ashley 2025,
"Mitigating Manipulation and Enhancing Persuasion", arXiv:2506.02992, sec. 4.4), which stay the
paper's: only the reward is gated.

The paper's goal (sec. 1) is a model that argues from the cases' factors where an argument can
be grounded and abstains where it cannot, fabricating nothing either way. Each part of that task
counts, and a policy that skips any one of them (deciding, abstaining where it must, arguing
where it can, claiming with the right side, comparing the cases, making one ply's distinction)
earns at most 60% of the teacher's reward at the default weights (`lexrl audit`):
- a ply that must abstain (`expected_abstentions`) is right when it abstains claiming nothing
  false (a fabricated reason is manipulation too, sec. 1);
- a ply that can be argued is right when it argues, making at least one true claim of its CATO
  argument (`grounding.citation_parts`: an analogy of c1 and the precedent on a shared factor of
  its side, a distinction of one from the other, sec. 3.1 and 4.1);
- the argument of a triple is as good as its weakest ply (`utilisation`): the paper scores the
  3-ply argument as one (its successful abstention, sec. 4.4, is all three plies or nothing),
  and a rebuttal that abstains, or a counterargument without its distinction, leaves the
  argument unfinished however good the other plies are.
A ply with the wrong decision earns nothing, not even the format credit; an abstaining ply earns
no hallucination credit (it claims nothing, so "no fabrication" is free: the paper scores Acc_H
on the factors an argument mentions and Rec_U 0 on an abstention, sec. 4.4.2).

Components of a triple (each in [0, 1] or a penalty share, weighted by the env's options):
- `abstention`: share of the three plies that must abstain and do (0 on an arguable triple);
- `utilisation`: the least `grounding.argument_quality` over the plies that can be argued (each
  ply's worst part's recall, minus its claims outside the CATO argument: the side-aware form of
  Rec_U, eq. 3-4), 0 for a ply with the wrong decision, times the number of parts the triple's
  argument has (`argument_parts`, 3 to 5: the analogies and distinctions of the three plies,
  sec. 3.1); 0 on a triple with no such ply. Every part counts where it exists: a triple whose
  defendant and rebuttal each have a distinction to make is worth more than one whose plies
  only analogise, so a policy that skips one ply's distinction loses most where it matters;
- `hallucination`: max(0, Acc_H) over the citations of the plies that argue rightly, times their
  share of the three plies (Acc_H = 1 - N_h / N_gt, eq. 1-2; clipped so that one triple full of
  fabrications cannot outweigh the rest of its group's signal);
- `format`: share of plies that are the JSON asked for and right;
- `over_abstention`: share of plies that abstain where an argument can be grounded, or say
  nothing there (no JSON, no claim: a reply that is neither, as `failed_abstention` counts it), weighted by minus `over_abstention_penalty` (the paper scores such a ply Rec_U 0,
  eq. 3-4). Without the second half an unparsable ply on an arguable triple earned 0, more than
  a parsed abstention's -0.5 on the CPU demo: no reply is paid to stop answering;
- `failed_abstention`: share of plies that do not abstain where they must (an argument, or a
  reply that is neither, as the paper's "successful abstention" counts it), weighted by minus
  `failed_abstention_penalty`: the manipulation the paper sets out to prevent (sec. 1).
At the default weights a triple whose plies must all abstain is worth what one part of an argued
triple is worth (`abstention_weight` 2, `utilisation_weight` 2 a part), and arguing all three of
its plies costs that and as much again (`failed_abstention_penalty` 2). A policy that decides
every triple rightly and skips one ply's distinction keeps the abstention credit and the
analogy-only triples' credit, about 57% of the teacher's reward on the paper's held-out triples
(`lexrl audit`).

`ply_components` are the same gates for one ply (its own quality for `utilisation`), so an
agent's role reward and the triple's reward agree on which plies earn.
"""

from __future__ import annotations

from collections.abc import Sequence

from lexrl.envs.argument.grounding import (
    argues_grounded,
    argument_quality,
    citation_parts,
    fabrications,
)
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


def argument_parts(scenario: Scenario) -> int:
    """How many parts the triple's 3-ply argument has (each ply's analogy and distinction that
    claim something, `grounding.citation_parts`): 3 to 5 on an arguable triple, 0 on one whose
    plies must all abstain."""
    return sum(len(citation_parts(scenario, index)) for index in range(len(PLIES)))


def has_every_distinction(scenario: Scenario) -> bool:
    """Whether the defendant and the rebuttal each have a distinction to make (a third of the
    paper's arguable held-out triples)."""
    return all(
        any(part.kind == "distinction" for part in citation_parts(scenario, index))
        for index in (1, 2)
    )


def says_nothing(ply: ParsedPly) -> bool:
    """Whether the ply neither abstains nor claims anything (no JSON, no claim; for a ply read
    by a distiller, no prose)."""
    if ply.abstain:
        return False
    return not ply.argument.strip() if ply.claims is None else not ply.claims


def over_abstains(scenario: Scenario, index: int, ply: ParsedPly) -> bool:
    """Whether ply `index` did not argue where an argument can be grounded: it abstained, or
    said nothing (`says_nothing`), which must not earn more than a wrong abstention."""
    return (ply.abstain or says_nothing(ply)) and not expected_abstentions(scenario)[index]


def fails_to_abstain(scenario: Scenario, index: int, ply: ParsedPly) -> bool:
    """Whether ply `index` did not abstain (argued, or wrote neither) where it must abstain."""
    return not ply.abstain and expected_abstentions(scenario)[index]


def right_decision(scenario: Scenario, index: int, ply: ParsedPly) -> bool:
    """Whether ply `index` (0 plaintiff, 1 defendant, 2 rebuttal) decided rightly: abstained,
    claiming nothing false, where it must abstain; argued at least one claim of its CATO
    argument where it can be argued."""
    if expected_abstentions(scenario)[index]:
        return ply.abstain and not fabrications(scenario, ply)
    return argues_grounded(scenario, index, ply)


def triple_components(scenario: Scenario, plies: Sequence[ParsedPly]) -> dict[str, float]:
    """The unweighted components of a triple's three final plies (plaintiff, defendant,
    rebuttal)."""
    must = expected_abstentions(scenario)
    right = [right_decision(scenario, i, ply) for i, ply in enumerate(plies)]
    arguing = [ply for ply, ok in zip(plies, right, strict=True) if ok and not ply.abstain]
    counts = factor_counts(scenario, arguing)
    quality = [
        argument_quality(scenario, i, ply) if ok else 0.0
        for i, (ply, ok, owed) in enumerate(zip(plies, right, must, strict=True))
        if not owed
    ]
    return {
        "abstention": sum(ok and owed for ok, owed in zip(right, must, strict=True)) / len(PLIES),
        "hallucination": max(0.0, 1.0 - counts.n_h / counts.n_gt) * len(arguing) / len(PLIES),
        "utilisation": min(quality, default=0.0) * argument_parts(scenario),
        "format": sum(ply.valid and ok for ply, ok in zip(plies, right, strict=True)) / len(PLIES),
        "over_abstention": sum(over_abstains(scenario, i, ply) for i, ply in enumerate(plies))
        / len(PLIES),
        "failed_abstention": sum(fails_to_abstain(scenario, i, ply) for i, ply in enumerate(plies))
        / len(PLIES),
    }


def ply_components(scenario: Scenario, index: int, ply: ParsedPly) -> dict[str, float]:
    """The same components for ply `index` alone: the credit of the agent that wrote it
    (`utilisation` its quality times its own parts). Hallucination counts this ply's citations
    against all of the triple's N_gt ground-truth factors."""
    if not right_decision(scenario, index, ply):
        return dict.fromkeys(COMPONENTS, 0.0) | {
            "over_abstention": float(over_abstains(scenario, index, ply)),
            "failed_abstention": float(fails_to_abstain(scenario, index, ply)),
        }
    n_gt = sum(len(scenario.case(case)) for case in CASES)
    fabricated = sum(len(set(ply.factors[c]) - set(scenario.case(c))) for c in CASES)
    argues = not ply.abstain
    return {
        "abstention": float(not argues),
        "hallucination": max(0.0, 1.0 - fabricated / n_gt) if argues else 0.0,
        "utilisation": argument_quality(scenario, index, ply)
        * len(citation_parts(scenario, index)),
        "format": float(ply.valid),
        "over_abstention": 0.0,
        "failed_abstention": 0.0,
    }


def task_score(scenario: Scenario, plies: Sequence[ParsedPly]) -> float:
    """The triple done as the task asks, in [0, 1]: the least score of its plies, where a ply
    that must abstain scores 1 when it abstains rightly and a ply that can be argued scores its
    `argument_quality` when its decision is right, else 0. So a triple whose plies must abstain
    scores 1 only when all three do (the paper's successful abstention, Zhang and Ashley 2025,
    sec. 4.4), and an arguable one the quality of its weakest ply."""
    scores = [
        (1.0 if owed else argument_quality(scenario, i, ply))
        if right_decision(scenario, i, ply)
        else 0.0
        for i, (ply, owed) in enumerate(zip(plies, expected_abstentions(scenario), strict=True))
    ]
    return min(scores)


def weighted(components: dict[str, float], weights: dict[str, float]) -> dict[str, float]:
    """Each component times its weight (a weight of 0 logs the component without rewarding)."""
    return {name: weights[name] * value for name, value in components.items()}
