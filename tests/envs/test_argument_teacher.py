import json

import pytest

from lexrl.envs.argument.env import ArgumentEnv
from lexrl.envs.argument.grounding import relevant_claims
from lexrl.envs.argument.metrics import score_triple
from lexrl.envs.argument.options import ArgumentEnvConfig
from lexrl.envs.argument.parsing import (
    ParsedPly,
    analogy,
    claimed_factors,
    distinction,
    parse_ply,
    parse_review,
    parse_three_plies,
    parse_verdict,
)
from lexrl.envs.argument.reward import argument_parts, task_score, triple_components, weighted
from lexrl.envs.argument.scenarios import (
    KINDS,
    TABLE_1,
    Scenario,
    expected_abstentions,
    generate_scenario,
)
from lexrl.envs.argument.teacher import (
    CHECKLIST_INSTRUCTION,
    checklist,
    teacher_plies,
    teacher_review,
    teacher_text,
    teacher_triple_text,
    teacher_verdict,
)
from tests.env_options import load_env

# Table 1 of the paper: c1 shares F4 (P) with c2 and F5 (D) with c3.
ARGUABLE = TABLE_1
WEIGHTS = ArgumentEnv(ArgumentEnvConfig()).weights


def full_components(scenario: Scenario) -> dict[str, float]:
    """The most a triple can earn: every ply that must abstain abstains, every other argues its
    whole CATO argument (`argument_parts` parts of quality 1), nothing fabricated, all valid."""
    owed = sum(expected_abstentions(scenario)) / 3
    return {
        "abstention": owed,
        "hallucination": 1.0 - owed,
        "utilisation": float(argument_parts(scenario)),
        "format": 1.0,
        "over_abstention": 0.0,
        "failed_abstention": 0.0,
    }


def test_teacher_plies_earn_the_full_reward_on_every_kind():
    for kind in KINDS:
        for seed in range(1000):
            scenario = generate_scenario(kind, 2 + seed % 7, seed)
            plies = teacher_plies(scenario)
            parsed = tuple(parse_ply(teacher_text(ply)) for ply in plies)
            assert parse_three_plies(teacher_triple_text(plies)) == parsed
            assert all(ply.valid and ply.error is None for ply in parsed), scenario
            score = score_triple(scenario, parsed)
            assert score.hallucination_accuracy == 1.0, scenario
            assert score.abstention_accuracy == 1.0, scenario
            assert score.format_validity == 1.0, scenario
            assert task_score(scenario, parsed) == 1.0, scenario
            assert triple_components(scenario, parsed) == full_components(scenario), scenario
            reward = sum(weighted(full_components(scenario), WEIGHTS).values())
            if kind == "arguable":
                # 2 a part of quality 1, 0.25 for fabricating nothing, 0.05 for the format.
                assert 3 <= argument_parts(scenario) <= 5, scenario
                assert reward == pytest.approx(2 * argument_parts(scenario) + 0.25 + 0.05)
            else:
                assert score.successful_abstention == 1.0, scenario
                # A triple that must abstain is worth one part of an argued one, and the format.
                assert reward == pytest.approx(2.0 + 0.05)


def test_teacher_plies_claim_exactly_the_cato_argument():
    for kind in KINDS:
        for seed in range(300):
            scenario = generate_scenario(kind, 2 + seed % 7, seed)
            for index, ply in enumerate(teacher_plies(scenario)):
                parsed = parse_ply(teacher_text(ply))
                assert set(parsed.claims) == relevant_claims(scenario, index), scenario
                assert parsed.abstain == expected_abstentions(scenario)[index]


