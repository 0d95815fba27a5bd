"""The argument env's degenerate policies (`lexrl audit`): plies that ignore whether the triple
can be argued, and the cheap rules a reviewer would write over the prompt, each skipping one part
of the task or claiming what is false (Zhang and Ashley 2025, "Mitigating Manipulation and
Enhancing Persuasion", arXiv:2506.02992): deciding, abstaining where it must, arguing where it
can, claiming with the right side, comparing the cases, making each ply's distinction. As
analyst and polisher (RMA) every one of them rubber-stamps every draft, the reviewers' own cheap
strategy.

The rules read only the prompt they are sent (the cases as `render_cases` prints them, the
earlier plies, "Write ply N of 3"), never the gold. The CATO analogies and distinctions of a
ply are a function of the prompt alone, so `cato_*` rules start from the scripted teacher's plies
for the cases the prompt prints (`prompt_teacher_plies`) and change one thing:
- `cato_analogies_only`: the teacher's decisions and analogies, no distinction;
- `cato_skips_the_defendants_distinction` / `cato_skips_the_rebuttals_distinction`: the teacher's
  plies, one ply's distinctions dropped;
- `cato_distinguishes_by_the_precedent_only`: distinctions name only the precedent's factors that
  c1 lacks, never c1's factors that the precedent lacks;
- `cato_asserted_and_denied`: every claim of the teacher's, and its opposite beside it (a
  factor shared and distinguished, a distinction and its reverse);
- `cato_reversed_distinctions`: the distinctions the other way round (the case that lacks the
  factor said to have it);
- `cato_with_every_factor_claimed`: the teacher's claims and an analogy on every factor of c1
  with the ply's precedent, shared or not (over-claiming, unchecked);
- `cato_first_claim_of_each_kind`: the teacher's plies, only their first analogy and first
  distinction (the argument's shape, one claim deep);
- `cato_decisions_every_true_claim`: the teacher's decisions, every true claim about c1 and the
  ply's precedent, both sides (checked, over-claimed);
- `cato_never_abstains`: the teacher's plies where it argues, an analogy on the shared factors of
  the ply's side (or c1's own factors with the precedent, unchecked) where it abstains;
- `cato_abstains_on_the_rebuttal`: the teacher's plies, the rebuttal always abstaining;
- `cato_decisions_claiming_the_other_side`: the teacher's decisions, analogies on the factors c1
  shares with the precedent that favour the other side (every decision right, nothing relevant);
- `never_compares`: argue every ply, an analogy of c1 and its precedent on every factor of c1 that
  favours the ply's side, shared or not;
- `rule_*`: argue a ply exactly when its precedent was decided for its side and shares any
  factor id with c1 (the two-part decision rule that gets almost every decision right on
  generated triples), claiming an analogy on every shared factor whatever side it favours, or
  every claim about c1 and the precedent there is, true or not, both sides;
- `outcome_only_*`: argue when the precedent was decided for the ply's side, shared factors
  unread;
- `random_decision_*`: argue or abstain at random, per ply;
- `copy_previous_ply`: repeat the last ply the message shows (the other agent's prose), the first
  ply written by the shared-factor rule.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable

from lexrl.envs.argument.factors import FACTORS, factor_number
from lexrl.envs.argument.scenarios import CASES, PLIES, Scenario
from lexrl.envs.argument.teacher import teacher_plies
from lexrl.envs.degenerate import TeacherFactory, generic_policies, last_user_text
from lexrl.policy import Messages, Teacher
from lexrl.types import Task

ABSTENTION = "TERMINATE: no grounded argument can be made from these cases."
ARGUMENT = "The cases share relevant factors, and the precedents support this side's position."
REVIEWS = {"analyst": "VALID_ARGUMENT", "polisher": "The argument is fine.\nREVISE: no"}


def _ply(
    abstain: bool,
    analogies: list[list[str]] = (),
    distinctions: list[list[str]] = (),
    text: str | None = None,
) -> dict:
    """A ply in the JSON schema."""
    return {
        "abstain": abstain,
        "analogies": [list(claim) for claim in analogies],
        "distinctions": [list(claim) for claim in distinctions],
        "argument": text or (ABSTENTION if abstain else ARGUMENT),
    }


def _every_analogy(factors: dict[str, list[str]]) -> list[list[str]]:
    """An analogy of c1 to each precedent on every factor of c1, unchecked."""
    return [[f, "c1", precedent] for precedent in ("c2", "c3") for f in factors.get("c1", ())]


def _plies(abstain: bool, claim_all: bool) -> TeacherFactory:
    def factory(task: Task, rng: random.Random) -> Teacher:
        factors = {case: list(task.inputs[case]) for case in CASES}
        ply = _ply(abstain, _every_analogy(factors) if claim_all else [])
        triple = json.dumps(dict.fromkeys(PLIES, ply))

        def respond(role: str, messages: Messages) -> str:
            if role in REVIEWS:
                return REVIEWS[role]
            return triple if role == "single" else json.dumps(ply)

        return respond

    return factory


_CASE_LINE = re.compile(
    r"^(c[123]) \((?:current case|precedent, decided for the (\w+))[^:]*:(.*)$", re.M
)
_FACTOR_ID = re.compile(r"\bF\d+\b")
_WINNER = re.compile(r"\b(c[23]) \(precedent\) was decided for the (\w+)")
_FACTOR_ROW = re.compile(r"\b(F\d+)\b[^;:\n]*? (c1|-) (c[23]|-) (c[23]|-)(?=;|$)", re.M)
_CASES_FIRST_ROW = re.compile(r"(?:^|: |; )(c1|-) (c[23]|-) (c[23]|-) (F\d+)\b", re.M)
_PLY_REQUEST = re.compile(r"Write ply (\d) of 3")
_EARLIER_PLY = re.compile(r"^Ply \d \([^)]*\): (.*)$", re.M)
_PRECEDENT = ("c2", "c3", "c2")
_SIDE = ("plaintiff", "defendant", "plaintiff")
_FAVOURS = ("P", "D", "P")


def read_cases(prompt: str) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The factor ids of c1, c2, c3 and the precedents' winners ("plaintiff" / "defendant") as
    the prompt prints them."""
    factors, winners = {}, dict(_WINNER.findall(prompt))
    if winners:  # `factor_layout: by_factor` or `by_factor_arguer`
        factors = {case: [] for case in CASES}
        rows = _FACTOR_ROW.findall(prompt) or [
            (factor, *cells) for *cells, factor in _CASES_FIRST_ROW.findall(prompt)
        ]
        for factor, *cells in rows:
            for case in cells:
                if case != "-":
                    factors[case].append(factor)
        return factors, winners
    for case, winner, listed in _CASE_LINE.findall(prompt):
        factors[case] = _FACTOR_ID.findall(listed)
        if winner:
            winners[case] = winner
    return factors, winners


