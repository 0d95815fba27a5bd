"""A scripted expert for the 3-ply argument task: the plies, analyst verdicts and polisher reviews
a correct arguer would write for a triple, in the replies' JSON / label formats. Its plies score
1.0 on every metric (Rec_U on arguable triples, successful abstention on the others), which
makes it a reference for the parsers and metrics and a source of demonstrations.

The plies follow the HYPO / CATO 3-ply pattern (seed 004, sec. 4.1):
- plaintiff: analogise c1 to c2 on their shared pro-plaintiff factors (c2 prevailed for the
  plaintiff despite any pro-defendant factor they also share);
- defendant: distinguish c2 (its factors c1 lacks, c1's pro-defendant factors c2 lacks), then
  cite c3 on their shared pro-defendant factors (c3 prevailed for the defendant despite any
  pro-plaintiff factor they also share);
- rebuttal: distinguish c3 (its factors c1 lacks, c1's pro-plaintiff factors c3 lacks) and
  reinforce the analogy to c2.
Together they cite every factor of every case for that case. A ply that must abstain
(`expected_abstentions`) is `TERMINATE: <reason>`, citing only the real factors its reason
names.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from lexrl.envs.argument.factors import FACTORS, factor_number
from lexrl.envs.argument.parsing import ParsedPly
from lexrl.envs.argument.scenarios import CASES, PLIES, Scenario, expected_abstentions

_SIDE = {"P": "plaintiff", "D": "defendant"}


def _named(ids: Iterable[str]) -> str:
    """Factors as the prompts render them: F4 (Agreed-not-to-disclose) and F6 (...)."""
    names = [f"{f} ({FACTORS[f].name})" for f in ids]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _factors(ids: Iterable[str], qualifier: str = "") -> str:
    """A noun phrase: the factor F4 (...), or the pro-plaintiff factors F4 (...) and F6 (...)."""
    ids = list(ids)
    noun = "factor" if len(ids) == 1 else "factors"
    return f"the {qualifier}{' ' if qualifier else ''}{noun} {_named(ids)}"


def _of(ids: Iterable[str], side: str) -> list[str]:
    return [f for f in ids if FACTORS[f].favors == side]


def _minus(a: Iterable[str], b: Iterable[str]) -> list[str]:
    return [f for f in a if f not in b]


def _both(a: Iterable[str], b: Iterable[str]) -> list[str]:
    return [f for f in a if f in b]


def _citation(**cases: Iterable[str]) -> dict[str, list[str]]:
    """The ply's `factors` object: every case present, ids sorted by number."""
    return {c: sorted(set(cases.get(c, ())), key=factor_number) for c in CASES}


def _abstention_reason(s: Scenario, side: str) -> tuple[str, dict[str, list[str]]]:
    """Why `side` ("P" with c2, "D" with c3) has no grounded argument, and the factors the reason
    names (the shared ones, which the cases really have)."""
    name, precedent = ("c2", s.c2) if side == "P" else ("c3", s.c3)
    outcome = s.c2_outcome if side == "P" else s.c3_outcome
    shared = _both(s.c1, precedent)
    reasons = []
    if outcome != side:
        reasons.append(
            f"{name} was decided for the {_SIDE[outcome]}, so it cannot support the {_SIDE[side]}"
        )
    if not shared:
        reasons.append(f"c1 shares no factor with {name}")
    elif not _of(shared, side):
        reasons.append(
            f"c1 shares with {name} only {_factors(shared)}, none of which favours the "
            f"{_SIDE[side]}"
        )
    else:
        # Only the outcome stands in the way; name the overlap the citations list.
        reasons[0] = f"although c1 and {name} share {_factors(shared)}, {reasons[0]}"
    return "; and ".join(reasons), _citation(c1=shared, **{name: shared})


def _termination(reason: str, factors: dict[str, list[str]]) -> dict:
    return {"argument": f"TERMINATE: {reason}.", "abstain": True, "factors": factors}


def _plaintiff(s: Scenario) -> dict:
    shared = _both(s.c1, s.c2)
    text = (
        "Plaintiff's argument: the current case (c1) should be decided for the plaintiff, as c2 "
        f"was. Like c2, c1 presents {_factors(_of(shared, 'P'), 'pro-plaintiff')}."
    )
    if _of(shared, "D"):
        text += (
            f" c2 was decided for the plaintiff even though it also presents "
            f"{_factors(_of(shared, 'D'), 'pro-defendant')}, which c1 shares, so those do not "
            "defeat the plaintiff's claim."
        )
    return {"argument": text, "abstain": False, "factors": _citation(c1=shared, c2=shared)}


def _defendant(s: Scenario, plaintiff_argued: bool) -> dict:
    shared = _both(s.c1, s.c3)
    text = "Defendant's counterargument:"
    c1_cited, c2_cited = list(shared), []
    if plaintiff_argued:
        c2_only, c1_pro_d = _minus(s.c2, s.c1), _minus(_of(s.c1, "D"), s.c2)
        differences = []
        if c2_only:
            differences.append(f"c2 presents {_factors(c2_only)}, which c1 lacks")
        if c1_pro_d:
            differences.append(f"c1 presents {_factors(c1_pro_d, 'pro-defendant')}, which c2 lacks")
        if differences:
            text += f" c2 is distinguishable: {'; and '.join(differences)}."
        c1_cited += c1_pro_d
        c2_cited = c2_only
    text += (
        " c3, decided for the defendant, is the closer precedent: c1 and c3 share "
        f"{_factors(_of(shared, 'D'), 'pro-defendant')}."
    )
    if _of(shared, "P"):
        text += (
            f" c3 was decided for the defendant even though it also presents "
            f"{_factors(_of(shared, 'P'), 'pro-plaintiff')}, which c1 shares."
        )
    return {
        "argument": text,
        "abstain": False,
        "factors": _citation(c1=c1_cited, c2=c2_cited, c3=shared),
    }