def test_teacher_plies_on_table_1():
    plaintiff, defendant, rebuttal = teacher_plies(ARGUABLE)
    assert plaintiff == {
        "abstain": False,
        "analogies": [["F4", "c1", "c2"]],
        "distinctions": [],
        "argument": "Like c2, c1 should be decided for the plaintiff.",
    }
    # Distinguish c2 (its pro-plaintiff F2 missing from c1; c1's pro-defendant F5, F23 missing
    # from c2), then cite c3 on the shared pro-defendant F5; distinctions in factor-number
    # order. Not F16: c2 has it and c1 lacks it, but it favours the defendant, so it does not
    # distinguish c2's win for the plaintiff.
    assert defendant == {
        "abstain": False,
        "analogies": [["F5", "c1", "c3"]],
        "distinctions": [["F2", "c2", "c1"], ["F5", "c1", "c2"], ["F23", "c1", "c2"]],
        "argument": "c2 is distinguishable. Like c3, c1 should be decided for the defendant.",
    }
    # c3 has no pro-defendant factor c1 lacks; c1's pro-plaintiff F4 is missing from c3 and
    # is the analogy to c2. Not F2 / F12: they favour the plaintiff, who lost c3 with them.
    assert rebuttal == {
        "abstain": False,
        "analogies": [["F4", "c1", "c2"]],
        "distinctions": [["F4", "c1", "c3"]],
        "argument": "c3 is distinguishable. The analogy to c2 stands.",
    }
    # Compact: the reply must fit the demo's token cap.
    assert teacher_text(plaintiff) == (
        '{"abstain":false,"analogies":[["F4","c1","c2"]],"distinctions":[],'
        '"argument":"Like c2, c1 should be decided for the plaintiff."}'
    )
    single = json.loads(teacher_triple_text((plaintiff, defendant, rebuttal)))
    assert list(single) == ["plaintiff", "defendant", "rebuttal"]


def test_teacher_abstentions_give_the_reason_and_claim_nothing():
    mismatched = generate_scenario("mismatched", 5, 7)
    plaintiff, defendant, rebuttal = teacher_plies(mismatched)
    assert plaintiff["argument"] == "TERMINATE: c2 was decided for the defendant."
    assert defendant["argument"] == "TERMINATE: c3 was decided for the plaintiff."
    assert rebuttal["argument"].startswith("TERMINATE: no plaintiff's argument to reinforce")
    non_arguable = generate_scenario("non_arguable", 5, 7)
    plaintiff, defendant, _ = teacher_plies(non_arguable)
    assert plaintiff["argument"] == "TERMINATE: c1 shares no factor with c2."
    assert defendant | {"argument": ""} == {
        "abstain": True,
        "analogies": [],
        "distinctions": [],
        "argument": "",
    }
    # c1 and c2 share only F5, which favours the defendant.
    only_pro_d = Scenario("x", "arguable", ("F5", "F6"), ("F5",), ("F5",), "P", "D", None)
    plaintiff, defendant, _ = teacher_plies(only_pro_d)
    assert plaintiff["abstain"]
    assert plaintiff["argument"] == "TERMINATE: c1 shares no pro-plaintiff factor with c2."
    assert not defendant["abstain"]


def _draft(*claims, abstain=False, valid=True, error=None):
    return ParsedPly("draft", abstain, claimed_factors(claims), valid, error, tuple(sorted(claims)))


def test_teacher_verdicts_on_hand_made_drafts():
    mismatched = generate_scenario("mismatched", 5, 7)
    shared = sorted(set(mismatched.c1) & set(mismatched.c2))[0]
    cases = [
        # A ply that must abstain but argues.
        (mismatched, 0, _draft(analogy(shared, "c1", "c2")), "REQUIRES_ABSTENTION"),
        (mismatched, 2, _draft(), "REQUIRES_ABSTENTION"),
        (mismatched, 1, _draft(abstain=True), "VALID_ARGUMENT"),
        # An abstention that claims what is false still needs correcting.
        (mismatched, 1, _draft(analogy("F99", "c1", "c3"), abstain=True), "REQUIRES_CORRECTION"),
        (ARGUABLE, 0, _draft(analogy("F4", "c1", "c2")), "VALID_ARGUMENT"),
        # c2 lacks F5: a false analogy beside the true one.
        (
            ARGUABLE,
            0,
            _draft(analogy("F4", "c1", "c2"), analogy("F5", "c1", "c2")),
            "REQUIRES_CORRECTION",
        ),
        # c1 has F4 too: a false distinction.
        (ARGUABLE, 1, _draft(distinction("F4", "c2", "c1")), "REQUIRES_CORRECTION"),
        (ARGUABLE, 1, _draft(valid=False, error="no JSON object found"), "REQUIRES_CORRECTION"),
        # A TERMINATE on a ply that can be argued is an error too.
        (ARGUABLE, 2, _draft(abstain=True), "REQUIRES_CORRECTION"),
    ]
    for scenario, index, draft, label in cases:
        reply = teacher_verdict(scenario, index, draft)
        assert reply.splitlines()[-1] == label and len(reply.splitlines()) == 2
        assert parse_verdict(reply).label == label, reply
        assert parse_review(teacher_review(scenario, index, draft)).revise == (
            label != "VALID_ARGUMENT"
        )
    reply = teacher_verdict(ARGUABLE, 1, _draft(distinction("F4", "c2", "c1")))
    assert "F4 in c2, not in c1" in reply
    # A draft a distiller read (factor lists, no claims) is checked citation by citation.
    read = ParsedPly("draft", False, {"c1": ("F4",), "c2": ("F5",), "c3": ()}, True, claims=None)
    assert "F5 for c2" in teacher_verdict(ARGUABLE, 0, read)