Decide = Callable[[int, dict[str, list[str]], dict[str, str], random.Random], bool]
"""Whether ply `index` argues, from the cases and winners the prompt shows."""


def _rule(index: int, factors: dict, winners: dict, rng: random.Random) -> bool:
    precedent = _PRECEDENT[index]
    shared = set(factors.get("c1", ())) & set(factors.get(precedent, ()))
    return winners.get(precedent) == _SIDE[index] and bool(shared)


def _outcome_only(index: int, factors: dict, winners: dict, rng: random.Random) -> bool:
    return winners.get(_PRECEDENT[index]) == _SIDE[index]


def _random(index: int, factors: dict, winners: dict, rng: random.Random) -> bool:
    return rng.random() < 0.5


def _own_side(index: int, ids: list[str]) -> list[str]:
    return [f for f in ids if f in FACTORS and FACTORS[f].favors == _FAVOURS[index]]


def _claiming(how: str, index: int, factors: dict[str, list[str]]) -> dict:
    """An arguing ply: `shared` claims an analogy of c1 and the ply's precedent on every factor
    they share, whatever side it favours; `every` claims everything about c1 and the precedent,
    unchecked: an analogy on each factor of either, and each factor of either as a distinction
    from the other."""
    precedent = _PRECEDENT[index]
    c1, other = list(factors.get("c1", ())), list(factors.get(precedent, ()))
    if how == "shared":
        return _ply(False, [[f, "c1", precedent] for f in c1 if f in other])
    everything = list(dict.fromkeys(c1 + other))
    return _ply(
        False,
        [[f, "c1", precedent] for f in everything],
        [[f, "c1", precedent] for f in c1] + [[f, precedent, "c1"] for f in other],
    )


def _abstention() -> dict:
    return _ply(True)


PlyRule = Callable[[int, dict[str, list[str]], dict[str, str], random.Random], dict]
"""Ply `index` as a dict of the ply schema, from the cases and winners the prompt shows."""


