"""What a ply should claim (the CATO analogies and distinctions of its side) and how its claims
are checked against the cases: `lexrl.envs.argument.grounding`, and the reward built on it."""

import json
import random

import pytest

from lexrl.envs.argument.degenerate import argument_policies, read_cases
from lexrl.envs.argument.env import ArgumentEnv, render_cases, to_task
from lexrl.envs.argument.factors import FACTORS
from lexrl.envs.argument.grounding import (
    Part,
    argues_grounded,
    argument_quality,
    citation_parts,
    citation_quality,
    claim_is_true,
    fabrications,
    relevant_citations,
    relevant_claims,
)
from lexrl.envs.argument.options import ArgumentEnvConfig
from lexrl.envs.argument.parsing import ParsedPly, analogy, distinction, parse_ply
from lexrl.envs.argument.reward import (
    ply_components,
    right_decision,
    task_score,
    triple_components,
    weighted,
)
from lexrl.envs.argument.scenarios import KINDS, TABLE_1, Scenario, generate_scenario
from lexrl.envs.argument.teacher import teacher_plies, teacher_text
from lexrl.errors import ConfigError
from tests.env_options import load_env

# Table 1: c1 = F4 (P), F5 (D), F23 (D); c2, won by the plaintiff = F2 (P), F4 (P), F16 (D);
# c3, won by the defendant = F2 (P), F5 (D), F12 (P).
TEACHER = teacher_plies(TABLE_1)
WEIGHTS = ArgumentEnv(ArgumentEnvConfig()).weights
# The env's default weights: abstention 2, hallucination 0.25, utilisation 2 a part, format
# 0.05, over-abstention 0, failed abstention -2. The teacher's Table 1 triple: 5 parts of
# quality 1, nothing fabricated, every ply valid: 2 * 5 + 0.25 + 0.05.
TEACHER_REWARD = 10.30


def parsed(ply: dict) -> ParsedPly:
    return parse_ply(teacher_text(ply))


def reward(scenario: Scenario, plies) -> float:
    return sum(weighted(triple_components(scenario, plies), WEIGHTS).values())


def with_claims(index: int, analogies=(), distinctions=(), plies=TEACHER) -> list[ParsedPly]:
    """The teacher's three plies, ply `index` with the claims added."""
    changed = plies[index] | {
        "analogies": plies[index]["analogies"] + [list(c) for c in analogies],
        "distinctions": plies[index]["distinctions"] + [list(c) for c in distinctions],
    }
    return [parsed(changed if i == index else ply) for i, ply in enumerate(plies)]


def test_citation_parts_follow_the_sides_on_table_1():
    plaintiff, defendant, rebuttal = (citation_parts(TABLE_1, i) for i in range(3))
    assert plaintiff == [Part("analogy", "c2", frozenset({analogy("F4", "c1", "c2")}))]
    # c2 distinguished by its pro-plaintiff F2 that c1 lacks and by c1's pro-defendant F5, F23
    # that c2 lacks (not F16: c2 has it and c1 lacks it, but it favours the defendant, so it
    # does not explain c2's win for the plaintiff); c3 cited on the shared pro-defendant F5.
    assert defendant == [
        Part(
            "distinction",
            "c2",
            frozenset(
                {
                    distinction("F2", "c2", "c1"),
                    distinction("F5", "c1", "c2"),
                    distinction("F23", "c1", "c2"),
                }
            ),
        ),
        Part("analogy", "c3", frozenset({analogy("F5", "c1", "c3")})),
    ]
    # c3 has no pro-defendant factor c1 lacks; c1's pro-plaintiff F4 is missing from c3. Not
    # F2 or F12: they favour the plaintiff, who lost c3 with them.
    assert rebuttal == [
        Part("distinction", "c3", frozenset({distinction("F4", "c1", "c3")})),
        Part("analogy", "c2", frozenset({analogy("F4", "c1", "c2")})),
    ]
    assert relevant_citations(TABLE_1, 1) == {
        ("c2", "F2"),
        ("c1", "F5"),
        ("c1", "F23"),
        ("c3", "F5"),
    }
    mismatched = generate_scenario("mismatched", 3, 5)
    assert [citation_parts(mismatched, i) for i in range(3)] == [[], [], []]