def test_teacher_verdict_and_review_approve_the_teachers_own_plies():
    for kind in KINDS:
        for seed in range(200):
            scenario = generate_scenario(kind, 5, seed)
            for index, ply in enumerate(teacher_plies(scenario)):
                draft = parse_ply(teacher_text(ply))
                assert parse_verdict(teacher_verdict(scenario, index, draft)).label == (
                    "VALID_ARGUMENT"
                )
                review = teacher_review(scenario, index, draft)
                assert review.endswith("REVISE: no") and not parse_review(review).revise


def test_the_checklist_looks_up_each_of_c1s_own_side_factors_in_the_precedent():
    # Table 1: c1 F4 (P), F5 and F23 (D); c2 won by the plaintiff with F2, F4, F16; c3 won by
    # the defendant with F2, F5, F12.
    assert checklist(ARGUABLE, 0) == ("<think>c2 won by the plaintiff. F4: yes.</think>")
    assert checklist(ARGUABLE, 1) == ("<think>c3 won by the defendant. F5: yes. F23: no.</think>")
    mismatched = Scenario("m", "mismatched", ("F4",), ("F4",), ("F4",), "D", "P", 3)
    assert checklist(mismatched, 0) == "<think>c2 won by the defendant.</think>"
    no_own = Scenario("n", "non_arguable", ("F5",), ("F5",), ("F5",), "P", "D", 3)
    assert checklist(no_own, 0) == (
        "<think>c2 won by the plaintiff. c1 has no pro-plaintiff factor.</think>"
    )


def test_a_ply_says_yes_exactly_when_it_can_be_grounded_and_the_block_is_never_scored():
    for kind in KINDS:
        for seed in range(500):
            scenario = generate_scenario(kind, 2 + seed % 7, seed)
            plies = teacher_plies(scenario)
            for index, abstains in enumerate(expected_abstentions(scenario)):
                block = checklist(scenario, index)
                grounded = "won by the " + ("defendant" if index == 1 else "plaintiff") + "."
                assert (grounded in block and ": yes." in block) == (not abstains), scenario
                with_block = parse_ply(block + teacher_text(plies[index]))
                assert with_block == parse_ply(teacher_text(plies[index]))


def test_only_the_checklist_option_asks_the_arguers_for_it():
    plain = ArgumentEnv(load_env("argument", train_per_kind=1, test_per_kind=1).env)
    asked = ArgumentEnv(
        load_env(
            "argument", **{"ablation.reasoning": "checklist"}, train_per_kind=1, test_per_kind=1
        ).env
    )
    for role in ("plaintiff", "defendant"):
        assert CHECKLIST_INSTRUCTION not in plain.prompts[role]
        assert asked.prompts[role].endswith(CHECKLIST_INSTRUCTION)
        assert asked.prompts[role].count(CHECKLIST_INSTRUCTION) == 1
    assert CHECKLIST_INSTRUCTION not in asked.prompts["analyst"]
