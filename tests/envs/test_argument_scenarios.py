import dataclasses
import json
import random

import pytest

from lexrl.envs.argument.factors import FACTORS, Factor, normalise_factor_id
from lexrl.envs.argument.scenarios import (
    KINDS,
    SPLIT_SEEDS,
    Scenario,
    authors_draw,
    expected_abstentions,
    generate_scenario,
    generate_scenarios,
    load_scenarios,
    overlap_statistics,
    scenario_to_json,
    split_seeds,
    triple_overlaps,
    violations,
)
from lexrl.errors import ConfigError, ScenarioError


def _triple(kind, c1, c2, c3, c2_outcome="P", c3_outcome="D", complexity=None):
    return Scenario(
        id="hand",
        kind=kind,
        c1=tuple(c1),
        c2=tuple(c2),
        c3=tuple(c3),
        c2_outcome=c2_outcome,
        c3_outcome=c3_outcome,
        complexity=complexity,
    )


# Table 1 of Zhang and Ashley 2025 (arXiv:2506.02992): c1 shares F4 (P) with c2 and F5 (D) with c3.
TABLE1_ARGUABLE = _triple("arguable", ["F4", "F5", "F23"], ["F2", "F4", "F16"], ["F2", "F5", "F12"])
TABLE1_MISMATCHED = _triple(
    "mismatched", ["F4", "F5", "F23"], ["F2", "F4", "F16"], ["F2", "F5", "F12"], "D", "P"
)
TABLE1_NON_ARGUABLE = _triple("non_arguable", ["F6", "F22"], ["F1", "F27"], ["F16", "F24"])


def test_the_26_cato_factors():
    assert len(FACTORS) == 26
    assert "F9" not in FACTORS and list(FACTORS)[0] == "F1" and list(FACTORS)[-1] == "F27"
    assert FACTORS["F4"] == Factor("F4", "Agreed-not-to-disclose", "P")
    assert sum(f.favors == "P" for f in FACTORS.values()) == 13
    assert {f.favors for f in FACTORS.values()} == {"P", "D"}


def test_normalise_factor_id():
    for text in ("F4", "f4", " F 4 ", "F04", "F4 (Agreed-not-to-disclose)", "F4: Agreed"):
        assert normalise_factor_id(text) == "F4"
    # Kept although no such factor exists: citing it is a hallucination the metrics must count.
    assert normalise_factor_id("F99") == "F99" and normalise_factor_id("f9") == "F9"
    for text in ("", "4", "F", "Agreed-not-to-disclose", "F4x", "F4, F6", "F4-F6", "FF4"):
        assert normalise_factor_id(text) is None


def test_table_1_triples_meet_their_definitions():
    for scenario in (TABLE1_ARGUABLE, TABLE1_MISMATCHED, TABLE1_NON_ARGUABLE):
        assert violations(scenario) == []
    assert violations(dataclasses.replace(TABLE1_ARGUABLE, complexity=3)) == []
    assert violations(dataclasses.replace(TABLE1_NON_ARGUABLE, complexity=2)) == []
    assert expected_abstentions(TABLE1_ARGUABLE) == (False, False, False)
    assert expected_abstentions(TABLE1_MISMATCHED) == (True, True, True)
    assert expected_abstentions(TABLE1_NON_ARGUABLE) == (True, True, True)


def test_an_arguable_triple_without_overlap_is_rejected():
    # What the paper's own generator can emit: labelled arguable, nothing shared.
    scenario = _triple("arguable", ["F6", "F22"], ["F1", "F27"], ["F16", "F24"])
    problems = violations(scenario)
    assert "c1 and c2 share no pro-plaintiff factor" in problems
    assert "c1 and c3 share no pro-defendant factor" in problems
    # Sharing only factors that favour the other side is no ground either.
    only_wrong_side = _triple("arguable", ["F4", "F5"], ["F5", "F27"], ["F4", "F24"])
    assert violations(only_wrong_side) == [
        "c1 and c2 share no pro-plaintiff factor",
        "c1 and c3 share no pro-defendant factor",
    ]


def test_violations_name_each_problem():
    arguable_outcomes = dataclasses.replace(TABLE1_MISMATCHED, c2_outcome="P", c3_outcome="D")
    assert violations(arguable_outcomes) == ["mismatched needs c2_outcome D and c3_outcome P"]
    non_arguable_sharing = _triple("non_arguable", ["F4", "F5"], ["F4"], ["F5"])
    assert violations(non_arguable_sharing) == ["c1 and c2 share F4", "c1 and c3 share F5"]
    bad = _triple("other", ["F5", "F4"], [], ["F99"], "X", "D", complexity=5)
    problems = "\n".join(violations(bad))
    assert "kind `other`" in problems and "c2_outcome is 'X'" in problems
    assert "c1 is not sorted" in problems and "c1 has 2 factors, outside 4..6" in problems
    assert "c2 has 0 factors" in problems and "c3 has unknown factor id(s) F99" in problems


