"""What a ply of the 3-ply argument should claim, and how its claims are checked.

The paper (Zhang and Ashley 2025, "Mitigating Manipulation and Enhancing Persuasion",
arXiv:2506.02992, sec. 3.1 and 4.1) follows HYPO / CATO: an argument analogises the current
case c1 to a precedent won by its side on the factors they share that favour that side, and a
response distinguishes the opponent's precedent by the factors that made it a win for the
opponent and that c1 lacks, or by c1's factors for the responding side that the precedent lacks.
Factor sides therefore matter: a plaintiff who "analogises" on a shared pro-defendant factor
argues the defendant's case. `citation_parts` gives each ply its analogy and its distinction as
the claims that make them, and `relevant_claims` their union.

A ply states its argument as claims (`parsing.Claim`), and `argument_quality` checks each claim
against the cases: a claim earns when it is true and part of the ply's CATO argument, and costs
when it is false (a fabrication, or one half of a claim asserted and denied) or irrelevant. Its
prose is read by no rule: the paper's distiller (an LLM, sec. 4.4) reads it when one is
configured, and `citation_quality` scores the factor lists it returns.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from lexrl.envs.argument.factors import FACTORS
from lexrl.envs.argument.parsing import Claim, ParsedPly, analogy, distinction
from lexrl.envs.argument.scenarios import CASES, Scenario, expected_abstentions

Citation = tuple[str, str]
"""(case, factor id): "F4 cited for c2"."""


def _side(ids: Iterable[str], side: str) -> set[str]:
    return {f for f in ids if f in FACTORS and FACTORS[f].favors == side}


def _shared(s: Scenario, precedent: str, side: str) -> set[Claim]:
    """c1 analogised to `precedent` on their shared factors favouring `side`."""
    return {analogy(f, "c1", precedent) for f in _side(set(s.c1) & set(s.case(precedent)), side)}


def _distinguished(s: Scenario, precedent: str, winner: str) -> set[Claim]:
    """`precedent` (won by `winner`) distinguished from c1: its `winner` factors c1 lacks, and
    c1's factors for the other side that it lacks."""
    other = "D" if winner == "P" else "P"
    case = set(s.case(precedent))
    return {distinction(f, precedent, "c1") for f in _side(case - set(s.c1), winner)} | {
        distinction(f, "c1", precedent) for f in _side(set(s.c1) - case, other)
    }


def claim_is_true(s: Scenario, claim: Claim) -> bool:
    """Whether the cases bear the claim out: both cases have an analogy's factor; the first case
    has a distinction's factor and the second lacks it."""
    first, second = (claim.factor in s.case(case) for case in claim.cases)
    return first and (second if claim.kind == "analogy" else not second)


def citations(claims: Iterable[Claim]) -> set[Citation]:
    """The (case, factor) pairs claims cite: an analogy both cases, a distinction the case that
    has the factor (what the paper's distiller lists for each case, sec. 4.4)."""
    return {
        (case, claim.factor)
        for claim in claims
        for case in (claim.cases if claim.kind == "analogy" else claim.cases[:1])
    }


@dataclass(frozen=True)
class Part:
    """One part of a ply's CATO argument: the analogy of c1 to `precedent`, or the distinction
    of `precedent` from c1, as the claims that make it."""

    kind: str
    """"analogy" or "distinction"."""
    precedent: str
    claims: frozenset[Claim]

    @property
    def citations(self) -> set[Citation]:
        return citations(self.claims)


def citation_parts(s: Scenario, index: int) -> list[Part]:
    """The parts of a CATO-style ply `index` that claim something (none for a ply that must
    abstain):
    - 0, the plaintiff: the analogy of c1 to c2 on shared pro-plaintiff factors;
    - 1, the defendant: c2 distinguished (when the plaintiff argued from it), and the analogy of
      c1 to c3 on shared pro-defendant factors;
    - 2, the rebuttal: c3 distinguished, and the analogy to c2 reinforced.
    """
    abstains = expected_abstentions(s)
    if abstains[index]:
        return []
    if index == 0:
        parts = [Part("analogy", "c2", frozenset(_shared(s, "c2", "P")))]
    elif index == 1:
        distinguished = set() if abstains[0] else _distinguished(s, "c2", "P")
        parts = [
            Part("distinction", "c2", frozenset(distinguished)),
            Part("analogy", "c3", frozenset(_shared(s, "c3", "D"))),
        ]
    else:
        parts = [
            Part("distinction", "c3", frozenset(_distinguished(s, "c3", "D"))),
            Part("analogy", "c2", frozenset(_shared(s, "c2", "P"))),
        ]
    return [part for part in parts if part.claims]