def test_a_claim_is_true_exactly_when_the_cases_bear_it_out():
    assert claim_is_true(TABLE_1, analogy("F4", "c2", "c1"))
    assert claim_is_true(TABLE_1, analogy("F2", "c2", "c3"))
    assert not claim_is_true(TABLE_1, analogy("F2", "c1", "c2"))  # c1 lacks F2
    assert not claim_is_true(TABLE_1, analogy("F99", "c1", "c2"))
    assert claim_is_true(TABLE_1, distinction("F2", "c2", "c1"))
    assert not claim_is_true(TABLE_1, distinction("F2", "c1", "c2"))  # the reverse
    assert not claim_is_true(TABLE_1, distinction("F4", "c2", "c1"))  # both have F4
    assert not claim_is_true(TABLE_1, distinction("F7", "c2", "c1"))  # neither has F7
    ply = parsed(
        TEACHER[0]
        | {
            "analogies": [["F2", "c1", "c2"], ["F4", "c1", "c2"]],
            "distinctions": [["F4", "c2", "c1"]],
        }
    )
    assert fabrications(TABLE_1, ply) == ["F2 shared by c1 and c2", "F4 in c2, not in c1"]


def test_the_teachers_plies_are_quality_1_and_each_part_is_needed():
    for kind in KINDS:
        for seed in range(300):
            scenario = generate_scenario(kind, 2 + seed % 7, seed)
            for index, ply in enumerate(teacher_plies(scenario)):
                parts = citation_parts(scenario, index)
                assert argument_quality(scenario, index, parsed(ply)) == float(bool(parts))
                for part in parts:
                    # The ply without this part's claims: the worst part's recall is 0.
                    kept = [c for c in parsed(ply).claims if c not in part.claims]
                    skipped = ply | {
                        "analogies": [[c.factor, *c.cases] for c in kept if c.kind == "analogy"],
                        "distinctions": [
                            [c.factor, *c.cases] for c in kept if c.kind == "distinction"
                        ],
                    }
                    assert argument_quality(scenario, index, parsed(skipped)) == 0.0, scenario


def test_a_part_made_in_part_earns_the_square_of_its_recall():
    # The defendant's distinction of c2 has 3 claims; without F23 its recall is 2/3, the
    # analogy's 1: quality min(2/3, 1)^2 = 4/9; with F2 alone, (1/3)^2 = 1/9.
    defendant = TEACHER[1] | {"distinctions": [["F2", "c2", "c1"], ["F5", "c1", "c2"]]}
    assert argument_quality(TABLE_1, 1, parsed(defendant)) == pytest.approx(4 / 9)
    defendant = TEACHER[1] | {"distinctions": [["F2", "c2", "c1"]]}
    assert argument_quality(TABLE_1, 1, parsed(defendant)) == pytest.approx(1 / 9)


def test_the_teachers_triple_on_table_1_earns_the_reward_derived_by_hand():
    plies = [parsed(ply) for ply in TEACHER]
    assert triple_components(TABLE_1, plies) == {
        "abstention": 0.0,
        "hallucination": 1.0,
        "utilisation": 5.0,
        "format": 1.0,
        "over_abstention": 0.0,
        "failed_abstention": 0.0,
    }
    assert reward(TABLE_1, plies) == pytest.approx(TEACHER_REWARD)


# Each false or contradictory claim added to one teacher ply of Table 1, with the ply's quality
# and the triple's reward derived by hand. The defendant argues 4 claims, so one claim outside
# them costs 1/4; the rebuttal argues 2 (1/2); the plaintiff 1, so one false claim cancels it.
# Reward = 2 * quality * 5 parts + 0.25 * (1 - N_h / 9) + 0.05.
COSTLY = [
    # A false analogy: c3 has F12, c1 lacks it; F12 cited for c1 is one fabrication (N_h 1).
    pytest.param(1, [("F12", "c1", "c3")], [], 0.75, 7.5 + 0.25 * 8 / 9 + 0.05, id="false_analogy"),
    # A false distinction: c1 has F4 too; F4 cited for c2 is true, so N_h stays 0.
    pytest.param(1, [], [("F4", "c2", "c1")], 0.75, 7.5 + 0.25 + 0.05, id="false_distinction"),
    # F4 shared by c1 and c2, and F4 in c2 not in c1, asserted together.
    pytest.param(2, [], [("F4", "c2", "c1")], 0.5, 5.0 + 0.25 + 0.05, id="analogy_and_denial"),
    # A distinction beside its reverse: the reverse cites F2 for c1, which lacks it.
    pytest.param(
        1, [], [("F2", "c1", "c2")], 0.75, 7.5 + 0.25 * 8 / 9 + 0.05, id="distinction_and_reverse"
    ),
    # The plaintiff's false analogy: quality 1 - 1/1 = 0, the triple's utilisation 0.
    pytest.param(
        0, [("F2", "c1", "c2")], [], 0.0, 0.25 * 8 / 9 + 0.05, id="plaintiffs_false_analogy"
    ),
]


