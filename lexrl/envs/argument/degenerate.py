"""The argument env's degenerate policies (`lexrl audit`): plies that ignore whether the triple
can be argued, and the cheap rules a reviewer would write over the prompt, each skipping one part
of the task (Zhang and Ashley 2025, "Mitigating Manipulation and Enhancing Persuasion",
arXiv:2506.02992): deciding, abstaining where it must, arguing where it can, citing with the
right side, or comparing the cases. As analyst and polisher (RMA) every one of them
rubber-stamps every draft, the reviewers' own cheap strategy.

The rules read only the prompt they are sent (the cases as `render_cases` prints them, the
earlier plies, "Write ply N of 3"), never the gold. The CATO analogies and distinctions of a
ply are a function of the prompt alone, so `cato_*` rules start from the scripted teacher's plies
for the cases the prompt prints (`prompt_teacher_plies`) and skip one part:
- `cato_ids_only`: the teacher's citations, the text only their ids ("F4, F6.");
- `cato_denied`: the teacher's citations, the text denying each ("c1 does not have F4");
- `cato_analogies_only`: the teacher's decisions and analogies, no distinction;
- `cato_never_abstains`: the teacher's plies where it argues, an analogy on the shared factors
  of the ply's side (or c1's own factors of that side) where it abstains;
- `cato_abstains_on_the_rebuttal`: the teacher's plies, the rebuttal always abstaining;
- `cato_decisions_citing_the_other_side`: the teacher's decisions, citing the factors of c1
  and of the precedent that favour the other side (every decision right, nothing relevant);
- `never_compares`: argue every ply, citing every factor of c1 and of the precedent that favours
  the ply's side, each said of its own case, never of both;
- `rule_*`: argue a ply exactly when its precedent was decided for its side and shares any
  factor id with c1 (the two-part decision rule that gets almost every decision right on
  generated triples), citing every listed factor under a fixed sentence, saying every factor of
  its case, or saying of c1 and the precedent every factor they share whatever side it favours;
- `outcome_only_*`: argue when the precedent was decided for the ply's side, shared factors
  unread;
- `random_decision_*`: argue or abstain at random, per ply;
- `copy_previous_ply`: repeat the last ply the message shows (the other agent's), the first ply
  written by the shared-factor rule.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable

from lexrl.envs.argument.factors import FACTORS, factor_number
from lexrl.envs.argument.scenarios import CASES, PLIES, Scenario
from lexrl.envs.argument.teacher import teacher_plies
from lexrl.envs.degenerate import PolicyFactory, generic_policies, last_user_text
from lexrl.rollout.policy import Messages, Teacher
from lexrl.types import Task

ABSTENTION = "TERMINATE: no grounded argument can be made from these cases."
ARGUMENT = "The cases share relevant factors, and the precedents support this side's position."
REVIEWS = {"analyst": "VALID_ARGUMENT", "polisher": "The argument is fine.\nREVISE: no"}


def _ply(abstain: bool, cite_all: bool, task: Task) -> dict:
    """A ply in the JSON schema: every case's own factors cited for it, or none."""
    factors = {case: list(task.inputs[case]) if cite_all else [] for case in CASES}
    return {"argument": ABSTENTION if abstain else ARGUMENT, "abstain": abstain, "factors": factors}


def _plies(abstain: bool, cite_all: bool) -> PolicyFactory:
    def factory(task: Task, rng: random.Random) -> Teacher:
        ply = _ply(abstain, cite_all, task)
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
        for factor, *cells in _FACTOR_ROW.findall(prompt):
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


def _listed(ids: list[str]) -> str:
    return ", ".join(ids)


def _said(cited: dict[str, list[str]]) -> str:
    """Each case's citations said of that case alone: "c1 has F4, F6. c2 has F4."."""
    return " ".join(f"{case} has {_listed(ids)}." for case, ids in cited.items() if ids)


def _citing(how: str, index: int, factors: dict[str, list[str]]) -> dict:
    """An arguing ply: `fixed` cites every listed factor under a sentence naming none, `every`
    cites every listed factor and says each of its case, `shared` cites the factors c1 shares
    with the ply's precedent and says them of both cases."""
    precedent = _PRECEDENT[index]
    if how == "shared":
        shared = [f for f in factors.get("c1", ()) if f in factors.get(precedent, ())]
        cited = {case: shared if case in ("c1", precedent) else [] for case in CASES}
        text = f"{ARGUMENT} c1 and {precedent} share {_listed(shared)}." if shared else ARGUMENT
    else:
        cited = {case: list(factors.get(case, ())) for case in CASES}
        text = ARGUMENT if how == "fixed" else f"{ARGUMENT} {_said(cited)}"
    return {"argument": text, "abstain": False, "factors": cited}


def _abstention() -> dict:
    return {"argument": ABSTENTION, "abstain": True, "factors": {case: [] for case in CASES}}


PlyRule = Callable[[int, dict[str, list[str]], dict[str, str], random.Random], dict]
"""Ply `index` as a dict of the ply schema, from the cases and winners the prompt shows."""


def _from_prompt(rule: PlyRule) -> PolicyFactory:
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


def _ruled(decide: Decide, how: str) -> PolicyFactory:
    """Each ply argued (`_citing(how)`) or abstained as `decide` says."""

    def rule(index: int, factors: dict, winners: dict, rng: random.Random) -> dict:
        argues = decide(index, factors, winners, rng)
        return _citing(how, index, factors) if argues else _abstention()

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


def _own_side(index: int, ids: list[str]) -> list[str]:
    return [f for f in ids if f in FACTORS and FACTORS[f].favors == _FAVOURS[index]]


