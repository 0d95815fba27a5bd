"""What a ply of the 3-ply argument should cite, and what its text really argues.

The paper (Zhang and Ashley 2025, "Mitigating Manipulation and Enhancing Persuasion",
arXiv:2506.02992, sec. 3.1 and 4.1) follows HYPO / CATO: an argument analogises the current
case c1 to a precedent won by its side on the factors they share that favour that side, and a
response distinguishes the opponent's precedent by the factors that made it a win for the
opponent and that c1 lacks, or by c1's factors for the responding side that the precedent lacks.
Factor sides therefore matter: a plaintiff who "analogises" on a shared pro-defendant factor
argues the defendant's case. `relevant_citations` is that set for each ply, as (case, factor)
pairs; `argument_quality` scores a ply's citations against it, each citation outside the set
cancelling one inside it.

The paper extracts the factors an argument uses from its text with an LLM (sec. 4.4). For a
verifiable reward each ply also lists its citations per case in JSON, but a list under a fixed
sentence argues nothing: a citation counts only when the argument's text names the factor too,
by id ("F4") or by name ("Agreed-not-to-disclose"), which `named_factors` reads
deterministically (`argued_citations`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from lexrl.envs.argument.factors import FACTORS
from lexrl.envs.argument.parsing import ParsedPly
from lexrl.envs.argument.scenarios import CASES, Scenario, expected_abstentions

Citation = tuple[str, str]
"""(case, factor id): "F4 cited for c2"."""

_ID_MENTION = re.compile(r"\bF\s*0*(\d{1,2})\b", re.IGNORECASE)


def _name_pattern(name: str) -> re.Pattern[str]:
    # "Agreed-not-to-disclose", "agreed not to disclose", "Agreed not-to-disclose"
    words = [re.escape(word) for word in name.split("-")]
    return re.compile(r"\b" + r"[\s\-]+".join(words) + r"\b", re.IGNORECASE)


_NAME_MENTIONS = {factor.id: _name_pattern(factor.name) for factor in FACTORS.values()}


def named_factors(text: str) -> set[str]:
    """The factor ids a text names, by id ("F4", "f 4", "F04") or by CATO name in any case and
    with spaces for hyphens; ids outside the factor list are kept (a cited "F99" is a
    fabrication the metrics must see)."""
    ids = {f"F{int(number)}" for number in _ID_MENTION.findall(text)}
    return ids | {fid for fid, pattern in _NAME_MENTIONS.items() if pattern.search(text)}


def _side(ids: Iterable[str], side: str) -> set[str]:
    return {f for f in ids if f in FACTORS and FACTORS[f].favors == side}


def _pairs(case: str, ids: Iterable[str]) -> set[Citation]:
    return {(case, f) for f in ids}


def _analogy(s: Scenario, precedent: str, side: str) -> set[Citation]:
    """c1 and `precedent` on their shared factors favouring `side`, cited for both cases."""
    shared = _side(set(s.c1) & set(s.case(precedent)), side)
    return _pairs("c1", shared) | _pairs(precedent, shared)


def _distinction(s: Scenario, precedent: str, winner: str) -> set[Citation]:
    """`precedent` (won by `winner`) distinguished from c1: its `winner` factors c1 lacks, and
    c1's factors for the other side that it lacks."""
    other = "D" if winner == "P" else "P"
    case = set(s.case(precedent))
    return _pairs(precedent, _side(case - set(s.c1), winner)) | _pairs(
        "c1", _side(set(s.c1) - case, other)
    )


def relevant_citations(s: Scenario, index: int) -> set[Citation]:
    """The citations a CATO-style ply `index` makes (empty for a ply that must abstain):
    - 0, the plaintiff: the analogy of c1 to c2 on shared pro-plaintiff factors;
    - 1, the defendant: c2 distinguished (when the plaintiff argued from it), and the analogy of
      c1 to c3 on shared pro-defendant factors;
    - 2, the rebuttal: c3 distinguished, and the analogy to c2 reinforced.
    """
    abstains = expected_abstentions(s)
    if abstains[index]:
        return set()
    if index == 0:
        return _analogy(s, "c2", "P")
    if index == 1:
        distinction = set() if abstains[0] else _distinction(s, "c2", "P")
        return distinction | _analogy(s, "c3", "D")
    return _distinction(s, "c3", "D") | _analogy(s, "c2", "P")


def json_citations(ply: ParsedPly) -> set[Citation]:
    """Every (case, factor) the ply's JSON lists."""
    return {(case, f) for case in CASES for f in ply.factors[case]}


def argued_citations(ply: ParsedPly) -> set[Citation]:
    """The JSON citations whose factor the argument's text names: what the ply argues."""
    named = named_factors(ply.argument)
    return {(case, f) for case, f in json_citations(ply) if f in named}


def argument_quality(s: Scenario, index: int, ply: ParsedPly) -> float:
    """(|argued ∩ relevant| - |argued - relevant|) / |relevant|, clipped to [0, 1], of ply
    `index`: 1 for the citations a CATO argument makes and no others. Each citation outside
    them (the other side's shared factors, irrelevant or fabricated ones) cancels a relevant
    one, since it argues the opponent's case or nothing (Zhang and Ashley 2025, sec. 3.1: the
    analyst rejects misattributed factors); so listing every factor, or every shared factor
    whatever side it favours, earns little. 0 for an abstention or a ply that must abstain."""
    relevant = relevant_citations(s, index)
    if ply.abstain or not relevant:
        return 0.0
    argued = argued_citations(ply)
    return max(0.0, len(argued & relevant) - len(argued - relevant)) / len(relevant)