def relevant_claims(s: Scenario, index: int) -> set[Claim]:
    """Every claim a CATO-style ply `index` makes (`citation_parts`); empty for a ply that must
    abstain."""
    return {claim for part in citation_parts(s, index) for claim in part.claims}


def relevant_citations(s: Scenario, index: int) -> set[Citation]:
    """Every citation a CATO-style ply `index` makes; empty for a ply that must abstain."""
    return citations(relevant_claims(s, index))


def listed_citations(ply: ParsedPly) -> set[Citation]:
    """Every (case, factor) the ply cites (`ParsedPly.factors`)."""
    return {(case, f) for case in CASES for f in ply.factors[case]}


def fabrications(s: Scenario, ply: ParsedPly) -> list[str]:
    """What the ply claims that the cases do not bear out ("F4 shared by c1 and c2"); for a ply
    read by a distiller (no claims), each factor cited for a case that lacks it ("F4 for c2")."""
    if ply.claims is None:
        return sorted(
            f"{f} for {case}" for case, f in listed_citations(ply) if f not in s.case(case)
        )
    return [str(claim) for claim in ply.claims if not claim_is_true(s, claim)]


def argues_grounded(s: Scenario, index: int, ply: ParsedPly) -> bool:
    """Whether ply `index` argues, making at least one claim of its CATO argument (for a ply
    read by a distiller: citing at least one citation of it)."""
    if ply.abstain:
        return False
    if ply.claims is None:
        return bool(listed_citations(ply) & relevant_citations(s, index))
    return bool(set(ply.claims) & relevant_claims(s, index))


def argument_quality(s: Scenario, index: int, ply: ParsedPly) -> float:
    """The square of the worst part's recall, minus the claims outside the argument per claim
    of it, clipped to [0, 1], of ply `index`:
    (min over parts of |claimed part| / |part|)^2 - |claims - relevant| / |relevant|.
    1 for a ply that makes every analogy and distinction of its CATO argument (`citation_parts`)
    and claims nothing else. A ply that skips a part (analogies without the distinction) earns
    0; one that makes half of a part, a quarter (the square: linear, a rule that writes each
    part one claim deep earned 66% of the teacher's reward on the demo's triples, squared 53%,
    while a policy that makes more of each part still earns more for it); each claim outside the argument costs as much as a relevant one earns: a false claim is
    a fabrication (an analogy on a factor one case lacks, a distinction the cases contradict, a
    claim asserted and denied), a true but irrelevant one argues the opponent's case or nothing
    (Zhang and Ashley 2025, sec. 3.1: the analyst rejects misattributed factors). A ply read by
    a distiller is scored the same way on its citations (`citation_quality`). 0 for an
    abstention or a ply that must abstain."""
    parts = citation_parts(s, index)
    if ply.abstain or not parts:
        return 0.0
    if ply.claims is None:
        return citation_quality(parts, listed_citations(ply))
    claims, relevant = set(ply.claims), relevant_claims(s, index)
    recall = min(len(claims & part.claims) / len(part.claims) for part in parts)
    return max(0.0, recall**2 - len(claims - relevant) / len(relevant))


def citation_quality(parts: list[Part], cited: set[Citation]) -> float:
    """`argument_quality` on (case, factor) citations, as the paper's distiller lists them
    (sec. 4.4): the square of the least share of a part's citations cited, minus the citations
    outside every part per citation of them, clipped to [0, 1]."""
    relevant = {citation for part in parts for citation in part.citations}
    recall = min(len(cited & part.citations) / len(part.citations) for part in parts)
    return max(0.0, recall**2 - len(cited - relevant) / len(relevant))
