"""A scripted expert for the 3-ply argument task: the plies, analyst verdicts and polisher reviews
a correct arguer would write for a triple, in the replies' JSON / label formats. Its plies earn
the full reward (`lexrl.envs.argument.reward`) and score 1.0 on every metric it can (Rec_U
excepted: a CATO argument cites the factors that favour its side, not every factor), which makes
it a reference for the parsers and metrics and a source of demonstrations.

The plies follow the HYPO / CATO 3-ply pattern (Zhang and Ashley 2025, "Mitigating Manipulation
and Enhancing Persuasion", arXiv:2506.02992, sec. 3.1 and 4.1) and claim exactly
`grounding.relevant_claims`; their prose is one sentence naming the ply's moves, since the claims
carry the argument and the reply must fit the demo's token cap:
- plaintiff: analogise c1 to c2 on their shared pro-plaintiff factors;
- defendant: distinguish c2 (its pro-plaintiff factors c1 lacks, c1's pro-defendant factors c2
  lacks), then cite c3 on their shared pro-defendant factors;
- rebuttal: distinguish c3 (its pro-defendant factors c1 lacks, c1's pro-plaintiff factors c3
  lacks) and reinforce the analogy to c2.
A ply that must abstain (`expected_abstentions`) is `TERMINATE: <reason>`, citing nothing. The
texts are short on purpose: a rollout cuts a reply at the token cap, and a demonstration the
policy cannot fit under its cap teaches it that only abstentions are whole JSON (issue 31).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from lexrl.envs.argument.factors import FACTORS, factor_number
from lexrl.envs.argument.grounding import citation_parts, fabrications
from lexrl.envs.argument.parsing import Claim, ParsedPly, ply_object
from lexrl.envs.argument.scenarios import PLIES, Scenario, expected_abstentions

_SIDE = {"P": "plaintiff", "D": "defendant"}


def _ply(claims: Iterable[Claim], text: str) -> dict:
    return ply_object(False, claims, text)


def _abstention_reason(s: Scenario, side: str) -> str:
    """Why `side` ("P" with c2, "D" with c3) has no grounded argument."""
    name, precedent = ("c2", s.c2) if side == "P" else ("c3", s.c3)
    outcome = s.c2_outcome if side == "P" else s.c3_outcome
    if outcome != side:
        return f"{name} was decided for the {_SIDE[outcome]}"
    if not set(s.c1) & set(precedent):
        return f"c1 shares no factor with {name}"
    return f"c1 shares no pro-{_SIDE[side]} factor with {name}"


def _termination(reason: str) -> dict:
    return ply_object(True, (), f"TERMINATE: {reason}.")


def _part(s: Scenario, index: int, kind: str) -> list[Claim]:
    return [c for part in citation_parts(s, index) if part.kind == kind for c in part.claims]


def _plaintiff(s: Scenario) -> dict:
    return _ply(_part(s, 0, "analogy"), "Like c2, c1 should be decided for the plaintiff.")


def _defendant(s: Scenario) -> dict:
    distinctions = _part(s, 1, "distinction")
    text = "Like c3, c1 should be decided for the defendant."
    if distinctions:
        text = f"c2 is distinguishable. {text}"
    return _ply(distinctions + _part(s, 1, "analogy"), text)


def _rebuttal(s: Scenario) -> dict:
    distinctions = _part(s, 2, "distinction")
    text = "The analogy to c2 stands."
    if distinctions:
        text = f"c3 is distinguishable. {text}"
    return _ply(distinctions + _part(s, 2, "analogy"), text)


def teacher_plies(scenario: Scenario) -> tuple[dict, dict, dict]:
    """The expert's plaintiff, defendant and rebuttal plies (the ply JSON schema as dicts)."""
    plaintiff_abstains, defendant_abstains, rebuttal_abstains = expected_abstentions(scenario)
    plaintiff = (
        _termination(_abstention_reason(scenario, "P"))
        if plaintiff_abstains
        else _plaintiff(scenario)
    )
    defendant = (
        _termination(_abstention_reason(scenario, "D"))
        if defendant_abstains
        else _defendant(scenario)
    )
    rebuttal = (
        _termination(f"no plaintiff's argument to reinforce: {_abstention_reason(scenario, 'P')}")
        if rebuttal_abstains
        else _rebuttal(scenario)
    )
    return plaintiff, defendant, rebuttal


CHECKLIST_INSTRUCTION = (
    "Before the JSON, check in <think>...</think> whether your precedent was decided for your "
    "side and then, one at a time, whether it has each of c1's factors that favour your side: "
    '"<think>c2 won by the plaintiff. F4: yes. F6: no.</think>".'
)
"""Appended to the arguers' prompts under `reasoning: checklist`."""


def checklist(s: Scenario, index: int) -> str:
    """The `<think>` block an arguer writes under `reasoning: checklist` before ply `index`:
    its precedent's winner, then each of c1's factors on its side, in number order, and
    whether the precedent has it ("F4: yes."). The ply can be grounded exactly when the winner
    is its side and some factor says yes (`expected_abstentions`). About 4 tokens a factor."""
    side = "D" if index == 1 else "P"
    name = "c3" if index == 1 else "c2"
    precedent = s.case(name)
    outcome = s.c3_outcome if index == 1 else s.c2_outcome
    lines = [f"{name} won by the {_SIDE[outcome]}."]
    if outcome == side:
        own = [f for f in s.c1 if f in FACTORS and FACTORS[f].favors == side]
        lines += [
            f"{f}: {'yes' if f in precedent else 'no'}." for f in sorted(own, key=factor_number)
        ] or [f"c1 has no pro-{_SIDE[side]} factor."]
    return f"<think>{' '.join(lines)}</think>"


def teacher_text(ply: dict) -> str:
    """A ply as the model's reply: its JSON."""
    return json.dumps(ply, separators=(",", ":"))


def teacher_triple_text(plies: tuple[dict, dict, dict]) -> str:
    """The single agent's reply: `{"plaintiff": ..., "defendant": ..., "rebuttal": ...}`."""
    return json.dumps(dict(zip(PLIES, plies, strict=True)))


def correct_verdict(scenario: Scenario, ply_index: int, draft: ParsedPly) -> tuple[str, str]:
    """(label, one-line reason) of a correct factor analyst on ply `ply_index` (0 plaintiff,
    1 defendant, 2 rebuttal)."""
    must_abstain = expected_abstentions(scenario)[ply_index]
    side = "D" if ply_index == 1 else "P"
    if must_abstain and not draft.abstain:
        reason = _abstention_reason(scenario, side)
        return "REQUIRES_ABSTENTION", f"The {PLIES[ply_index]} ply cannot be grounded: {reason}."
    fabricated = fabrications(scenario, draft)
    if fabricated:
        return (
            "REQUIRES_CORRECTION",
            f"The draft claims what the cases do not bear out: {', '.join(fabricated)}.",
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
        return "VALID_ARGUMENT", "The draft rightly abstains and claims nothing false."
    return "VALID_ARGUMENT", "Every claim of the draft is borne out by the cases."


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
