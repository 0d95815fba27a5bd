"""Parsers of the argument task's model replies; none of them raises on any string.

A ply comes back as JSON: its decision, its argument as claims that can be checked exactly
against the cases, and its prose for people (which no reward reads):

    {"abstain": false, "analogies": [["F4", "c1", "c2"]], "distinctions": [["F2", "c2", "c1"]],
     "argument": "Like c2, c1 has F4. c2 has F2, which c1 lacks."}

An analogy names a factor and the two cases that share it; a distinction names a factor, the
case that has it and the case that lacks it. The factors a ply cites per case, which the paper's
metrics count (Zhang and Ashley 2025, arXiv:2506.02992, sec. 4.4, where an extractor LLM reads
them from prose), follow from the claims: an analogy cites its factor for both cases, a
distinction for the case that has it.

The single agent (SA, SA-EP) writes `{"plaintiff": <ply>, "defendant": <ply>, "rebuttal": <ply>}`.
The RMA factor analyst ends with a label (VALID_ARGUMENT / REQUIRES_CORRECTION /
REQUIRES_ABSTENTION, TERMINATE meaning the last), the argument polisher with `REVISE: yes|no`.
Everything up to the last `</think>` is dropped first, so a reasoning model's scratch pad can
neither answer nor abstain.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from lexrl.envs.argument.factors import FACTORS, factor_number, normalise_factor_id
from lexrl.envs.argument.scenarios import CASES, PLIES

VERDICT_LABELS = ("VALID_ARGUMENT", "REQUIRES_CORRECTION", "REQUIRES_ABSTENTION")
# The paper's abstention signal. Upper case only: "terminate" in prose is not a decision.
_TERMINATE = re.compile(r"\bTERMINATE\b")
_LABEL = re.compile(r"\b(VALID_ARGUMENT|REQUIRES_CORRECTION|REQUIRES_ABSTENTION|TERMINATE)\b")
# Markdown decoration ("**REVISE: yes**", "- REVISE: no") is allowed around the line's start.
_REVISE = re.compile(r"^[\s*#>_-]*REVISE\s*:[\s*_]*(yes|no)\b.*$", re.IGNORECASE | re.MULTILINE)


CASE_NAMES = {
    "c1": "c1",
    "inputcase": "c1",
    "currentcase": "c1",
    "c2": "c2",
    "tsc1": "c2",
    "c3": "c3",
    "tsc2": "c3",
}
"""Case names as lexrl's prompts write them (c1, c2, c3) and as the authors' code and distiller
do ("Input Case", "TSC1", "TSC2"; Zhang and Ashley 2025, Appendix A), lower-cased, without
spaces, hyphens or underscores ("TSC-1" is "tsc1")."""


def normalise_case(name: object) -> str | None:
    """ "c1", "c2" or "c3" for a case name in either naming, any case, spaced or hyphenated;
    None for anything else."""
    if not isinstance(name, str):
        return None
    return CASE_NAMES.get(re.sub(r"[\s_-]+", "", name.lower()))


@dataclass(frozen=True, order=True)
class Claim:
    """One checkable statement of a ply: `analogy` (both `cases` have `factor`; the two cases
    sorted, so "c2 and c1" is "c1 and c2") or `distinction` (`cases[0]` has it, `cases[1]` lacks
    it)."""

    kind: str
    factor: str
    cases: tuple[str, str]

    def __str__(self) -> str:
        if self.kind == "analogy":
            return f"{self.factor} shared by {self.cases[0]} and {self.cases[1]}"
        return f"{self.factor} in {self.cases[0]}, not in {self.cases[1]}"


def analogy(factor: str, a: str, b: str) -> Claim:
    return Claim("analogy", factor, tuple(sorted((a, b))))


def distinction(factor: str, has: str, lacks: str) -> Claim:
    return Claim("distinction", factor, (has, lacks))


def claim_order(claim: Claim) -> tuple:
    """Sort key of claims in the order the transposed prompt lists their factors
    (`factor_layout: by_factor`): pro-plaintiff factors first, then pro-defendant ones (then
    ids outside the factor list), each side by number, so that a ply's claims can be written by
    reading the prompt's rows once, top to bottom."""
    side = FACTORS[claim.factor].favors if claim.factor in FACTORS else "~"
    return (side != "P", side, factor_number(claim.factor), claim.cases)


def ply_object(abstain: bool, claims: Iterable[Claim], argument: str) -> dict:
    """A ply as the JSON object the prompts ask for, its claims in `claim_order`."""
    ordered = sorted(claims, key=claim_order)
    return {
        "abstain": abstain,
        "analogies": [[c.factor, *c.cases] for c in ordered if c.kind == "analogy"],
        "distinctions": [[c.factor, *c.cases] for c in ordered if c.kind == "distinction"],
        "argument": argument,
    }