def _cato(change: Callable[[int, dict, dict, dict], dict]) -> PolicyFactory:
    """The teacher's ply for the prompt's cases, changed by `change(index, ply, factors,
    winners)`."""

    def rule(index: int, factors: dict, winners: dict, rng: random.Random) -> dict:
        return change(index, prompt_teacher_plies(factors, winners)[index], factors, winners)

    return _from_prompt(rule)


def _ids_only(index: int, ply: dict, factors: dict, winners: dict) -> dict:
    if ply["abstain"]:
        return ply
    ids = dict.fromkeys(f for case in CASES for f in ply["factors"][case])
    return ply | {"argument": f"{_listed(list(ids))}."}


def _denied(index: int, ply: dict, factors: dict, winners: dict) -> dict:
    if ply["abstain"]:
        return ply
    denials = [f"{case} does not have {f}." for case in CASES for f in ply["factors"][case]]
    return ply | {"argument": " ".join(denials)}


def _analogy(index: int, factors: dict) -> dict:
    """The analogy of c1 to the ply's precedent on their shared factors of the ply's side, or,
    when they share none, c1's own factors of that side said of c1."""
    precedent = _PRECEDENT[index]
    shared = _own_side(index, [f for f in factors.get("c1", ()) if f in factors.get(precedent, ())])
    if shared:
        cited = {case: shared if case in ("c1", precedent) else [] for case in CASES}
        text = f"Like {precedent}, c1 has {_listed(shared)}."
    else:
        own = _own_side(index, list(factors.get("c1", ())))
        cited = {case: own if case == "c1" else [] for case in CASES}
        text = f"c1 has {_listed(own)}." if own else ARGUMENT
    return {"argument": text, "abstain": False, "factors": cited}


def _analogies_only(index: int, ply: dict, factors: dict, winners: dict) -> dict:
    return ply if ply["abstain"] else _analogy(index, factors)


def _never_abstains(index: int, ply: dict, factors: dict, winners: dict) -> dict:
    return _analogy(index, factors) if ply["abstain"] else ply


def _abstains_on_the_rebuttal(index: int, ply: dict, factors: dict, winners: dict) -> dict:
    return _abstention() if index == 2 else ply


def _other_side(index: int, ply: dict, factors: dict, winners: dict) -> dict:
    if ply["abstain"]:
        return ply
    precedent = _PRECEDENT[index]
    other = [f for f in factors.get("c1", ()) + factors.get(precedent, ())
             if f not in _own_side(index, [f])]  # fmt: skip
    cited = {
        case: [f for f in factors.get(case, ()) if f in other] if case in ("c1", precedent) else []
        for case in CASES
    }
    return {"argument": _said(cited) or ARGUMENT, "abstain": False, "factors": cited}


def _never_compares(index: int, factors: dict, winners: dict, rng: random.Random) -> dict:
    precedent = _PRECEDENT[index]
    cited = {
        case: _own_side(index, list(factors.get(case, ()))) if case in ("c1", precedent) else []
        for case in CASES
    }
    return {"argument": _said(cited) or ARGUMENT, "abstain": False, "factors": cited}


def _copy_previous(task: Task, rng: random.Random) -> Teacher:
    """The last ply the message shows, verbatim (as JSON); the first ply by the shared rule."""
    first = _ruled(_rule, "shared")(task, rng)

    def respond(role: str, messages: Messages) -> str:
        prompt = last_user_text(messages) if isinstance(messages, str) else messages[0]["content"]
        earlier = _EARLIER_PLY.findall(prompt)
        if role in REVIEWS or role == "single" or not earlier:
            return first(role, messages)
        ply = {"argument": earlier[-1], "abstain": "TERMINATE" in earlier[-1]}
        factors, _ = read_cases(prompt)
        named = set(_FACTOR_ID.findall(earlier[-1]))
        ply["factors"] = {case: [f for f in factors.get(case, ()) if f in named] for case in CASES}
        return json.dumps(ply)

    return respond


def argument_policies() -> dict[str, PolicyFactory]:
    """Abstain always (citing nothing, or every factor), argue always (citing every factor of
    each case, or none), and the prompt-reading rules of the module docstring."""
    return {
        **generic_policies(),
        "always_abstain": _plies(abstain=True, cite_all=False),
        "abstain_citing_every_factor": _plies(abstain=True, cite_all=True),
        "cite_every_factor": _plies(abstain=False, cite_all=True),
        "never_abstain_uncited": _plies(abstain=False, cite_all=False),
        "always_argue_naming_every_factor": _ruled(lambda *_: True, "every"),
        "cato_ids_only": _cato(_ids_only),
        "cato_denied": _cato(_denied),
        "cato_analogies_only": _cato(_analogies_only),
        "cato_never_abstains": _cato(_never_abstains),
        "cato_abstains_on_the_rebuttal": _cato(_abstains_on_the_rebuttal),
        "cato_decisions_citing_the_other_side": _cato(_other_side),
        "never_compares": _from_prompt(_never_compares),
        "outcome_only_never_compares": _from_prompt(
            lambda i, f, w, rng: (
                _never_compares(i, f, w, rng) if _outcome_only(i, f, w, rng) else _abstention()
            )
        ),
        "rule_fixed_sentence_every_factor": _ruled(_rule, "fixed"),
        "rule_naming_every_factor": _ruled(_rule, "every"),
        "rule_naming_shared_factors": _ruled(_rule, "shared"),
        "outcome_only_naming_every_factor": _ruled(_outcome_only, "every"),
        "outcome_only_naming_shared_factors": _ruled(_outcome_only, "shared"),
        "random_decision_naming_shared_factors": _ruled(_random, "shared"),
        "copy_previous_ply": _copy_previous,
    }
