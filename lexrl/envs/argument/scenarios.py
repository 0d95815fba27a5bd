"""Case triples of the 3-ply argument task (Zhang and Ashley 2025, "Mitigating Manipulation and
Enhancing Persuasion", arXiv:2506.02992, sec. 4.2 and Table 1):
c1 the current case (no outcome), c2 the plaintiff's precedent, c3 the defendant's precedent,
each a set of CATO factor ids.

- arguable: c2 decided for the plaintiff, c3 for the defendant, c1 shares >= 1 pro-plaintiff
  factor with c2 and >= 1 pro-defendant factor with c3. Every ply can be argued.
- mismatched: the same overlaps, outcomes flipped (c2 for the defendant, c3 for the plaintiff):
  neither precedent helps the side that would cite it, so every ply must abstain. The authors'
  generator (`scenario_generator.py`) instead swaps the two precedents whole, factor sets with
  outcomes (`MISMATCHED_MODES`: `swap_precedents`), so c2 (won by the defendant) shares the
  pro-defendant factor with c1 and c3 (won by the plaintiff) the pro-plaintiff one; every ply
  must abstain there too.
- non_arguable: c1 shares no factor with c2 nor with c3 (outcomes as arguable): every ply must
  abstain.

At complexity k each case has k-1..k+1 factors (at least 1). The paper's generator can emit
"arguable" triples without the overlaps; `generate_scenario` builds each kind's overlaps (or
their absence) first and fills the rest at random, so every triple meets its definition.

One arguable triple (Table 1): c1 = F4, F5, F23; c2 (plaintiff) = F2, F4, F16; c3 (defendant) =
F2, F5, F12. c1 and c2 share F4 (Agreed-not-to-disclose, P); c1 and c3 share F5
(Agreement-not-specific, D).
"""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lexrl.envs.argument.factors import FACTORS, factor_number, normalise_factor_id
from lexrl.envs.argument.options import GENERATORS, KINDS, MISMATCHED_MODES
from lexrl.envs.data import utf8
from lexrl.errors import ConfigError, ScenarioError

CASES = ("c1", "c2", "c3")
PLIES = ("plaintiff", "defendant", "rebuttal")
"""The three plies in argument order; `expected_abstentions` and the metrics use this order."""
MAX_COMPLEXITY = 12
"""A non_arguable c2 is drawn from the factors c1 lacks: (k+1) + (k+1) <= 26 factors."""
SPLIT_SEEDS = {"train": range(0, 1_000_000), "test": range(1_000_000, 2_000_000)}
"""Generator seeds of each split; the ranges are disjoint, so no test triple is a train triple
drawn from the same seed."""

_OUTCOMES = {
    "arguable": ("P", "D"),
    "mismatched": ("D", "P"),
    "non_arguable": ("P", "D"),
}
_PRO = {side: [f.id for f in FACTORS.values() if f.favors == side] for side in ("P", "D")}


@dataclass(frozen=True)
class Scenario:
    id: str
    kind: str
    """One of KINDS: what the triple was built (or declared) to be."""
    c1: tuple[str, ...]
    """The current case's factor ids, sorted by number."""
    c2: tuple[str, ...]
    """The plaintiff's precedent's factor ids, sorted by number."""
    c3: tuple[str, ...]
    """The defendant's precedent's factor ids, sorted by number."""
    c2_outcome: str
    """Who won c2: "P" (plaintiff) or "D" (defendant)."""
    c3_outcome: str
    """Who won c3: "P" (plaintiff) or "D" (defendant)."""
    complexity: int | None
    """Each case has complexity-1..complexity+1 factors; None for a loaded triple that states
    none (its case sizes are then only required to be >= 1)."""
    seed: int | None = None
    """The generator seed; None for a triple written by hand."""

    def case(self, name: str) -> tuple[str, ...]:
        """The factor ids of case "c1", "c2" or "c3"."""
        return {"c1": self.c1, "c2": self.c2, "c3": self.c3}[name]