@pytest.mark.parametrize(("index", "analogies", "distinctions", "quality", "expected"), COSTLY)
def test_a_false_or_contradictory_claim_costs(index, analogies, distinctions, quality, expected):
    plies = with_claims(index, analogies, distinctions)
    assert fabrications(TABLE_1, plies[index])
    assert argument_quality(TABLE_1, index, plies[index]) == pytest.approx(quality)
    assert reward(TABLE_1, plies) == pytest.approx(expected)
    assert reward(TABLE_1, plies) < TEACHER_REWARD
    own = sum(weighted(ply_components(TABLE_1, index, plies[index]), WEIGHTS).values())
    alone = sum(weighted(ply_components(TABLE_1, index, parsed(TEACHER[index])), WEIGHTS).values())
    assert own < alone


def _false_claims(s: Scenario, index: int) -> list[tuple[str, tuple | None, tuple | None]]:
    """Claims of each costly kind about c1 and ply `index`'s precedent, where the cases allow."""
    precedent = "c3" if index == 1 else "c2"
    c1, other = set(s.c1), set(s.case(precedent))
    found = []
    for f in sorted(other - c1)[:1]:  # c1 lacks it: an analogy false, a distinction reversed
        found += [("false_analogy", (f, "c1", precedent), None)]
        found += [("reversed_distinction", None, (f, "c1", precedent))]
    for f in sorted(c1 & other)[:1]:  # both have it: asserted and denied
        found += [("asserted_and_denied", (f, "c1", precedent), (f, precedent, "c1"))]
    return found


def test_false_claims_cost_on_every_generated_arguable_triple():
    checked = 0
    for seed in range(200):
        scenario = generate_scenario("arguable", 2 + seed % 7, seed)
        plies = teacher_plies(scenario)
        best = reward(scenario, [parsed(p) for p in plies])
        for index in range(3):
            for name, added, denied in _false_claims(scenario, index):
                changed = with_claims(
                    index, [added] if added else [], [denied] if denied else [], plies
                )
                assert argument_quality(scenario, index, changed[index]) < 1.0, (name, scenario)
                assert reward(scenario, changed) < best, (name, scenario)
                checked += 1
    assert checked > 600


# Scenario W: c1 and c3 share the pro-plaintiff F6, but c3 was won by the defendant.
W = Scenario("w", "arguable", ("F4", "F5", "F6"), ("F4", "F16"), ("F5", "F6", "F12"), "P", "D", 3)


@pytest.mark.parametrize(
    ("scenario", "claim"),
    [
        # Table 1: c1 and c3 truly share F5, but it is no analogy of c1 to the plaintiff's c2.
        (TABLE_1, analogy("F5", "c1", "c3")),
        # W: c1 and c3 share F6, pro-plaintiff, but c3 is the defendant's precedent.
        (W, analogy("F6", "c1", "c3")),
        # True claims between the precedents say nothing of c1.
        (TABLE_1, analogy("F2", "c2", "c3")),
        (TABLE_1, distinction("F16", "c2", "c3")),
    ],
)
def test_a_true_claim_about_the_wrong_case_earns_nothing(scenario, claim):
    assert claim_is_true(scenario, claim)
    entry = [claim.factor, *claim.cases]
    plies = teacher_plies(scenario)
    key = "analogies" if claim.kind == "analogy" else "distinctions"
    added = [parsed(plies[0] | {key: plies[0][key] + [entry]}), *map(parsed, plies[1:])]
    assert reward(scenario, added) <= reward(scenario, [parsed(p) for p in plies])
    assert argument_quality(scenario, 0, added[0]) < 1.0
    # As the plaintiff's only claim it grounds nothing: the decision to argue is wrong.
    only = parsed(
        {"abstain": False, "analogies": [], "distinctions": [], "argument": ""} | {key: [entry]}
    )
    assert not argues_grounded(scenario, 0, only) and not right_decision(scenario, 0, only)
    assert ply_components(scenario, 0, only) == dict.fromkeys(
        ply_components(scenario, 0, only), 0.0
    )


