"""What a ply of the 3-ply argument should cite, and what its text really argues.

The paper (Zhang and Ashley 2025, "Mitigating Manipulation and Enhancing Persuasion",
arXiv:2506.02992, sec. 3.1 and 4.1) follows HYPO / CATO: an argument analogises the current
case c1 to a precedent won by its side on the factors they share that favour that side, and a
response distinguishes the opponent's precedent by the factors that made it a win for the
opponent and that c1 lacks, or by c1's factors for the responding side that the precedent lacks.
Factor sides therefore matter: a plaintiff who "analogises" on a shared pro-defendant factor
argues the defendant's case. `citation_parts` gives each ply its analogy and its distinction as
(case, factor) pairs, `relevant_citations` their union, and `argument_quality` scores a ply
against them.

The paper extracts the factors an argument uses from its text with an LLM (sec. 4.4). For a
verifiable reward each ply also lists its citations per case in JSON, but a list under a fixed
sentence argues nothing, so the text is read too, deterministically (`statements`): it is cut
into clauses; a factor named in a clause (by id, "F4", or by whole CATO name,
"Agreed-not-to-disclose") is said of the cases the clause names ("Like c2, c1 has F4": F4 of c1
and of c2), and denied of them when the clause denies ("c1 does not have F4", "which c1 lacks",
the case after "unlike"). An analogy is argued when one clause says the factor of c1 and of the
precedent; a distinction when the text says the factor of one case and denies it of the other;
and a citation counts only when the JSON lists it too.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from lexrl.envs.argument.factors import FACTORS, factor_number
from lexrl.envs.argument.parsing import ParsedPly
from lexrl.envs.argument.scenarios import CASES, Scenario, expected_abstentions

Citation = tuple[str, str]
"""(case, factor id): "F4 cited for c2"."""

_ID_MENTION = re.compile(r"\bF\s*0*(\d{1,2})\b", re.IGNORECASE)
_CASE_MENTION = re.compile(r"\bc\s*([123])\b", re.IGNORECASE)
_UNLIKE_CASE = re.compile(r"\bunlike\s+(?:in\s+)?c\s*([123])\b", re.IGNORECASE)
# A clause ends at a sentence mark, or where a relative or contrasting clause begins: in "c2 has
# F2, which c1 lacks" F2 is said of c2 only.
_CLAUSE_END = re.compile(
    r"[.;:!?]+(?:\s|$)|,\s*(?=(?:which|so|but|whereas|while|although|though)\b)"
    r"|\b(?=(?:but|whereas|although|though)\b)",
    re.IGNORECASE,
)
_TAIL = re.compile(r"\s*(?:which|that|but|whereas|while|although|though)\b", re.IGNORECASE)
_DENIAL = re.compile(
    r"\b(?:not|no|never|neither|nor|none|lacks?|lacking|without|absent|missing|unlike|fails?"
    r"|cannot|differs?)\b|n't\b",
    re.IGNORECASE,
)


def _name_pattern(name: str) -> re.Pattern[str]:
    # "Agreed-not-to-disclose", "agreed not to disclose", "Agreed not-to-disclose"; a whole name
    # only: "Security-measures" inside "No-security-measures" (F19) is not F6.
    words = [re.escape(word) for word in name.split("-")]
    return re.compile(r"(?<![\w-])" + r"[\s\-]+".join(words) + r"(?![\w-])", re.IGNORECASE)


# Longest first, so that a name inside a longer one is read as the longer one.
_NAME_MENTIONS = sorted(
    ((factor.id, _name_pattern(factor.name)) for factor in FACTORS.values()),
    key=lambda item: -len(FACTORS[item[0]].name),
)


def with_ids_for_names(text: str) -> str:
    """The text with each whole CATO name replaced by its id ("Agreed-not-to-disclose" -> "F4"),
    so that the words inside a name ("not", "No-") are not read as a denial or another name."""
    for fid, pattern in _NAME_MENTIONS:
        text = pattern.sub(fid, text)
    return text


def named_factors(text: str) -> set[str]:
    """The factor ids a text names, by id ("F4", "f 4", "F04") or by whole CATO name in any case
    and with spaces for hyphens; ids outside the factor list are kept (a cited "F99" is a
    fabrication the metrics must see)."""
    return {f"F{int(number)}" for number in _ID_MENTION.findall(with_ids_for_names(text))}


def clauses(text: str) -> list[str]:
    """The text cut where a sentence, a relative clause (", which") or a contrast ("but") begins,
    names already replaced by ids."""
    return [part for part in _CLAUSE_END.split(with_ids_for_names(text)) if part.strip()]


@dataclass(frozen=True)
class Statement:
    """What one clause says: `factors` of each case in `cases`, and not of those in `denied`."""

    factors: frozenset[str]
    cases: frozenset[str]
    denied: frozenset[str]


@functools.lru_cache(maxsize=4096)
def statements(text: str) -> tuple[Statement, ...]:
    """The clauses of a text as statements. A clause that denies ("not", "no", "lacks",
    "unlike", ...) denies its factors of every case it names; one that is only a relative or
    contrasting tail ("which c1 lacks", "but c2 lacks it") denies the factors of the clause
    before it; a case after "unlike" is denied the clause's factors ("Unlike c2, c1 has F5":
    F5 of c1, not of c2). A clause that names no case says nothing of anyone ("F4, F6.").
    Cached: a ply's reward reads its text several times, and a group's samples often repeat one."""
    said: list[Statement] = []
    for clause in clauses(text):
        apart = {f"c{n}" for n in _UNLIKE_CASE.findall(clause)}
        rest = _UNLIKE_CASE.sub(" ", clause)
        named = {f"c{n}" for n in _CASE_MENTION.findall(rest)} - apart
        factors = {f"F{int(number)}" for number in _ID_MENTION.findall(rest)}
        if _DENIAL.search(rest):
            if not factors and said and _TAIL.match(clause):
                factors = set(said[-1].factors)
            said.append(Statement(frozenset(factors), frozenset(), frozenset(named | apart)))
        else:
            said.append(Statement(frozenset(factors), frozenset(named), frozenset(apart)))
    return tuple(said)


def text_citations(text: str) -> set[Citation]:
    """The (case, factor) pairs a text asserts (`statements`)."""
    return {(case, f) for st in statements(text) for case in st.cases for f in st.factors}


def text_denials(text: str) -> set[Citation]:
    """The (case, factor) pairs a text denies (`statements`)."""
    return {(case, f) for st in statements(text) for case in st.denied for f in st.factors}


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


@dataclass(frozen=True)
class Part:
    """One part of a ply's CATO argument: the analogy of c1 to `precedent`, or the distinction
    of `precedent` from c1, as the (case, factor) citations it makes."""

    kind: str
    """"analogy" or "distinction"."""
    precedent: str
    citations: frozenset[Citation]


def citation_parts(s: Scenario, index: int) -> list[Part]:
    """The parts of a CATO-style ply `index` that cite something (none for a ply that must
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
        parts = [Part("analogy", "c2", frozenset(_analogy(s, "c2", "P")))]
    elif index == 1:
        distinction = set() if abstains[0] else _distinction(s, "c2", "P")
        parts = [
            Part("distinction", "c2", frozenset(distinction)),
            Part("analogy", "c3", frozenset(_analogy(s, "c3", "D"))),
        ]
    else:
        parts = [
            Part("distinction", "c3", frozenset(_distinction(s, "c3", "D"))),
            Part("analogy", "c2", frozenset(_analogy(s, "c2", "P"))),
        ]
    return [part for part in parts if part.citations]


def relevant_citations(s: Scenario, index: int) -> set[Citation]:
    """Every citation a CATO-style ply `index` makes (`citation_parts`); empty for a ply that
    must abstain."""
    return {citation for part in citation_parts(s, index) for citation in part.citations}


def json_citations(ply: ParsedPly) -> set[Citation]:
    """Every (case, factor) the ply's JSON lists."""
    return {(case, f) for case in CASES for f in ply.factors[case]}


def as_text_says(ply: ParsedPly) -> ParsedPly:
    """The ply with its `factors` read from its text (`text_citations`) instead of its JSON:
    what the paper's extractor would list (Zhang and Ashley 2025, sec. 4.4), read
    deterministically, for the metrics' text variants."""
    said = text_citations(ply.argument)
    factors = {
        case: tuple(sorted({f for c, f in said if c == case}, key=factor_number)) for case in CASES
    }
    return replace(ply, factors=factors)


def argued_citations(ply: ParsedPly) -> set[Citation]:
    """The JSON citations the argument's text asserts of the same case (`text_citations`)."""
    return json_citations(ply) & text_citations(ply.argument)


def part_citations_argued(part: Part, ply: ParsedPly) -> set[Citation]:
    """The citations of `part` the ply argues: listed in its JSON and, for an analogy, said of
    c1 and of the precedent in one clause; for a distinction, said of the case that has the
    factor and denied of the other (c1 for the precedent's factors, the precedent for c1's)."""
    listed = json_citations(ply) & part.citations
    said = statements(ply.argument)
    if part.kind == "analogy":
        alike = {f for st in said if {"c1", part.precedent} <= st.cases for f in st.factors}
        return {(case, f) for case, f in listed if f in alike}
    asserted, denied = text_citations(ply.argument), text_denials(ply.argument)
    other = {"c1": part.precedent, part.precedent: "c1"}
    return {(case, f) for case, f in listed if (case, f) in asserted and (other[case], f) in denied}


def argues_grounded(s: Scenario, index: int, ply: ParsedPly) -> bool:
    """Whether ply `index` argues at least one citation of its CATO argument."""
    return not ply.abstain and any(
        part_citations_argued(part, ply) for part in citation_parts(s, index)
    )


def argument_quality(s: Scenario, index: int, ply: ParsedPly) -> float:
    """The worst part's recall minus the citations argued outside the argument, per citation of
    it, clipped to [0, 1], of ply `index`:
    min over parts of |argued part| / |part| - |argued - relevant| / |relevant|.
    1 for an argument that makes every analogy and distinction of its ply (`citation_parts`) and
    asserts no other citation. A ply that skips a part (analogies without the distinction, or
    factors listed case by case without comparing the cases) earns 0; each citation outside the
    argument (the other side's shared factors, irrelevant or fabricated ones) costs as much as a
    relevant one earns, since it argues the opponent's case or nothing (Zhang and Ashley 2025,
    sec. 3.1: the analyst rejects misattributed factors). 0 for an abstention or a ply that must
    abstain."""
    parts = citation_parts(s, index)
    if ply.abstain or not parts:
        return 0.0
    relevant = relevant_citations(s, index)
    recall = min(len(part_citations_argued(part, ply)) / len(part.citations) for part in parts)
    extra = len(argued_citations(ply) - relevant) / len(relevant)
    return max(0.0, recall - extra)
