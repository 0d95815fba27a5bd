"""What a ply should cite (the CATO analogies and distinctions of its side) and what its text
argues (factors named by id or name): `lexrl.envs.argument.grounding`, and the reward and the
degenerate rules built on it."""

import json
import random

import pytest

from lexrl.envs.argument.degenerate import argument_policies, read_cases
from lexrl.envs.argument.env import ArgumentEnv, render_cases, to_task
from lexrl.envs.argument.factors import FACTORS
from lexrl.envs.argument.grounding import (
    argued_citations,
    argument_quality,
    as_text_says,
    named_factors,
    relevant_citations,
    text_citations,
    text_denials,
)
from lexrl.envs.argument.options import ArgumentEnvConfig
from lexrl.envs.argument.parsing import ParsedPly, parse_ply
from lexrl.envs.argument.reward import ply_components, right_decision, triple_components
from lexrl.envs.argument.scenarios import TABLE_1, generate_scenario
from lexrl.errors import ConfigError
from tests.env_options import load_env

# Table 1: c1 = F4 (P), F5 (D), F23 (D); c2, won by the plaintiff = F2 (P), F4 (P), F16 (D);
# c3, won by the defendant = F2 (P), F5 (D), F12 (P).


def ply(argument, abstain=False, **cases):
    factors = {case: tuple(cases.get(case, ())) for case in ("c1", "c2", "c3")}
    return ParsedPly(argument, abstain, factors, valid=True)


def test_named_factors_reads_ids_and_cato_names():
    text = "c1 has f 4 and F05; like c2 it shows agreed not-to-disclose, and Security-measures."
    assert named_factors(text) == {"F4", "F5", "F6"}
    assert named_factors("F99 is cited, F4x is not a factor id") == {"F99"}
    assert named_factors("The cases share relevant factors.") == set()


def test_relevant_citations_follow_the_sides_on_table_1():
    assert relevant_citations(TABLE_1, 0) == {("c1", "F4"), ("c2", "F4")}
    # c2 distinguished by its pro-plaintiff F2 (not F16: it favours the defendant) and c1's
    # pro-defendant F5, F23; c3 cited on the shared pro-defendant F5.
    assert relevant_citations(TABLE_1, 1) == {
        ("c2", "F2"),
        ("c1", "F5"),
        ("c1", "F23"),
        ("c3", "F5"),
    }
    assert relevant_citations(TABLE_1, 2) == {("c1", "F4"), ("c2", "F4")}
    mismatched = generate_scenario("mismatched", 3, 5)
    assert [relevant_citations(mismatched, i) for i in range(3)] == [set(), set(), set()]


def test_a_fixed_sentence_above_every_factor_earns_no_utilisation():
    every = {case: TABLE_1.case(case) for case in ("c1", "c2", "c3")}
    fixed = ply("The precedents support this side's position.", **every)
    assert argued_citations(fixed) == set()
    assert argument_quality(TABLE_1, 0, fixed) == 0.0
    # Not grounded either: the decision to argue is wrong, so the ply earns nothing at all.
    assert not right_decision(TABLE_1, 0, fixed)
    assert ply_components(TABLE_1, 0, fixed) == dict.fromkeys(ply_components(TABLE_1, 0, fixed), 0)
    listed = ply("Cited: F2, F4, F5, F12, F16, F23.", **every)
    # Ids under no case are said of none of them: nothing is argued.
    assert argued_citations(listed) == set()
    named = ply("c1 has F4, F5 and F23; c2 has F2, F4 and F16; c3 has F2, F5 and F12.", **every)
    # Said of their cases, every factor is argued: 2 citations right, 7 outside the analogy
    # cancel them.
    assert len(argued_citations(named)) == 9
    assert argument_quality(TABLE_1, 0, named) == 0.0


def test_the_other_sides_shared_factor_costs_the_argument():
    analogy = ply("Like c2, c1 has F4.", c1=["F4"], c2=["F4"])
    assert argument_quality(TABLE_1, 0, analogy) == 1.0
    # F16 is in c2 and favours the defendant: citing it for the plaintiff cancels one citation.
    both = ply("Like c2, c1 has F4; c2 has F16.", c1=["F4"], c2=["F4", "F16"])
    assert argument_quality(TABLE_1, 0, both) == pytest.approx((2 - 1) / 2)
    # Named in the JSON only: F16 is not argued, so it neither counts nor costs.
    listed_only = ply("Like c2, c1 has F4.", c1=["F4"], c2=["F4", "F16"])
    assert argument_quality(TABLE_1, 0, listed_only) == 1.0
    assert argument_quality(TABLE_1, 0, ply("TERMINATE: no.", abstain=True)) == 0.0