def claimed_factors(claims: tuple[Claim, ...]) -> dict[str, tuple[str, ...]]:
    """Case -> the factor ids the claims cite for it (an analogy for both cases, a distinction
    for the case that has the factor), sorted by number, without repeats."""
    cited: dict[str, set[str]] = {case: set() for case in CASES}
    for claim in claims:
        for case in claim.cases if claim.kind == "analogy" else claim.cases[:1]:
            cited[case].add(claim.factor)
    return {case: tuple(sorted(ids, key=factor_number)) for case, ids in cited.items()}


@dataclass(frozen=True)
class ParsedPly:
    argument: str
    abstain: bool
    factors: dict[str, tuple[str, ...]] = field(default_factory=lambda: {c: () for c in CASES})
    """Case ("c1", "c2", "c3", always all three) -> cited factor ids, normalised, sorted by
    number, without repeats: `claimed_factors(claims)`, or what a distiller read from the prose
    (then `claims` is None). Ids outside the factor list ("F99") are kept for the metrics."""
    valid: bool = False
    """The ply was a JSON object with `abstain` (bool or "true"/"false"), `analogies` and
    `distinctions` (lists of [factor id, case, case]) and `argument` (string)."""
    error: str | None = None
    """What was wrong or dropped (a malformed claim, a missing key); None for a clean ply. A
    repeated claim is merged silently: it claims nothing new."""
    claims: tuple[Claim, ...] | None = ()
    """The ply's analogies and distinctions, sorted, without repeats; None for a ply whose
    citations a distiller read from its prose (`factors` only: no claim to check)."""


@dataclass(frozen=True)
class Verdict:
    label: str | None
    """One of VERDICT_LABELS, or None when the reply has none."""
    feedback: str
    """The analyst's whole reply, for the developer's revision."""
    error: str | None = None


@dataclass(frozen=True)
class Review:
    revise: bool
    feedback: str
    """The polisher's reply without its REVISE line(s), for the developer's revision."""
    error: str | None = None


def _answer(text: str) -> str:
    return text.rpartition("</think>")[2]


def last_json_object(text: str) -> dict | None:
    """The last top-level JSON object in `text` (prose, code fences and other objects around it
    are skipped), or None. Objects nested in an earlier parsed one are not top-level."""
    decoder = json.JSONDecoder()
    found, start = None, text.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            start = text.find("{", start + 1)
            continue
        found, start = value, text.find("{", end)
    return found