TABLE_1 = Scenario(
    id="table1-arguable",
    kind="arguable",
    c1=("F4", "F5", "F23"),
    c2=("F2", "F4", "F16"),
    c3=("F2", "F5", "F12"),
    c2_outcome="P",
    c3_outcome="D",
    complexity=3,
)
"""The paper's Table 1 arguable triple (the module docstring's example): N_gt = 9."""


def _shares(a: tuple[str, ...], b: tuple[str, ...], side: str) -> list[str]:
    """Factors in both cases that favour `side`, by number."""
    return [f for f in a if f in b and f in FACTORS and FACTORS[f].favors == side]


def expected_abstentions(s: Scenario) -> tuple[bool, bool, bool]:
    """Whether each ply (plaintiff, defendant, rebuttal) must abstain, from the factors and
    outcomes alone (a loaded triple's `kind` is a claim, not evidence).

    The plaintiff can argue only from a c2 it won that shares a pro-plaintiff factor with c1;
    the defendant only from a c3 it won that shares a pro-defendant factor with c1. The rebuttal
    abstains exactly when the plaintiff does: it reinforces the plaintiff's analogy to c2 (which
    needs that grounding) and distinguishes c3 (which needs only differences, so adds no
    condition).
    """
    plaintiff = not (s.c2_outcome == "P" and _shares(s.c1, s.c2, "P"))
    defendant = not (s.c3_outcome == "D" and _shares(s.c1, s.c3, "D"))
    return plaintiff, defendant, plaintiff


def violations(s: Scenario) -> list[str]:
    """What keeps `s` from being a well-formed triple of its kind; empty when it is one."""
    problems = []
    if s.kind not in KINDS:
        problems.append(f"kind `{s.kind}` is not one of {', '.join(KINDS)}")
    for name in ("c2_outcome", "c3_outcome"):
        if getattr(s, name) not in ("P", "D"):
            problems.append(f"{name} is {getattr(s, name)!r}, not 'P' or 'D'")
    for name in CASES:
        ids = s.case(name)
        unknown = [f for f in ids if f not in FACTORS]
        if unknown:
            problems.append(f"{name} has unknown factor id(s) {', '.join(unknown)}")
        elif list(ids) != sorted(set(ids), key=factor_number):
            problems.append(f"{name} is not sorted by factor number without repeats")
        low, high = 1, len(FACTORS)
        if s.complexity is not None:
            low, high = max(1, s.complexity - 1), s.complexity + 1
        if not low <= len(ids) <= high:
            problems.append(f"{name} has {len(ids)} factors, outside {low}..{high}")
    if s.kind in ("arguable", "mismatched"):
        p, d = _OUTCOMES[s.kind]
        if (s.c2_outcome, s.c3_outcome) != (p, d):
            problems.append(f"{s.kind} needs c2_outcome {p} and c3_outcome {d}")
        overlaps = _shares(s.c1, s.c2, "P") and _shares(s.c1, s.c3, "D")
        swapped = _shares(s.c1, s.c2, "D") and _shares(s.c1, s.c3, "P")
        if s.kind == "mismatched" and not (overlaps or swapped):
            problems.append(
                "mismatched needs c1 to share a pro-plaintiff factor with c2 and a pro-defendant "
                "one with c3, or (precedents swapped) a pro-defendant one with c2 and a "
                "pro-plaintiff one with c3"
            )
        if s.kind == "arguable":
            if not _shares(s.c1, s.c2, "P"):
                problems.append("c1 and c2 share no pro-plaintiff factor")
            if not _shares(s.c1, s.c3, "D"):
                problems.append("c1 and c3 share no pro-defendant factor")
    elif s.kind == "non_arguable":
        if (s.c2_outcome, s.c3_outcome) != ("P", "D"):
            problems.append("non_arguable needs c2_outcome P and c3_outcome D")
        for name, other in (("c2", s.c2), ("c3", s.c3)):
            shared = [f for f in s.c1 if f in other]
            if shared:
                problems.append(f"c1 and {name} share {', '.join(shared)}")
    return problems