def test_expected_abstentions_follow_factors_and_outcomes_not_kind():
    # c3 was won by the plaintiff: the defendant cannot cite it; the plaintiff's ply stands.
    hybrid = _triple("arguable", ["F4", "F5"], ["F4"], ["F5"], "P", "P")
    assert expected_abstentions(hybrid) == (False, True, False)
    # c1 shares only a pro-defendant factor with c2: the plaintiff and its rebuttal abstain.
    hybrid = _triple("arguable", ["F5"], ["F5"], ["F5"], "P", "D")
    assert expected_abstentions(hybrid) == (True, False, True)


def test_generator_invariants_over_thousands_of_seeds():
    for kind in KINDS:
        owed = (False,) * 3 if kind == "arguable" else (True,) * 3
        for complexity in range(2, 9):
            for seed in range(1000):
                scenario = generate_scenario(kind, complexity, seed)
                assert violations(scenario) == [], scenario
                assert expected_abstentions(scenario) == owed, scenario
                for case in ("c1", "c2", "c3"):
                    assert complexity - 1 <= len(scenario.case(case)) <= complexity + 1


def test_generator_edges_and_errors():
    for kind in KINDS:
        for complexity in (1, 12):
            for seed in range(200):
                assert violations(generate_scenario(kind, complexity, seed)) == []
    with pytest.raises(ValueError, match="complexity 0"):
        generate_scenario("arguable", 0, 1)
    with pytest.raises(ValueError, match="complexity 13"):
        generate_scenario("non_arguable", 13, 1)
    with pytest.raises(ValueError, match="unknown scenario kind"):
        generate_scenario("arguble", 5, 1)


def test_generator_is_deterministic_per_seed():
    first = generate_scenario("arguable", 5, 123)
    assert first == generate_scenario("arguable", 5, 123)
    assert first.id == "arguable-c5-s123" and first.seed == 123 and first.complexity == 5
    assert len({generate_scenario("arguable", 5, seed) for seed in range(50)}) == 50
    # One seed gives arguable and mismatched the same factors; `flip_outcomes` keeps them in
    # place with the outcomes swapped (as Table 1 pairs them).
    mismatched = generate_scenario("mismatched", 5, 123, mismatched="flip_outcomes")
    assert (mismatched.c1, mismatched.c2, mismatched.c3) == (first.c1, first.c2, first.c3)
    assert (mismatched.c2_outcome, mismatched.c3_outcome) == ("D", "P")


def test_generate_scenarios_and_splits():
    scenarios = generate_scenarios(["non_arguable", "arguable"], 4, range(3))
    assert [s.id for s in scenarios] == [
        "non_arguable-c4-s0",
        "non_arguable-c4-s1",
        "non_arguable-c4-s2",
        "arguable-c4-s0",
        "arguable-c4-s1",
        "arguable-c4-s2",
    ]
    train, test = SPLIT_SEEDS["train"], SPLIT_SEEDS["test"]
    assert not set(range(max(train.start, test.start), min(train.stop, test.stop)))
    assert split_seeds("train", 90) == range(0, 90)
    assert split_seeds("test", 3) == range(1_000_000, 1_000_003)
    with pytest.raises(ValueError, match="unknown split"):
        split_seeds("dev", 3)
    with pytest.raises(ValueError, match="seeds asked"):
        split_seeds("test", len(test) + 1)


def test_scenario_file_round_trip(tmp_path):
    scenarios = generate_scenarios(KINDS, 5, range(20))
    path = tmp_path / "triples.jsonl"
    path.write_text("\n".join(scenario_to_json(s) for s in scenarios) + "\n\n")
    assert load_scenarios(path) == scenarios


def test_loader_normalises_ids_and_takes_complexity_as_optional(tmp_path):
    path = tmp_path / "hand.jsonl"
    record = {
        "id": "t1",
        "kind": "arguable",
        "c1": ["F23", "f4", " F 05 "],
        "c2": ["F2", "F4", "F16"],
        "c3": ["F2", "F5", "F12"],
        "c2_outcome": "P",
        "c3_outcome": "D",
        "note": "other keys are ignored",
    }
    path.write_text(json.dumps(record) + "\n")
    (scenario,) = load_scenarios(path)
    assert scenario.c1 == ("F4", "F5", "F23")
    assert scenario.complexity is None and scenario.seed is None


def _load_error(tmp_path, lines):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ScenarioError) as error:
        load_scenarios(path)
    return str(error.value)


def test_loader_errors_name_file_line_and_field(tmp_path):
    good = json.loads(scenario_to_json(TABLE1_ARGUABLE))

    def line(**changes):
        return json.dumps({**good, "id": "x", **changes})

    where = f"{tmp_path / 'bad.jsonl'}:3:"
    cases = {
        "{not json": "not valid JSON",
        "[1, 2]": "expected a JSON object",
        line(kind="arguble"): "`kind` is 'arguble'",
        line(c2_outcome="plaintiff"): "`c2_outcome` is 'plaintiff'",
        line(c1=["F4", "F9"]): "`c1` has unknown factor id 'F9'",
        line(c3=["F5", "F99"]): "`c3` has unknown factor id 'F99'",
        line(c3=["F5", "Agreed"]): "`c3` has unknown factor id 'Agreed'",
        line(c2="F4"): "`c2` must be a list",
        line(c1=["F4", "f04", "F5"]): "`c1` lists F4 twice",
        line(complexity="5"): "`complexity` must be an integer",
        line(id=""): "`id` must be a non-empty string",
        line(c2=["F1", "F27"]): "not a valid arguable triple: c1 and c2 share no pro-plaintiff",
        line(complexity=9): "c1 has 3 factors, outside 8..10",
        line(id="t1"): "`id` 't1' already used",
    }
    for bad, message in cases.items():
        text = _load_error(tmp_path, [line(id="t1"), "", bad])
        assert text.startswith(where) and message in text, (bad, text)
    with pytest.raises(ScenarioError, match="not found"):
        load_scenarios(tmp_path / "no.jsonl")
    assert issubclass(ScenarioError, ValueError)