PROSE = [
    "",
    "Like c2, c1 should be decided for the plaintiff.",
    "c1 does not share F4 with c2, and c2 has no F2. None of this is true.",
    "Unlike c2, c1 lacks every factor; c1 should be decided for the defendant.",
    "TERMINATE",
    "F1, F2, F3, F4, F5, F6, F7, F8, F10, F11, F12, F13, F14, F15, F16, F17, F18, F19, F20, F21.",
]


def _triples():
    yield TABLE_1
    for kind in KINDS:
        for seed in range(20):
            yield generate_scenario(kind, 2 + seed % 7, seed)


def _skipping_distinctions(plies):
    """The teacher's claims without the distinctions: a flawed triple whose reward is not 0."""
    return tuple(p if p["abstain"] else p | {"distinctions": []} for p in plies)


def test_the_reward_does_not_change_when_only_the_prose_does():
    for scenario in _triples():
        for plies in (teacher_plies(scenario), _skipping_distinctions(teacher_plies(scenario))):
            scores = set()
            for text in PROSE + [p["argument"] for p in plies]:
                rewritten = [parsed(p | {"argument": text}) for p in plies]
                scores.add(
                    (
                        tuple(sorted(triple_components(scenario, rewritten).items())),
                        task_score(scenario, rewritten),
                        tuple(
                            tuple(sorted(ply_components(scenario, i, p).items()))
                            for i, p in enumerate(rewritten)
                        ),
                    )
                )
            assert len(scores) == 1, scenario


def test_over_claiming_every_factor_of_c1_gets_nothing():
    # Every factor of c1 claimed as an analogy with both precedents, beside the teacher's
    # claims: on top of each ply's argument, 5 claims outside it (F4, F5, F23 with c2 and c3,
    # less the one the ply argues), against 1, 4 and 2 relevant: quality 1 - 5/1, 1 - 5/4,
    # 1 - 5/2, clipped to 0.
    every = [(f, "c1", precedent) for precedent in ("c2", "c3") for f in TABLE_1.c1]
    for index in range(3):
        plies = with_claims(index, every)
        assert argument_quality(TABLE_1, index, plies[index]) == 0.0
        assert triple_components(TABLE_1, plies)["utilisation"] == 0.0
    # With its own precedent only: the plaintiff's F5 and F23 with c2 (2 false claims against
    # 1), the defendant's F4 and F23 with c3 (2 against 4: 1/2), the rebuttal's F5 and F23 with
    # c2 (2 against 2). The triple is as good as its worst ply: task score 0.
    own = [
        with_claims(i, [(f, "c1", p) for f in TABLE_1.c1]) for i, p in enumerate(("c2", "c3", "c2"))
    ]
    assert [argument_quality(TABLE_1, i, plies[i]) for i, plies in enumerate(own)] == [
        0.0,
        0.5,
        0.0,
    ]
    triple = [plies[i] for i, plies in enumerate(own)]
    assert task_score(TABLE_1, triple) == 0.0
    # F5, F23 cited for c2, F4, F23 for c3: N_h 4 of 9; utilisation 0.
    assert reward(TABLE_1, triple) == pytest.approx(0.25 * 5 / 9 + 0.05)


def listed(abstain=False, **cases):
    """A ply whose citations a distiller read from its prose: factor lists, no claims."""
    factors = {case: tuple(cases.get(case, ())) for case in ("c1", "c2", "c3")}
    return ParsedPly("prose", abstain, factors, valid=True, claims=None)