def _sorted(ids: set[str]) -> tuple[str, ...]:
    return tuple(sorted(ids, key=factor_number))


def _authors_precedent(
    c1: set[str], side: str, size: int, rng: random.Random, all_ids: list[str]
) -> set[str]:
    """A precedent won by `side`, as the authors' generator builds it (docs/sources.md):
    `randint(1, min(3, n))` of c1's n factors favouring `side` (none when c1 has none), with
    probability 0.7 `randint(1, min(3, m))` of c1's m other factors, then random factors up to
    `size` (more when the factors taken from c1 already exceed it)."""
    own = [f for f in _sorted(c1) if FACTORS[f].favors == side]
    taken = set(rng.sample(own, rng.randint(1, min(3, len(own))))) if own else set()
    if rng.random() < 0.7:
        others = [f for f in _sorted(c1) if f not in taken]
        if others:
            taken |= set(rng.sample(others, rng.randint(1, min(3, len(others)))))
    rest = [f for f in all_ids if f not in taken]
    return taken | set(rng.sample(rest, max(0, size - len(taken))))


def authors_draw(complexity: int, rng: random.Random) -> tuple[set[str], set[str], set[str]]:
    """c1, the plaintiff's precedent and the defendant's precedent of one "arguable" triple as
    the authors' generator draws it: c1 of complexity-1..complexity+1 factors (at least 2), each
    precedent built from it (`_authors_precedent`). c1 may lack one side's factors, and the
    triple then lacks an overlap its kind needs."""
    all_ids = list(FACTORS)

    def size(at_least: int = 1) -> int:
        return rng.randint(max(at_least, complexity - 1), complexity + 1)

    c1 = set(rng.sample(all_ids, size(at_least=2)))
    return (
        c1,
        _authors_precedent(c1, "P", size(), rng, all_ids),
        _authors_precedent(c1, "D", size(), rng, all_ids),
    )


def _draw(
    kind: str, complexity: int, rng: random.Random, generator: str
) -> tuple[set[str], set[str], set[str]]:
    """c1, the plaintiff's precedent and the defendant's precedent of an arguable (or, the same
    draws, mismatched) or non_arguable triple."""
    all_ids = list(FACTORS)

    def size(at_least: int = 1) -> int:
        return rng.randint(max(at_least, complexity - 1), complexity + 1)

    if kind == "non_arguable":
        c1 = set(rng.sample(all_ids, size()))
        outside = [f for f in all_ids if f not in c1]
        return c1, set(rng.sample(outside, size())), set(rng.sample(outside, size()))
    if generator == "anchored":
        p, d = rng.choice(_PRO["P"]), rng.choice(_PRO["D"])
        # c1 holds both anchors, so it needs two factors even at complexity 1.
        c1 = {p, d, *rng.sample([f for f in all_ids if f not in (p, d)], size(at_least=2) - 2)}
        c2 = {p, *rng.sample([f for f in all_ids if f != p], size() - 1)}
        c3 = {d, *rng.sample([f for f in all_ids if f != d], size() - 1)}
        return c1, c2, c3
    # The authors keep a c1 without one side's factors, and their "arguable" triple then has
    # no overlap for that side (docs/sources.md); keeping only the draws whose c1 has both sides
    # makes every triple what it claims.
    while True:
        c1, c2, c3 = authors_draw(complexity, rng)
        if all(any(FACTORS[f].favors == side for f in c1) for side in "PD"):
            return c1, c2, c3


