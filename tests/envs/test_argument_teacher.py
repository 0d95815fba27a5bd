import json

from lexrl.envs.argument.env import ArgumentEnv
from lexrl.envs.argument.grounding import named_factors
from lexrl.envs.argument.metrics import score_triple
from lexrl.envs.argument.parsing import (
    ParsedPly,
    parse_ply,
    parse_review,
    parse_three_plies,
    parse_verdict,
)
from lexrl.envs.argument.reward import task_score, triple_components
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


def test_teacher_plies_score_perfectly_on_every_kind():
    for kind in KINDS:
        for seed in range(3000):
            scenario = generate_scenario(kind, 2 + seed % 7, seed)
            plies = teacher_plies(scenario)
            parsed = tuple(parse_ply(teacher_text(ply)) for ply in plies)
            assert parse_three_plies(teacher_triple_text(plies)) == parsed
            score = score_triple(scenario, parsed)
            assert score.hallucination_accuracy == 1.0, scenario
            assert score.abstention_accuracy == 1.0, scenario
            assert score.format_validity == 1.0, scenario
            components = triple_components(scenario, parsed)
            assert task_score(scenario, parsed) == 1.0, scenario
            if kind == "arguable":
                assert components["utilisation"] == 1.0, scenario
                assert components["abstention"] == 0.0, scenario
            else:
                assert score.successful_abstention == 1.0, scenario
                assert components["abstention"] == 1.0, scenario


def test_teacher_plies_on_table_1():
    plaintiff, defendant, rebuttal = teacher_plies(ARGUABLE)
    assert plaintiff == {
        "argument": "Like c2, won by the plaintiff, c1 has F4, so c1 should be decided for the "
        "plaintiff.",
        "abstain": False,
        "factors": {"c1": ["F4"], "c2": ["F4"], "c3": []},
    }
    # Distinguish c2 (its pro-plaintiff F2 missing from c1; c1's pro-defendant F5, F23 missing
    # from c2), then cite c3 on the shared pro-defendant F5. Not F16: c2 has it and c1 lacks
    # it, but it favours the defendant, so it does not distinguish c2's win for the plaintiff.
    assert defendant["factors"] == {"c1": ["F5", "F23"], "c2": ["F2"], "c3": ["F5"]}
    assert defendant["argument"].startswith("c2 is distinguishable: c2 has F2, which c1 lacks")
    # c3 has no pro-defendant factor c1 lacks; c1's pro-plaintiff F4 is missing from c3 and
    # is the analogy to c2. Not F2 / F12: they favour the plaintiff, so they strengthen c3's
    # loss for the plaintiff no more than c1 does.
    assert rebuttal["factors"] == {"c1": ["F4"], "c2": ["F4"], "c3": []}
    assert rebuttal["argument"] == (
        "c3 is distinguishable: c1 has F4, which c3 lacks. The analogy of c1 to c2 on F4 stands."
    )
    single = json.loads(teacher_triple_text((plaintiff, defendant, rebuttal)))
    assert list(single) == ["plaintiff", "defendant", "rebuttal"]


def test_teacher_abstentions_give_the_reason():
    mismatched = generate_scenario("mismatched", 5, 7)
    plaintiff, defendant, rebuttal = teacher_plies(mismatched)
    assert plaintiff["argument"] == "TERMINATE: c2 was decided for the defendant."
    assert defendant["argument"] == "TERMINATE: c3 was decided for the plaintiff."
    assert rebuttal["argument"].startswith("TERMINATE: no plaintiff's argument to reinforce")
    non_arguable = generate_scenario("non_arguable", 5, 7)
    plaintiff, defendant, _ = teacher_plies(non_arguable)
    assert plaintiff["argument"] == "TERMINATE: c1 shares no factor with c2."
    assert defendant["factors"] == {"c1": [], "c2": [], "c3": []}
    # c1 and c2 share only F5, which favours the defendant.
    only_pro_d = Scenario("x", "arguable", ("F5", "F6"), ("F5",), ("F5",), "P", "D", None)
    plaintiff, defendant, _ = teacher_plies(only_pro_d)
    assert plaintiff["abstain"]
    assert plaintiff["argument"] == "TERMINATE: c1 shares no pro-plaintiff factor with c2."
    assert not defendant["abstain"]


def test_argument_texts_name_every_factor_they_cite():
    for seed in range(200):
        for ply in teacher_plies(generate_scenario("arguable", 2 + seed % 5, seed)):
            cited = {f for ids in ply["factors"].values() for f in ids}
            assert cited and cited <= named_factors(ply["argument"]), ply


def _draft(abstain=False, valid=True, error=None, **cases):
    factors = {c: tuple(cases.get(c, ())) for c in ("c1", "c2", "c3")}
    return ParsedPly("draft", abstain, factors, valid, error)


def test_teacher_verdicts_on_hand_made_drafts():
    mismatched = generate_scenario("mismatched", 5, 7)
    cases = [
        # A ply that must abstain but argues.
        (mismatched, 0, _draft(c1=[mismatched.c1[0]]), "REQUIRES_ABSTENTION"),
        (mismatched, 2, _draft(), "REQUIRES_ABSTENTION"),
        (mismatched, 1, _draft(abstain=True), "VALID_ARGUMENT"),
        # An abstention that misattributes a factor still needs correcting.
        (mismatched, 1, _draft(abstain=True, c1=["F99"]), "REQUIRES_CORRECTION"),
        (ARGUABLE, 0, _draft(c1=["F4"], c2=["F4"]), "VALID_ARGUMENT"),
        (ARGUABLE, 0, _draft(c1=["F4"], c2=["F4", "F5"]), "REQUIRES_CORRECTION"),
        (ARGUABLE, 1, _draft(c3=["F23"]), "REQUIRES_CORRECTION"),
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
    reply = teacher_verdict(ARGUABLE, 0, _draft(c2=["F5"]))
    assert "F5 for c2" in reply


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
        load_env("argument", reasoning="checklist", train_per_kind=1, test_per_kind=1).env
    )
    for role in ("plaintiff", "defendant"):
        assert CHECKLIST_INSTRUCTION not in plain.prompts[role]
        assert asked.prompts[role].endswith(CHECKLIST_INSTRUCTION)
        assert asked.prompts[role].count(CHECKLIST_INSTRUCTION) == 1
    assert CHECKLIST_INSTRUCTION not in asked.prompts["analyst"]