def test_the_teachers_triple_earns_full_utilisation_and_a_dump_earns_little():
    env = ArgumentEnv(ArgumentEnvConfig(train_per_kind=1, test_per_kind=1))
    task = to_task(TABLE_1)
    env._scenarios[TABLE_1.id] = TABLE_1
    teacher = env.teacher(task, random.Random(0))
    prompt = render_cases(task.inputs)
    plies = [
        parse_ply(teacher(role, [{"role": "user", "content": f"{prompt}\n\nWrite ply {i} of 3"}]))
        for i, role in ((1, "plaintiff"), (2, "defendant"), (3, "plaintiff"))
    ]
    assert triple_components(TABLE_1, plies)["utilisation"] == 1.0

    def played(policy):
        respond = argument_policies()[policy](task, random.Random(0))
        return [
            parse_ply(
                respond(role, [{"role": "user", "content": f"{prompt}\n\nWrite ply {i} of 3"}])
            )
            for i, role in ((1, "plaintiff"), (2, "defendant"), (3, "plaintiff"))
        ]

    # Every factor said of its own case, no two cases compared: no ply argues anything.
    dumped = played("rule_naming_every_factor")
    assert [right_decision(TABLE_1, i, p) for i, p in enumerate(dumped)] == [False] * 3
    assert triple_components(TABLE_1, dumped)["utilisation"] == 0.0
    # The shared factors compared, whatever their side: every decision is grounded, but the
    # counterargument and the rebuttal distinguish nothing, so the argument is unfinished.
    shared = played("rule_naming_shared_factors")
    assert [right_decision(TABLE_1, i, p) for i, p in enumerate(shared)] == [True] * 3
    assert argument_quality(TABLE_1, 0, shared[0]) == 1.0
    assert triple_components(TABLE_1, shared)["utilisation"] == 0.0


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
    with pytest.raises(ConfigError, match="`env.factor_layout` is 'table'"):
        load_env("argument", factor_layout="table", train_per_kind=1, test_per_kind=1)


def test_each_rule_decides_and_cites_as_its_name_says():
    mismatched = generate_scenario("mismatched", 3, 5, mismatched="flip_outcomes")
    policies = argument_policies()
    for scenario, argues in ((TABLE_1, True), (mismatched, False)):
        task = to_task(scenario)
        prompt = render_cases(task.inputs)
        message = [{"role": "user", "content": f"{prompt}\n\nWrite ply 1 of 3"}]
        rule = json.loads(
            policies["rule_naming_shared_factors"](task, random.Random(0))("plaintiff", message)
        )
        outcome = json.loads(
            policies["outcome_only_naming_every_factor"](task, random.Random(0))(
                "plaintiff", message
            )
        )
        assert rule["abstain"] is not argues and outcome["abstain"] is not argues
        if argues:
            shared = [f for f in TABLE_1.c1 if f in TABLE_1.c2]
            assert rule["factors"] == {"c1": shared, "c2": shared, "c3": []}
            assert named_factors(rule["argument"]) == set(shared)
            assert outcome["factors"]["c3"] == list(TABLE_1.c3)
    fixed = policies["rule_fixed_sentence_every_factor"](to_task(TABLE_1), random.Random(0))
    reply = json.loads(fixed("single", render_cases(to_task(TABLE_1).inputs)))
    assert list(reply) == ["plaintiff", "defendant", "rebuttal"]
    assert all(named_factors(p["argument"]) == set() for p in reply.values())


def test_a_denied_citation_earns_nothing():
    json_lists = {"c1": ["F4"], "c2": ["F4"]}
    said = ply("Like c2, c1 has F4.", **json_lists)
    assert argument_quality(TABLE_1, 0, said) == 1.0 and right_decision(TABLE_1, 0, said)
    for denial in (
        "c1 does not share F4 with c2.",
        "Unlike F4 in c2, c1 has nothing.",
        "c1 lacks F4, like c2.",
        "Neither c1 nor c2 has Agreed-not-to-disclose.",
    ):
        denied = ply(denial, **json_lists)
        assert argued_citations(denied) == set(), denial
        assert argument_quality(TABLE_1, 0, denied) == 0.0 and not right_decision(
            TABLE_1, 0, denied
        ), denial


def test_a_factor_said_of_one_case_is_not_said_of_another():
    # F4 said of c1 alone: the JSON's F4 for c2 and c3 is not argued, and no analogy is made.
    one = ply("c1 has F4.", c1=["F4"], c2=["F4"], c3=["F4"])
    assert argued_citations(one) == {("c1", "F4")}
    assert argument_quality(TABLE_1, 0, one) == 0.0
    assert text_citations("Like c2, c1 has F4; c3 has F5.") == {
        ("c1", "F4"),
        ("c2", "F4"),
        ("c3", "F5"),
    }
    # A distinction needs the factor said of one case and denied of the other.
    assert text_citations("c2 has F2, which c1 lacks.") == {("c2", "F2")}
    assert text_denials("c2 has F2, which c1 lacks.") == {("c1", "F2")}
    assert text_denials("Unlike c2, c1 has F5.") == {("c2", "F5")}


def test_a_name_matches_only_as_a_whole_cato_name():
    # F19 "No-security-measures" contains F6 "Security-measures", and its "No" is no denial.
    assert named_factors("c1 has No-security-measures.") == {"F19"}
    assert named_factors("c1 has no security measures") == {"F19"}
    assert text_citations("Like c2, c1 has No-security-measures.") == {("c1", "F19"), ("c2", "F19")}
    assert named_factors("c1 has Security-measures.") == {"F6"}
    # "not" inside F4's and F5's names is no denial either.
    assert text_citations("Like c3, c1 has Agreement-not-specific.") == {("c1", "F5"), ("c3", "F5")}


def test_the_metrics_read_from_the_text_see_what_the_json_hides():
    listed = ply("The factors: F4.", c1=["F4"], c2=["F4"])
    assert as_text_says(listed).factors == {"c1": (), "c2": (), "c3": ()}
    said = ply("Like c2, c1 has F4; c3 has F7.", c1=["F4"], c2=["F4"])
    assert as_text_says(said).factors == {"c1": ("F4",), "c2": ("F4",), "c3": ("F7",)}