def test_a_distiller_read_ply_is_scored_by_its_factor_lists():
    assert argument_quality(TABLE_1, 0, listed(c1=["F4"], c2=["F4"])) == 1.0
    # F16 is c2's but favours the defendant: 1 citation outside the analogy's 2 costs 1/2.
    assert argument_quality(TABLE_1, 0, listed(c1=["F4"], c2=["F4", "F16"])) == 0.5
    assert argument_quality(TABLE_1, 0, listed(c1=["F4"])) == 0.25  # recall 1/2, squared
    assert argument_quality(TABLE_1, 0, listed(abstain=True, c1=["F4"], c2=["F4"])) == 0.0
    # The defendant: c1 F5, F23, c2 F2 (the distinction), c3 F5 (the analogy) cited.
    defendant = listed(c1=["F5", "F23"], c2=["F2"], c3=["F5"])
    assert argument_quality(TABLE_1, 1, defendant) == 1.0
    # The analogy to c3 alone: lists cannot tell c1's F5 of the analogy from c1's F5 of the
    # distinction of c2 (which lacks it), so the distinction counts 1 of its 3 citations:
    # (1/3)^2.
    assert argument_quality(TABLE_1, 1, listed(c1=["F5"], c3=["F5"])) == pytest.approx(1 / 9)
    assert argument_quality(TABLE_1, 1, listed(c1=["F23"], c2=["F2"])) == 0.0  # no analogy
    # Without c1's F23: the distinction's citations (c2 F2, c1 F5, c1 F23) 2 of 3 cited, the
    # analogy's (c1 F5, c3 F5) both, nothing outside: min(2/3, 1)^2.
    cited = {("c1", "F5"), ("c3", "F5"), ("c2", "F2")}
    assert citation_quality(citation_parts(TABLE_1, 1), cited) == pytest.approx(4 / 9)
    assert fabrications(TABLE_1, listed(c1=["F4"], c2=["F5"])) == ["F5 for c2"]
    assert argues_grounded(TABLE_1, 0, listed(c2=["F4"]))
    assert not argues_grounded(TABLE_1, 0, listed(c3=["F5"]))
    # The same lists as claims: the quality of the claims and of their citations agree.
    claimed = parsed(TEACHER[1])
    assert relevant_claims(TABLE_1, 1) == set(claimed.claims)
    assert argument_quality(TABLE_1, 1, listed(**claimed.factors)) == 1.0


def test_the_teachers_triple_earns_full_utilisation_and_rules_earn_little():
    env = ArgumentEnv(ArgumentEnvConfig(train_per_kind=1, test_per_kind=1))
    task = to_task(TABLE_1)
    env._scenarios[TABLE_1.id] = TABLE_1
    prompt = render_cases(task.inputs)

    def played(respond):
        return [
            parse_ply(
                respond(role, [{"role": "user", "content": f"{prompt}\n\nWrite ply {i} of 3"}])
            )
            for i, role in ((1, "plaintiff"), (2, "defendant"), (3, "plaintiff"))
        ]

    assert (
        triple_components(TABLE_1, played(env.teacher(task, random.Random(0))))["utilisation"]
        == 5.0
    )
    policies = argument_policies()
    # Every claim about c1 and the precedent, true or not: grounded, but the false ones cancel it.
    everything = played(policies["rule_claiming_everything"](task, random.Random(0)))
    assert [right_decision(TABLE_1, i, p) for i, p in enumerate(everything)] == [True] * 3
    assert triple_components(TABLE_1, everything)["utilisation"] == 0.0
    # An analogy on every shared factor, whatever its side: every decision is grounded, the
    # plaintiff's analogy whole, but nothing is distinguished, so the argument is unfinished.
    shared = played(policies["rule_claiming_shared_factors"](task, random.Random(0)))
    assert [right_decision(TABLE_1, i, p) for i, p in enumerate(shared)] == [True] * 3
    assert argument_quality(TABLE_1, 0, shared[0]) == 1.0
    assert triple_components(TABLE_1, shared)["utilisation"] == 0.0