def _from_prompt(rule: PlyRule) -> TeacherFactory:
    """Each ply written by `rule` from the prompt alone."""

    def factory(task: Task, rng: random.Random) -> Teacher:
        def respond(role: str, messages: Messages) -> str:
            if role in REVIEWS:
                return REVIEWS[role]
            prompt = (
                last_user_text(messages) if isinstance(messages, str) else messages[0]["content"]
            )
            factors, winners = read_cases(prompt)
            if role == "single":
                return json.dumps(
                    {name: rule(i, factors, winners, rng) for i, name in enumerate(PLIES)}
                )
            request = _PLY_REQUEST.search(prompt)
            index = int(request.group(1)) - 1 if request else 0
            return json.dumps(rule(index, factors, winners, rng))

        return respond

    return factory


def _ruled(decide: Decide, how: str) -> TeacherFactory:
    """Each ply argued (`_claiming(how)`) or abstained as `decide` says."""

    def rule(index: int, factors: dict, winners: dict, rng: random.Random) -> dict:
        argues = decide(index, factors, winners, rng)
        return _claiming(how, index, factors) if argues else _abstention()

    return _from_prompt(rule)


def prompt_teacher_plies(
    factors: dict[str, list[str]], winners: dict[str, str]
) -> tuple[dict, dict, dict]:
    """The scripted teacher's three plies for the cases a prompt prints: what the CATO rule
    argues from the prompt alone."""
    side = {"plaintiff": "P", "defendant": "D"}
    cases = {case: tuple(sorted(factors.get(case, ()), key=factor_number)) for case in CASES}
    scenario = Scenario(
        id="prompt",
        kind="arguable",
        c1=cases["c1"],
        c2=cases["c2"],
        c3=cases["c3"],
        c2_outcome=side.get(winners.get("c2", ""), "P"),
        c3_outcome=side.get(winners.get("c3", ""), "D"),
        complexity=None,
    )
    return teacher_plies(scenario)


def _cato(change: Callable[[int, dict, dict, dict], dict]) -> TeacherFactory:
    """The teacher's ply for the prompt's cases, changed by `change(index, ply, factors,
    winners)`; an abstaining ply is left as it is."""

    def rule(index: int, factors: dict, winners: dict, rng: random.Random) -> dict:
        ply = prompt_teacher_plies(factors, winners)[index]
        return ply if ply["abstain"] else change(index, ply, factors, winners)

    return _from_prompt(rule)


def _analogy(index: int, factors: dict) -> dict:
    """The analogy of c1 to the ply's precedent on their shared factors of the ply's side, or,
    when they share none, on c1's own factors of that side, unchecked."""
    precedent = _PRECEDENT[index]
    shared = _own_side(index, [f for f in factors.get("c1", ()) if f in factors.get(precedent, ())])
    ids = shared or _own_side(index, list(factors.get("c1", ())))
    return _ply(False, [[f, "c1", precedent] for f in ids])


def _analogies_only(index: int, ply: dict, factors: dict, winners: dict) -> dict:
    return ply | {"distinctions": []}


def _skips_distinction(skipped: int) -> Callable[[int, dict, dict, dict], dict]:
    def change(index: int, ply: dict, factors: dict, winners: dict) -> dict:
        return ply | {"distinctions": []} if index == skipped else ply

    return change


def _precedent_only(index: int, ply: dict, factors: dict, winners: dict) -> dict:
    return ply | {"distinctions": [d for d in ply["distinctions"] if d[1] != "c1"]}


def _asserted_and_denied(index: int, ply: dict, factors: dict, winners: dict) -> dict:
    """Each claim and its opposite: an analogy beside the distinction that denies it of c1, a
    distinction beside its reverse."""
    denials = [[f, precedent, "c1"] for f, _, precedent in ply["analogies"]]
    reversals = [[f, lacks, has] for f, has, lacks in ply["distinctions"]]
    return ply | {"distinctions": ply["distinctions"] + denials + reversals}


def _reversed(index: int, ply: dict, factors: dict, winners: dict) -> dict:
    return ply | {"distinctions": [[f, lacks, has] for f, has, lacks in ply["distinctions"]]}


def _every_factor_claimed(index: int, ply: dict, factors: dict, winners: dict) -> dict:
    precedent = _PRECEDENT[index]
    extra = [[f, "c1", precedent] for f in factors.get("c1", ())]
    return ply | {"analogies": ply["analogies"] + [c for c in extra if c not in ply["analogies"]]}


def _first_of_each(index: int, ply: dict, factors: dict, winners: dict) -> dict:
    """Only the first analogy and the first distinction: the argument's shape, one claim deep."""
    return ply | {"analogies": ply["analogies"][:1], "distinctions": ply["distinctions"][:1]}


