"""Parsers of the argument task's model replies; none of them raises on any string.

A ply comes back as JSON, the factors it cites listed per case so that hallucination and
utilisation are counted by id instead of by the extractor LLM of Zhang and Ashley 2025
(arXiv:2506.02992, sec. 4.4):

    {"argument": "...", "abstain": false, "factors": {"c1": ["F4"], "c2": ["F4"], "c3": []}}

The single agent (SA, SA-EP) writes `{"plaintiff": <ply>, "defendant": <ply>, "rebuttal": <ply>}`.
The RMA factor analyst ends with a label (VALID_ARGUMENT / REQUIRES_CORRECTION /
REQUIRES_ABSTENTION, TERMINATE meaning the last), the argument polisher with `REVISE: yes|no`.
Everything up to the last `</think>` is dropped first, so a reasoning model's scratch pad can
neither answer nor abstain.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from lexrl.envs.argument.factors import factor_number, normalise_factor_id
from lexrl.envs.argument.scenarios import CASES, PLIES

VERDICT_LABELS = ("VALID_ARGUMENT", "REQUIRES_CORRECTION", "REQUIRES_ABSTENTION")
# The paper's abstention signal. Upper case only: "terminate" in prose is not a decision.
_TERMINATE = re.compile(r"\bTERMINATE\b")
_LABEL = re.compile(r"\b(VALID_ARGUMENT|REQUIRES_CORRECTION|REQUIRES_ABSTENTION|TERMINATE)\b")
# Markdown decoration ("**REVISE: yes**", "- REVISE: no") is allowed around the line's start.
_REVISE = re.compile(r"^[\s*#>_-]*REVISE\s*:[\s*_]*(yes|no)\b.*$", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class ParsedPly:
    argument: str
    abstain: bool
    factors: dict[str, tuple[str, ...]] = field(default_factory=lambda: {c: () for c in CASES})
    """Case ("c1", "c2", "c3", always all three) -> cited factor ids, normalised, sorted by
    number, without repeats. Ids outside the factor list ("F99") are kept for the metrics."""
    valid: bool = False
    """The ply was a JSON object with `argument` (string), `abstain` (bool or "true"/"false"),
    `factors` (object with c1, c2, c3, each a list of strings)."""
    error: str | None = None
    """What was wrong or dropped; may be set on a valid ply (an entry that is no factor id)."""


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
    """(case -> cited ids, whether `value` had the schema's shape); notes go to `problems`."""
    if not isinstance(value, dict):
        problems.append("`factors` is not an object with c1, c2, c3")
        return {c: () for c in CASES}, False
    factors, well_typed = {}, True
    for case in CASES:
        items = value.get(case)
        if not isinstance(items, list):
            problems.append(f"`factors.{case}` is missing or not a list")
            well_typed, items = False, []
        ids = set()
        for item in items:
            factor_id = normalise_factor_id(item) if isinstance(item, str) else None
            if factor_id is None:
                problems.append(f"`factors.{case}` entry {item!r} is no factor id, dropped")
                well_typed = well_typed and isinstance(item, str)
            else:
                ids.add(factor_id)
        factors[case] = tuple(sorted(ids, key=factor_number))
    return factors, well_typed


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
    factors, factors_typed = _factor_lists(value.get("factors"), problems)
    return ParsedPly(
        argument=argument,
        # Without a usable flag, a TERMINATE in the argument is still an abstention.
        abstain=abstain if abstain is not None else bool(_TERMINATE.search(argument)),
        factors=factors,
        valid=argument_typed and abstain is not None and factors_typed,
        error="; ".join(f"{what}: {p}" for p in problems) or None,
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
    """The factor extractor's `{"c1": [...], "c2": [...], "c3": [...]}` (the last JSON object
    in `text`), ids normalised; the error is None when the object had that shape."""
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