def test_each_rule_decides_and_claims_as_its_name_says():
    mismatched = generate_scenario("mismatched", 3, 5, mismatched="flip_outcomes")
    policies = argument_policies()
    for scenario, argues in ((TABLE_1, True), (mismatched, False)):
        task = to_task(scenario)
        message = [{"role": "user", "content": f"{render_cases(task.inputs)}\n\nWrite ply 1 of 3"}]
        rule = json.loads(
            policies["rule_claiming_shared_factors"](task, random.Random(0))("plaintiff", message)
        )
        outcome = json.loads(
            policies["outcome_only_claiming_everything"](task, random.Random(0))(
                "plaintiff", message
            )
        )
        assert rule["abstain"] is not argues and outcome["abstain"] is not argues
        if argues:
            shared = [f for f in TABLE_1.c1 if f in TABLE_1.c2]
            assert rule["analogies"] == [[f, "c1", "c2"] for f in shared]
            assert rule["distinctions"] == []
            # Every factor of c1 and c2 as an analogy, and each as a distinction from the other.
            assert len(outcome["analogies"]) == len(set(TABLE_1.c1) | set(TABLE_1.c2))
            assert len(outcome["distinctions"]) == len(TABLE_1.c1) + len(TABLE_1.c2)


@pytest.mark.parametrize("ply", [0, 1, 2])
@pytest.mark.parametrize("layout", ["inline", "by_side", "by_factor", "by_factor_arguer"])
@pytest.mark.parametrize("names", [True, False])
def test_the_rules_read_the_cases_as_the_prompt_prints_them(names, layout, ply):
    prompt = render_cases(to_task(TABLE_1).inputs, names, layout, ply)
    factors, winners = read_cases(prompt)
    cases = {"c1": TABLE_1.c1, "c2": TABLE_1.c2, "c3": TABLE_1.c3}
    assert {case: sorted(ids) for case, ids in factors.items()} == {
        case: sorted(ids) for case, ids in cases.items()
    }
    assert winners == {"c2": "plaintiff", "c3": "defendant"}


def test_by_side_lists_each_factor_under_the_side_it_favours():
    # Table 1's c1: F4 favours the plaintiff, F5 and F23 the defendant (ids in number order).
    lines = render_cases(to_task(TABLE_1).inputs, False, "by_side").splitlines()
    assert lines[0] == "c1 (current case, undecided): pro-plaintiff F4; pro-defendant F5, F23"
    assert lines[1].endswith(": pro-plaintiff F2, F4; pro-defendant F16")
    assert lines[2].endswith(": pro-plaintiff F2, F12; pro-defendant F5")


@pytest.mark.parametrize("names", [True, False])
def test_by_factor_names_in_one_row_every_case_that_has_the_factor(names):
    lines = render_cases(to_task(TABLE_1).inputs, names, "by_factor").splitlines()
    assert lines[0] == (
        "c1 (current case) is undecided; c2 (precedent) was decided for the plaintiff; "
        "c3 (precedent) was decided for the defendant."
    )
    if not names:
        # Table 1: c1 F4 F5 F23, c2 F2 F4 F16, c3 F2 F5 F12.
        assert lines[1] == "pro-plaintiff factors: F2 - c2 c3; F4 c1 c2 -; F12 - - c3"
        assert lines[2] == "pro-defendant factors: F5 c1 - c3; F16 - c2 -; F23 c1 - -"
    else:
        assert lines[1].startswith(f"pro-plaintiff factors: F2 {FACTORS['F2'].name} - c2 c3; ")


def test_by_factor_arguer_puts_the_arguers_precedent_next_to_c1():
    # The defendant's rows read "c1 c3" where they share a factor, as the plaintiff's "c1 c2".
    inputs = to_task(TABLE_1).inputs
    plaintiff, defendant, rebuttal = (
        render_cases(inputs, False, "by_factor_arguer", ply).splitlines() for ply in range(3)
    )
    assert plaintiff == rebuttal
    assert plaintiff[0] == defendant[0]
    assert plaintiff[2] == "pro-defendant factors (c1 c2 c3): F5 c1 - c3; F16 - c2 -; F23 c1 - -"
    assert defendant[1] == "pro-plaintiff factors (c1 c3 c2): F2 - c3 c2; F4 c1 - c2; F12 - c3 -"
    assert defendant[2] == "pro-defendant factors (c1 c3 c2): F5 c1 c3 -; F16 - - c2; F23 c1 - -"


def test_an_unknown_factor_layout_is_refused_by_its_key():
    with pytest.raises(ConfigError, match="`env.ablation.factor_layout` is 'table'"):
        load_env(
            "argument", **{"ablation.factor_layout": "table"}, train_per_kind=1, test_per_kind=1
        )