def test_the_authors_mismatched_mode_swaps_the_precedents_whole():
    for seed in range(40):
        arguable = generate_scenario("arguable", 4, seed)
        swapped = generate_scenario("mismatched", 4, seed)
        flipped = generate_scenario("mismatched", 4, seed, mismatched="flip_outcomes")
        # The same draws: the flipped triple keeps the arguable factor sets, the swapped one
        # exchanges them between the precedents, and both lose to the side that would cite them.
        assert (flipped.c2, flipped.c3) == (arguable.c2, arguable.c3)
        assert (swapped.c1, swapped.c2, swapped.c3) == (arguable.c1, arguable.c3, arguable.c2)
        assert (swapped.c2_outcome, swapped.c3_outcome) == ("D", "P")
        assert swapped.id == f"mismatched-swapped-c4-s{seed}" and not violations(swapped)
        assert expected_abstentions(swapped) == (True, True, True)


def test_a_swapped_triple_still_needs_its_overlaps_and_an_unknown_mode_is_refused():
    # Table 1 swapped: c2 = the defendant's precedent (shares F5, pro-D), c3 the plaintiff's.
    swapped = dataclasses.replace(TABLE1_MISMATCHED, c2=TABLE1_ARGUABLE.c3, c3=TABLE1_ARGUABLE.c2)
    assert violations(swapped) == []
    lost = dataclasses.replace(swapped, c3=("F2", "F16"))
    (problem,) = violations(lost)
    assert problem.startswith("mismatched needs c1 to share")
    with pytest.raises(ValueError, match="swap"):
        generate_scenario("mismatched", 4, 0, mismatched="swap")


AUTHORS_OVERLAPS = {3: (2.20, 140 / 300), 5: (3.21, 51 / 300)}
"""The authors' generator at complexity 3 and 5 over 3,000 seeds (docs/sources.md): the mean
number of factors a precedent shares with c1, and the share of triples with a precedent equal
to c1."""


@pytest.mark.parametrize("complexity", [3, 5])
def test_the_authors_draw_overlaps_as_the_authors_generator_within_3_standard_errors(complexity):
    stats = triple_overlaps([authors_draw(complexity, random.Random(seed)) for seed in range(3000)])
    shared, equal = AUTHORS_OVERLAPS[complexity]
    assert abs(stats["shared_per_precedent"] - shared) < 3 * stats["shared_per_precedent_se"]
    assert stats["shared_per_precedent_se"] < 0.02, stats
    equal_se = stats["triples_with_a_precedent_equal_to_c1_se"]
    assert abs(stats["triples_with_a_precedent_equal_to_c1"] - equal) < 3 * equal_se, stats


def test_an_arguable_triple_is_the_first_authors_draw_whose_c1_has_both_sides():
    for seed in range(200):
        rng = random.Random(seed)
        while True:
            c1, c2, c3 = authors_draw(3, rng)
            if {FACTORS[f].favors for f in c1} == {"P", "D"}:
                break
        scenario = generate_scenario("arguable", 3, seed)
        assert (set(scenario.c1), set(scenario.c2), set(scenario.c3)) == (c1, c2, c3)


@pytest.mark.parametrize("complexity", [3, 5])
def test_keeping_two_sided_c1s_moves_the_overlaps_by_what_the_docs_say(complexity):
    stats = overlap_statistics(generate_scenarios(["arguable"], complexity, range(3000)))
    documented = {3: (2.35, 145 / 300), 5: (3.22, 50 / 300)}[complexity]
    assert stats["shared_per_precedent"] == pytest.approx(documented[0], abs=0.005)
    assert stats["triples_with_a_precedent_equal_to_c1"] == pytest.approx(documented[1], abs=0.002)


def test_the_anchored_generator_is_kept_and_is_not_the_authors():
    scenarios = generate_scenarios(["arguable"], 3, range(300), generator="anchored")
    assert all(s.id.startswith("anchored-arguable-c3-") for s in scenarios)
    stats = overlap_statistics(scenarios)
    assert stats["shared_per_precedent"] < AUTHORS_OVERLAPS[3][0] - 0.4
    assert stats["triples_with_a_precedent_equal_to_c1"] < 0.05
    with pytest.raises(ConfigError, match="generator"):
        generate_scenario("arguable", 3, 0, generator="authorz")
