"""The argument env's degenerate policies (`lexrl audit`): plies that ignore whether the triple
can be argued, and the cheap rules a reviewer would write over the prompt. As analyst and
polisher (RMA) every one of them rubber-stamps every draft, the reviewers' own cheap strategy.

The rules read only the prompt they are sent (the cases as `render_cases` prints them, the
earlier plies, "Write ply N of 3"), never the gold:
- `rule_*`: argue a ply exactly when its precedent was decided for its side and shares any
  factor id with c1 (the two-part decision rule that gets every decision right on generated
  triples), citing every listed factor under a fixed sentence, naming every factor in the text,
  or citing every factor c1 shares with the precedent whatever side it favours (reading which
  side each factor favours is the task's skill, not a surface cue: a rule that does it, and so
  writes the analogy, is a partial teacher and earns most of the reward);
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

from lexrl.envs.argument.scenarios import CASES, PLIES
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
_PLY_REQUEST = re.compile(r"Write ply (\d) of 3")
_EARLIER_PLY = re.compile(r"^Ply \d \([^)]*\): (.*)$", re.M)
_PRECEDENT = ("c2", "c3", "c2")
_SIDE = ("plaintiff", "defendant", "plaintiff")


def read_cases(prompt: str) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The factor ids of c1, c2, c3 and the precedents' winners ("plaintiff" / "defendant") as
    the prompt prints them."""
    factors, winners = {}, {}
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


def _citing(how: str, index: int, factors: dict[str, list[str]]) -> dict:
    """An arguing ply: `fixed` cites every listed factor under a sentence naming none, `every`
    names and cites every listed factor, `shared` names and cites the factors c1 shares with
    the ply's precedent, for both cases."""
    if how == "shared":
        precedent = _PRECEDENT[index]
        shared = [f for f in factors.get("c1", ()) if f in factors.get(precedent, ())]
        cited = {case: shared if case in ("c1", precedent) else [] for case in CASES}
    else:
        cited = {case: list(factors.get(case, ())) for case in CASES}
    text = ARGUMENT
    if how != "fixed":
        text = f"{ARGUMENT} The factors: {', '.join(dict.fromkeys(f for ids in cited.values() for f in ids))}."
    return {"argument": text, "abstain": False, "factors": cited}


def _abstention() -> dict:
    return {"argument": ABSTENTION, "abstain": True, "factors": {case: [] for case in CASES}}


def _ruled(decide: Decide, how: str) -> PolicyFactory:
    """Each ply argued (`_citing(how)`) or abstained as `decide` says, from the prompt alone."""

    def factory(task: Task, rng: random.Random) -> Teacher:
        def ply(index: int, factors: dict, winners: dict) -> dict:
            argues = decide(index, factors, winners, rng)
            return _citing(how, index, factors) if argues else _abstention()

        def respond(role: str, messages: Messages) -> str:
            if role in REVIEWS:
                return REVIEWS[role]
            prompt = (
                last_user_text(messages) if isinstance(messages, str) else messages[0]["content"]
            )
            factors, winners = read_cases(prompt)
            if role == "single":
                return json.dumps({name: ply(i, factors, winners) for i, name in enumerate(PLIES)})
            request = _PLY_REQUEST.search(prompt)
            index = int(request.group(1)) - 1 if request else 0
            return json.dumps(ply(index, factors, winners))

        return respond

    return factory


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
        "rule_fixed_sentence_every_factor": _ruled(_rule, "fixed"),
        "rule_naming_every_factor": _ruled(_rule, "every"),
        "rule_naming_shared_factors": _ruled(_rule, "shared"),
        "outcome_only_naming_every_factor": _ruled(_outcome_only, "every"),
        "outcome_only_naming_shared_factors": _ruled(_outcome_only, "shared"),
        "random_decision_naming_shared_factors": _ruled(_random, "shared"),
        "copy_previous_ply": _copy_previous,
    }