def _abstain_flag(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def _factor_lists(value: object, problems: list[str]) -> tuple[dict[str, tuple[str, ...]], bool]:
    """(case -> cited ids, whether `value` had the shape {case: [factor, ...]} for the three
    cases, named either way (`CASE_NAMES`)); notes go to `problems`."""
    if not isinstance(value, dict):
        problems.append("not an object with c1, c2, c3")
        return {c: () for c in CASES}, False
    by_case = {normalise_case(key): items for key, items in value.items()}
    factors, well_typed = {}, True
    for case in CASES:
        # A case the object leaves out, beside others it names, has nothing cited for it.
        items = by_case.get(case, [] if set(by_case) & set(CASES) else None)
        if not isinstance(items, list):
            problems.append(f"`{case}` is missing or not a list")
            well_typed, items = False, []
        ids = set()
        for item in items:
            factor_id = normalise_factor_id(item) if isinstance(item, str) else None
            if factor_id is None:
                problems.append(f"`{case}` entry {item!r} is no factor id, dropped")
                well_typed = well_typed and isinstance(item, str)
            else:
                ids.add(factor_id)
        factors[case] = tuple(sorted(ids, key=factor_number))
    return factors, well_typed


def _claims(value: dict, problems: list[str]) -> tuple[tuple[Claim, ...], bool]:
    """The `analogies` and `distinctions` of a ply object, and whether both had the schema's
    shape; an entry that is no [factor id, case, case] of two different cases is dropped."""
    claims, well_typed = set(), True
    for key, make in (("analogies", analogy), ("distinctions", distinction)):
        items = value.get(key)
        if not isinstance(items, list):
            problems.append(f"`{key}` is missing or not a list")
            well_typed = False
            continue
        for item in items:
            if not (isinstance(item, list) and len(item) == 3):
                problems.append(f"`{key}` entry {item!r} is not [factor, case, case], dropped")
                well_typed = False
                continue
            factor = normalise_factor_id(item[0]) if isinstance(item[0], str) else None
            first, second = normalise_case(item[1]), normalise_case(item[2])
            if factor is None or first is None or second is None or first == second:
                problems.append(
                    f"`{key}` entry {item!r} is not a factor id and two different cases, dropped"
                )
                well_typed = False
                continue
            claims.add(make(factor, first, second))
    return tuple(sorted(claims)), well_typed


def _ply(value: object, what: str) -> ParsedPly:
    """The ply `value` (a decoded JSON value) describes; `what` names it in errors."""
    if isinstance(value, str):
        # A bare string where an object belongs may still be the paper's free-text TERMINATE.
        return ParsedPly(
            argument=value,
            abstain=bool(_TERMINATE.search(value)),
            error=f"{what} is a string, not a JSON object",
        )
    if not isinstance(value, dict):
        return ParsedPly(argument="", abstain=False, error=f"{what} is not a JSON object")
    problems: list[str] = []
    argument = value.get("argument")
    argument_typed = isinstance(argument, str)
    if not argument_typed:
        problems.append("`argument` is missing or not a string")
        argument = ""
    abstain = _abstain_flag(value.get("abstain"))
    if abstain is None:
        problems.append("`abstain` is missing or not true/false")
    claims, claims_typed = _claims(value, problems)
    return ParsedPly(
        argument=argument,
        # Without a usable flag, a TERMINATE in the argument is still an abstention.
        abstain=abstain if abstain is not None else bool(_TERMINATE.search(argument)),
        factors=claimed_factors(claims),
        valid=argument_typed and abstain is not None and claims_typed,
        error="; ".join(f"{what}: {p}" for p in problems) or None,
        claims=claims,
    )


def _no_json(text: str, what: str) -> ParsedPly:
    if _TERMINATE.search(text):
        return ParsedPly(
            argument=text.strip(),
            abstain=True,
            error=f"{what}: no JSON object; TERMINATE in the text taken as abstention",
        )
    return ParsedPly(argument="", abstain=False, error=f"{what}: no JSON object found")


def parse_factor_lists(text: str) -> tuple[dict[str, tuple[str, ...]], str | None]:
    """The factor distiller's `{"c1": [...], "c2": [...], "c3": [...]}` (the last JSON object
    in `text`; the cases may be named "Input Case", "TSC1", "TSC2"; an entry may be the
    authors' "F4 Agreed-not-to-disclose (P)"), ids normalised; the error is None when the
    object had that shape."""
    problems: list[str] = []
    factors, well_typed = _factor_lists(last_json_object(text), problems)
    return factors, None if well_typed else "; ".join(problems)


def parse_ply(text: str) -> ParsedPly:
    """One ply from a reply: the last top-level JSON object in it (fenced or among prose). With
    no object, a TERMINATE in the text is an (invalid-format) abstention, anything else an
    invalid non-abstaining ply without factors."""
    answer = _answer(text)
    value = last_json_object(answer)
    return _no_json(answer, "ply") if value is None else _ply(value, "ply")


def parse_three_plies(text: str) -> tuple[ParsedPly, ParsedPly, ParsedPly]:
    """The single agent's three plies (plaintiff, defendant, rebuttal) from the last top-level
    JSON object of the reply, keyed by PLIES; a missing ply is invalid and does not abstain.
    With no object, a TERMINATE in the text abstains on all three (invalid format)."""
    answer = _answer(text)
    value = last_json_object(answer)
    if value is None:
        ply = _no_json(answer, "reply")
        return ply, ply, ply
    plaintiff, defendant, rebuttal = (
        _ply(value[name], name)
        if name in value
        else ParsedPly(argument="", abstain=False, error=f"no `{name}` ply in the JSON object")
        for name in PLIES
    )
    return plaintiff, defendant, rebuttal


def parse_verdict(text: str) -> Verdict:
    """The factor analyst's verdict: the LAST label in the reply (TERMINATE counts as
    REQUIRES_ABSTENTION, the analyst forcing abstention); no label -> label None with an
    error."""
    answer = _answer(text)
    labels = _LABEL.findall(answer)
    if not labels:
        return Verdict(label=None, feedback=answer.strip(), error="no verdict label in the reply")
    label = "REQUIRES_ABSTENTION" if labels[-1] == "TERMINATE" else labels[-1]
    return Verdict(label=label, feedback=answer.strip())


def parse_review(text: str) -> Review:
    """The argument polisher's decision from its LAST `REVISE: yes|no` line (case-insensitive);
    without one it does not revise, with an error."""
    answer = _answer(text)
    decisions = _REVISE.findall(answer)
    feedback = _REVISE.sub("", answer).strip()
    if not decisions:
        return Review(revise=False, feedback=feedback, error="no `REVISE: yes|no` line")
    return Review(revise=decisions[-1].lower() == "yes", feedback=feedback)