def generate_scenario(
    kind: str,
    complexity: int,
    seed: int,
    mismatched: str = "swap_precedents",
    generator: str = "authors",
) -> Scenario:
    """The triple of `kind` drawn with `random.Random(seed)`, its definition met by construction.

    arguable / mismatched: with `generator: authors` (the default) the precedents are built from
    the current case's factors as the authors' generator does (`_authors_precedent`); with
    `anchored`, one pro-plaintiff factor is put in c1 and c2 and one pro-defendant factor in c1
    and c3, the rest drawn from all factors. The two kinds take the same draws: with `mismatched:
    swap_precedents` a mismatched triple is the arguable triple of its seed with c2 and c3
    swapped, factors and outcomes together (the authors' generator); with `flip_outcomes` the
    factors are kept and the outcomes swapped (as Table 1 pairs them). non_arguable: c1 drawn
    first, c2 and c3 from the factors c1 lacks.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown scenario kind `{kind}`; one of {', '.join(KINDS)}")
    if mismatched not in MISMATCHED_MODES:
        raise ConfigError(f"mismatched mode {mismatched!r} is not one of {MISMATCHED_MODES}")
    if generator not in GENERATORS:
        raise ConfigError(f"generator {generator!r} is not one of {GENERATORS}")
    if not 1 <= complexity <= MAX_COMPLEXITY:
        raise ConfigError(f"complexity {complexity} is outside 1..{MAX_COMPLEXITY}")
    c1, c2, c3 = _draw(kind, complexity, random.Random(seed), generator)
    c2_outcome, c3_outcome = _OUTCOMES[kind]
    name = kind
    if kind == "mismatched" and mismatched == "swap_precedents":
        c2, c3, name = c3, c2, "mismatched-swapped"
    prefix = "" if generator == "authors" else f"{generator}-"
    scenario = Scenario(
        id=f"{prefix}{name}-c{complexity}-s{seed}",
        kind=kind,
        c1=_sorted(c1),
        c2=_sorted(c2),
        c3=_sorted(c3),
        c2_outcome=c2_outcome,
        c3_outcome=c3_outcome,
        complexity=complexity,
        seed=seed,
    )
    problems = violations(scenario)
    if problems:
        raise RuntimeError(f"generator bug: {scenario.id} violates its kind: {'; '.join(problems)}")
    return scenario


def generate_scenarios(
    kinds: Sequence[str],
    complexity: int,
    seeds: range,
    mismatched: str = "swap_precedents",
    generator: str = "authors",
) -> list[Scenario]:
    """One triple per kind and seed, kind by kind in the order given."""
    return [
        generate_scenario(kind, complexity, seed, mismatched, generator)
        for kind in kinds
        for seed in seeds
    ]


def overlap_statistics(scenarios: Sequence[Scenario]) -> dict[str, float]:
    """How much the precedents of arguable triples overlap the current case
    (`triple_overlaps`)."""
    arguable = [(s.c1, s.c2, s.c3) for s in scenarios if s.kind == "arguable"]
    if not arguable:
        raise ValueError("overlap statistics need arguable triples")
    return triple_overlaps(arguable)


def triple_overlaps(triples: Sequence[tuple[Sequence[str], ...]]) -> dict[str, float]:
    """Of (c1, c2, c3) triples: the mean number of factors a precedent shares with c1, its
    standard error, and the share of triples with a precedent equal to c1 and its standard
    error. The authors' generator gives 2.20 and 140 of 300 at complexity 3, 3.21 and 51 of
    300 at complexity 5, over 3,000 seeds (docs/sources.md)."""
    shared = [len(set(c1) & set(p)) for c1, c2, c3 in triples for p in (c2, c3)]
    equal = [set(c2) == set(c1) or set(c3) == set(c1) for c1, c2, c3 in triples]
    share = sum(equal) / len(equal)
    return {
        "shared_per_precedent": statistics.fmean(shared),
        "shared_per_precedent_se": statistics.stdev(shared) / math.sqrt(len(shared)),
        "triples_with_a_precedent_equal_to_c1": share,
        "triples_with_a_precedent_equal_to_c1_se": math.sqrt(share * (1 - share) / len(equal)),
    }


def split_seeds(split: str, n: int) -> range:
    """The first `n` generator seeds of `split` ("train" or "test", see SPLIT_SEEDS)."""
    if split not in SPLIT_SEEDS:
        raise ValueError(f"unknown split `{split}`; one of {', '.join(SPLIT_SEEDS)}")
    seeds = SPLIT_SEEDS[split]
    if not 0 <= n <= len(seeds):
        raise ConfigError(f"{n} seeds asked of split `{split}`, which has {len(seeds)}")
    return seeds[:n]


def scenario_to_json(s: Scenario) -> str:
    """One line of a scenario file (no newline), as `load_scenarios` reads it back."""
    return json.dumps(
        {
            "id": s.id,
            "kind": s.kind,
            "c1": list(s.c1),
            "c2": list(s.c2),
            "c3": list(s.c3),
            "c2_outcome": s.c2_outcome,
            "c3_outcome": s.c3_outcome,
            "complexity": s.complexity,
            "seed": s.seed,
        }
    )


def _case_field(record: dict, name: str, where: str) -> tuple[str, ...]:
    value = record.get(name)
    if not isinstance(value, list):
        raise ScenarioError(f"{where}: `{name}` must be a list of factor ids, got {value!r}")
    ids = []
    for item in value:
        factor_id = normalise_factor_id(item) if isinstance(item, str) else None
        if factor_id not in FACTORS:
            raise ScenarioError(f"{where}: `{name}` has unknown factor id {item!r}")
        if factor_id in ids:
            raise ScenarioError(f"{where}: `{name}` lists {factor_id} twice")
        ids.append(factor_id)
    return tuple(sorted(ids, key=factor_number))


def _optional_int(record: dict, name: str, where: str) -> int | None:
    value = record.get(name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise ScenarioError(f"{where}: `{name}` must be an integer, got {value!r}")
    return value


def _scenario(record: object, where: str) -> Scenario:
    if not isinstance(record, dict):
        raise ScenarioError(f"{where}: expected a JSON object, got {type(record).__name__}")
    if not isinstance(record.get("id"), str) or not record["id"]:
        raise ScenarioError(f"{where}: `id` must be a non-empty string")
    if record.get("kind") not in KINDS:
        raise ScenarioError(
            f"{where}: `kind` is {record.get('kind')!r}, not one of {', '.join(KINDS)}"
        )
    for name in ("c2_outcome", "c3_outcome"):
        if record.get(name) not in ("P", "D"):
            raise ScenarioError(f"{where}: `{name}` is {record.get(name)!r}, not 'P' or 'D'")
    scenario = Scenario(
        id=record["id"],
        kind=record["kind"],
        c1=_case_field(record, "c1", where),
        c2=_case_field(record, "c2", where),
        c3=_case_field(record, "c3", where),
        c2_outcome=record["c2_outcome"],
        c3_outcome=record["c3_outcome"],
        complexity=_optional_int(record, "complexity", where),
        seed=_optional_int(record, "seed", where),
    )
    problems = violations(scenario)
    if problems:
        raise ScenarioError(
            f"{where}: scenario `{scenario.id}` is not a valid {scenario.kind} triple: "
            + "; ".join(problems)
        )
    return scenario


def load_scenarios(path: str | Path) -> list[Scenario]:
    """The triples of a JSONL file, one object a line: `id`, `kind`, `c1`, `c2`, `c3` (lists of
    factor ids, normalised and sorted), `c2_outcome`, `c3_outcome` ("P" / "D"), optional
    `complexity` and `seed`; other keys are ignored, blank lines skipped. A bad line (bad JSON,
    a wrong field, an unknown factor id, a repeated id, a triple that is not what its `kind`
    says) raises ScenarioError naming `path:line` and the field."""
    path = Path(path)
    if not path.is_file():
        raise ScenarioError(f"scenario file not found: {path}")
    scenarios: list[Scenario] = []
    seen: dict[str, str] = {}
    with utf8(path), path.open(encoding="utf-8") as file:
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ScenarioError(f"{where}: not valid JSON ({error.msg})") from None
            scenario = _scenario(record, where)
            if scenario.id in seen:
                raise ScenarioError(
                    f"{where}: `id` {scenario.id!r} already used on {seen[scenario.id]}"
                )
            seen[scenario.id] = where
            scenarios.append(scenario)
    return scenarios