def _every_true_claim(index: int, ply: dict, factors: dict, winners: dict) -> dict:
    """Every true claim about c1 and the ply's precedent, either side: each shared factor as an
    analogy, each factor one of them lacks as a distinction."""
    precedent = _PRECEDENT[index]
    c1, other = factors.get("c1", []), factors.get(precedent, [])
    return _ply(
        False,
        [[f, "c1", precedent] for f in c1 if f in other],
        [[f, "c1", precedent] for f in c1 if f not in other]
        + [[f, precedent, "c1"] for f in other if f not in c1],
    )


def _never_abstains(index: int, factors: dict, winners: dict, rng: random.Random) -> dict:
    ply = prompt_teacher_plies(factors, winners)[index]
    return _analogy(index, factors) if ply["abstain"] else ply


def _abstains_on_the_rebuttal(index: int, factors: dict, winners: dict, rng: random.Random) -> dict:
    return _abstention() if index == 2 else prompt_teacher_plies(factors, winners)[index]


def _other_side(index: int, ply: dict, factors: dict, winners: dict) -> dict:
    precedent = _PRECEDENT[index]
    shared = [f for f in factors.get("c1", ()) if f in factors.get(precedent, ())]
    other = [f for f in shared if f not in _own_side(index, [f])]
    return _ply(False, [[f, "c1", precedent] for f in other])


def _never_compares(index: int, factors: dict, winners: dict, rng: random.Random) -> dict:
    precedent = _PRECEDENT[index]
    return _ply(False, [[f, "c1", precedent] for f in _own_side(index, factors.get("c1", []))])


def _copy_previous(task: Task, rng: random.Random) -> Teacher:
    """The last ply the message shows, its prose verbatim as this ply's prose, abstaining when it
    says TERMINATE; the first ply by the shared rule."""
    first = _ruled(_rule, "shared")(task, rng)

    def respond(role: str, messages: Messages) -> str:
        prompt = last_user_text(messages) if isinstance(messages, str) else messages[0]["content"]
        earlier = _EARLIER_PLY.findall(prompt)
        if role in REVIEWS or role == "single" or not earlier:
            return first(role, messages)
        return json.dumps(_ply("TERMINATE" in earlier[-1], text=earlier[-1]))

    return respond


def argument_policies() -> dict[str, TeacherFactory]:
    """Abstain always (claiming nothing, or every factor), argue always (claiming every factor,
    or nothing), and the prompt-reading rules of the module docstring."""
    return {
        **generic_policies(),
        "always_abstain": _plies(abstain=True, claim_all=False),
        "abstain_claiming_every_factor": _plies(abstain=True, claim_all=True),
        "claim_every_factor": _plies(abstain=False, claim_all=True),
        "never_abstain_claiming_nothing": _plies(abstain=False, claim_all=False),
        "always_argue_claiming_everything": _ruled(lambda *_: True, "every"),
        "cato_analogies_only": _cato(_analogies_only),
        "cato_skips_the_defendants_distinction": _cato(_skips_distinction(1)),
        "cato_skips_the_rebuttals_distinction": _cato(_skips_distinction(2)),
        "cato_distinguishes_by_the_precedent_only": _cato(_precedent_only),
        "cato_asserted_and_denied": _cato(_asserted_and_denied),
        "cato_reversed_distinctions": _cato(_reversed),
        "cato_with_every_factor_claimed": _cato(_every_factor_claimed),
        "cato_first_claim_of_each_kind": _cato(_first_of_each),
        "cato_decisions_every_true_claim": _cato(_every_true_claim),
        "cato_never_abstains": _from_prompt(_never_abstains),
        "cato_abstains_on_the_rebuttal": _from_prompt(_abstains_on_the_rebuttal),
        "cato_decisions_claiming_the_other_side": _cato(_other_side),
        "never_compares": _from_prompt(_never_compares),
        "outcome_only_never_compares": _from_prompt(
            lambda i, f, w, rng: (
                _never_compares(i, f, w, rng) if _outcome_only(i, f, w, rng) else _abstention()
            )
        ),
        "rule_claiming_everything": _ruled(_rule, "every"),
        "rule_claiming_shared_factors": _ruled(_rule, "shared"),
        "outcome_only_claiming_everything": _ruled(_outcome_only, "every"),
        "outcome_only_claiming_shared_factors": _ruled(_outcome_only, "shared"),
        "random_decision_claiming_shared_factors": _ruled(_random, "shared"),
        "copy_previous_ply": _copy_previous,
    }