def _rebuttal(s: Scenario) -> dict:
    c3_only, c1_pro_p = _minus(s.c3, s.c1), _minus(_of(s.c1, "P"), s.c3)
    shared_p = _of(_both(s.c1, s.c2), "P")
    differences = []
    if c3_only:
        differences.append(f"c3 presents {_factors(c3_only)}, which c1 lacks")
    if c1_pro_p:
        differences.append(f"c1 presents {_factors(c1_pro_p, 'pro-plaintiff')}, which c3 lacks")
    text = "Plaintiff's rebuttal:"
    if differences:
        text += f" c3 is distinguishable: {'; and '.join(differences)}."
    text += (
        f" The analogy to c2 stands: c1 and c2 share {_factors(shared_p, 'pro-plaintiff')}, and "
        "c2 was decided for the plaintiff."
    )
    return {
        "argument": text,
        "abstain": False,
        "factors": _citation(c1=[*c1_pro_p, *shared_p], c2=shared_p, c3=c3_only),
    }


def teacher_plies(scenario: Scenario) -> tuple[dict, dict, dict]:
    """The expert's plaintiff, defendant and rebuttal plies (the ply JSON schema as dicts)."""
    plaintiff_abstains, defendant_abstains, rebuttal_abstains = expected_abstentions(scenario)
    if plaintiff_abstains:
        reason, factors = _abstention_reason(scenario, "P")
        plaintiff = _termination(reason, factors)
    else:
        plaintiff = _plaintiff(scenario)
    if defendant_abstains:
        reason, factors = _abstention_reason(scenario, "D")
        defendant = _termination(reason, factors)
    else:
        defendant = _defendant(scenario, plaintiff_argued=not plaintiff_abstains)
    if rebuttal_abstains:
        reason, _ = _abstention_reason(scenario, "P")
        rebuttal = _termination(
            f"the plaintiff has no grounded argument to reinforce: {reason}", _citation()
        )
    else:
        rebuttal = _rebuttal(scenario)
    return plaintiff, defendant, rebuttal


def teacher_text(ply: dict) -> str:
    """A ply as the model's reply: its JSON."""
    return json.dumps(ply)


def teacher_triple_text(plies: tuple[dict, dict, dict]) -> str:
    """The single agent's reply: `{"plaintiff": ..., "defendant": ..., "rebuttal": ...}`."""
    return json.dumps(dict(zip(PLIES, plies, strict=True)))


def _fabrications(scenario: Scenario, draft: ParsedPly) -> list[str]:
    return [
        f"{f} for {case}"
        for case in CASES
        for f in draft.factors[case]
        if f not in scenario.case(case)
    ]


def correct_verdict(scenario: Scenario, ply_index: int, draft: ParsedPly) -> tuple[str, str]:
    """(label, one-line reason) of a correct factor analyst on ply `ply_index` (0 plaintiff,
    1 defendant, 2 rebuttal)."""
    must_abstain = expected_abstentions(scenario)[ply_index]
    side = "D" if ply_index == 1 else "P"
    if must_abstain and not draft.abstain:
        reason, _ = _abstention_reason(scenario, side)
        return "REQUIRES_ABSTENTION", f"The {PLIES[ply_index]} ply cannot be grounded: {reason}."
    fabricated = _fabrications(scenario, draft)
    if fabricated:
        return (
            "REQUIRES_CORRECTION",
            f"The draft cites factors the cases do not have: {', '.join(fabricated)}.",
        )
    if not draft.valid:
        return (
            "REQUIRES_CORRECTION",
            f"The draft is not in the required JSON format: {draft.error}.",
        )
    if draft.abstain and not must_abstain:
        # A wrongful TERMINATE is an error to correct, not an argument to approve.
        return (
            "REQUIRES_CORRECTION",
            f"The draft abstains, but the {PLIES[ply_index]} ply can be argued from the shared "
            "factors and the precedent's outcome.",
        )
    if draft.abstain:
        return "VALID_ARGUMENT", "The draft rightly abstains and attributes no factor wrongly."
    return "VALID_ARGUMENT", "Every cited factor is in the case it is cited for."


def teacher_verdict(scenario: Scenario, ply_index: int, parsed_draft: ParsedPly) -> str:
    """A correct factor analyst's reply on a draft of ply `ply_index` (0 plaintiff, 1 defendant,
    2 rebuttal): one line of reason, then the label alone on the last line. REQUIRES_ABSTENTION
    when the ply must abstain but the draft argues; REQUIRES_CORRECTION when it cites a factor
    its case lacks, is not valid JSON, or abstains on a ply that can be argued; else
    VALID_ARGUMENT."""
    label, reason = correct_verdict(scenario, ply_index, parsed_draft)
    return f"{reason}\n{label}"


def teacher_review(scenario: Scenario, ply_index: int, parsed_draft: ParsedPly) -> str:
    """A correct argument polisher's reply, ending `REVISE: yes|no`: revise exactly when the
    analyst's verdict (`teacher_verdict`) is not VALID_ARGUMENT, so on the teacher's own plies
    it is always `REVISE: no`."""
    label, reason = correct_verdict(scenario, ply_index, parsed_draft)
    if label == "VALID_ARGUMENT":
        return "The argument is accurate, grounded in the cases' factors, and clear.\nREVISE: no"
    return f"Revise as the factor analyst asks: {reason}\nREVISE: yes"
