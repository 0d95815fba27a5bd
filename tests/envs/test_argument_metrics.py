import dataclasses
import math

import pytest

from lexrl.bootstrap import mean_with_ci
from lexrl.envs.argument.metrics import (
    FactorCounts,
    TripleScore,
    abstention_accuracy,
    argument_table,
    factor_counts,
    format_validity,
    hallucination_accuracy,
    hallucination_accuracy_extracted,
    markdown_table,
    score_triple,
    successful_abstention,
    utilisation_recall,
)
from lexrl.envs.argument.parsing import ParsedPly, parse_ply
from lexrl.envs.argument.reward import argument_parts, has_every_distinction, task_score
from lexrl.envs.argument.scenarios import TABLE_1, Scenario
from lexrl.envs.argument.teacher import teacher_plies, teacher_text

# Table 1 of the paper: N_gt = 3 + 3 + 3 = 9.
ARGUABLE = TABLE_1
MISMATCHED = dataclasses.replace(
    ARGUABLE, id="mismatched", kind="mismatched", c2_outcome="D", c3_outcome="P"
)
# N_gt = 2 + 2 + 2 = 6.
NON_ARGUABLE = Scenario(
    id="non_arguable",
    kind="non_arguable",
    c1=("F6", "F22"),
    c2=("F1", "F27"),
    c3=("F16", "F24"),
    c2_outcome="P",
    c3_outcome="D",
    complexity=2,
)


def ply(abstain=False, valid=True, c1=(), c2=(), c3=()):
    """A ply as the paper's distiller reads it: the factors cited per case, no claims."""
    return ParsedPly(
        argument="TERMINATE" if abstain else "an argument",
        abstain=abstain,
        factors={"c1": tuple(c1), "c2": tuple(c2), "c3": tuple(c3)},
        valid=valid,
        claims=None,
    )


ABSTAIN = ply(abstain=True)

# On ARGUABLE: the plaintiff cites F5 for c2, which c2 lacks; the defendant (invalid format)
# cites F99, which exists nowhere; the rebuttal wrongly abstains but cites real factors.
# cited(c1) = {F4, F5, F99}: 1 hallucinated, 2 utilised; cited(c2) = {F4, F5, F16}: 1 and 2;
# cited(c3) = {F2, F5}: 0 and 2. N_h = 2, N_util = 6, N_ext = 8, N_gt = 9.
MIXED = (
    ply(c1=["F4"], c2=["F4", "F5"]),
    ply(valid=False, c1=["F5", "F99"], c2=["F16"], c3=["F5"]),
    ply(abstain=True, c1=["F4"], c3=["F2", "F5"]),
)


def test_counts_and_metrics_of_a_mixed_triple():
    assert factor_counts(ARGUABLE, MIXED) == FactorCounts(n_gt=9, n_h=2, n_util=6, n_ext=8)
    assert hallucination_accuracy(ARGUABLE, MIXED) == pytest.approx(1 - 2 / 9)
    assert hallucination_accuracy_extracted(ARGUABLE, MIXED) == pytest.approx(1 - 2 / 8)
    assert utilisation_recall(ARGUABLE, MIXED) == pytest.approx(6 / 9)
    # Arguable: no ply should abstain; the rebuttal did.
    assert abstention_accuracy(ARGUABLE, MIXED) == pytest.approx(2 / 3)
    assert successful_abstention(ARGUABLE, MIXED) == 0.0
    assert format_validity(ARGUABLE, MIXED) == pytest.approx(2 / 3)
    assert score_triple(ARGUABLE, MIXED) == TripleScore(
        hallucination_accuracy=pytest.approx(7 / 9),
        hallucination_accuracy_extracted=0.75,
        utilisation_recall=pytest.approx(2 / 3),
        abstention_accuracy=pytest.approx(2 / 3),
        successful_abstention=0.0,
        format_validity=pytest.approx(2 / 3),
        n_gt=9,
        n_h=2,
        n_util=6,
        n_ext=8,
        # c1 & c2 cited: F4 (right), F5 (c2 lacks it), + c2's outcome (P, right);
        # c1 & c3 cited: F5 (right), + c3's outcome (D, right): 1 wrong of 5
        authors_hallucination_accuracy=0.75,
        authors_factor_recall=pytest.approx(2 / 3),
        authors_successful_abstention=0.0,
        precedent_identification_accuracy=pytest.approx(0.8),
    )


def test_the_metrics_count_the_factors_the_claims_cite():
    # An analogy cites its factor for both cases, a distinction for the case said to have it:
    # the plaintiff's F4 for c1 and c2, and F2 for c1 (a reversed distinction: c1 lacks F2);
    # the defendant's F5 for c1 and c3, and F16 for c2. cited(c1) = {F2, F4, F5}: 1
    # hallucinated, 2 utilised; cited(c2) = {F4, F16}: 2 utilised; cited(c3) = {F5}: 1.
    plaintiff = parse_ply(
        '{"abstain": false, "analogies": [["F4", "c1", "c2"]], '
        '"distinctions": [["F2", "c1", "c2"]], "argument": "x"}'
    )
    defendant = parse_ply(
        '{"abstain": false, "analogies": [["F5", "c3", "c1"]], '
        '"distinctions": [["F16", "TSC1", "Input Case"]], "argument": "x"}'
    )
    plies = (plaintiff, defendant, ABSTAIN)
    assert factor_counts(ARGUABLE, plies) == FactorCounts(n_gt=9, n_h=1, n_util=5, n_ext=6)
    assert hallucination_accuracy(ARGUABLE, plies) == pytest.approx(8 / 9)


def test_an_abstaining_ply_still_hallucinates():
    # Only the abstaining ply fabricates: F23 is c1's, not c2's.
    plies = (ply(c1=["F4"], c2=["F4"]), ply(c1=["F5"], c3=["F5"]), ply(abstain=True, c2=["F23"]))
    assert factor_counts(ARGUABLE, plies) == FactorCounts(n_gt=9, n_h=1, n_util=4, n_ext=5)
    assert hallucination_accuracy(ARGUABLE, plies) == pytest.approx(8 / 9)


def test_a_factor_cited_by_several_plies_counts_once():
    plies = (ply(c1=["F4"], c2=["F4", "F5"]), ply(c1=["F4"], c2=["F5"]), ply(c1=["F4"]))
    assert factor_counts(ARGUABLE, plies) == FactorCounts(n_gt=9, n_h=1, n_util=2, n_ext=3)


def test_abstaining_everywhere_on_an_arguable_triple():
    plies = (ply(abstain=True, c1=["F4"], c2=["F4"]), ABSTAIN, ABSTAIN)
    score = score_triple(ARGUABLE, plies)
    # The paper scores an abstention's utilisation 0, whatever it cites.
    assert (score.n_util, score.utilisation_recall) == (2, 0.0)
    assert score.abstention_accuracy == 0.0 and score.successful_abstention == 1.0
    assert score.hallucination_accuracy == 1.0 and score.format_validity == 1.0


def test_a_correct_full_abstention_on_a_mismatched_triple():
    score = score_triple(MISMATCHED, (ABSTAIN, ABSTAIN, ABSTAIN))
    assert score == TripleScore(
        hallucination_accuracy=1.0,
        hallucination_accuracy_extracted=1.0,  # N_ext = 0
        utilisation_recall=0.0,
        abstention_accuracy=1.0,
        successful_abstention=1.0,
        format_validity=1.0,
        n_gt=9,
        n_h=0,
        n_util=0,
        n_ext=0,
        authors_hallucination_accuracy=1.0,
        authors_factor_recall=0.0,
        authors_successful_abstention=1.0,
        precedent_identification_accuracy=0.0,
    )
    # Arguing the defendant's ply is one wrong abstention decision out of three.
    argued = (ABSTAIN, ply(c1=["F5"], c3=["F5"]), ABSTAIN)
    assert abstention_accuracy(MISMATCHED, argued) == pytest.approx(2 / 3)
    assert successful_abstention(MISMATCHED, argued) == 0.0
    # An invalid free-text TERMINATE still abstains.
    invalid = ply(abstain=True, valid=False)
    assert score_triple(MISMATCHED, (invalid,) * 3).successful_abstention == 1.0
    assert score_triple(MISMATCHED, (invalid,) * 3).format_validity == 0.0


def test_hallucination_accuracy_can_be_negative():
    # 4 + 3 fabricated attributions against N_gt = 6.
    plies = (ply(c1=["F1", "F2", "F3", "F4"], c2=["F6", "F22", "F99"]), ABSTAIN, ABSTAIN)
    assert factor_counts(NON_ARGUABLE, plies) == FactorCounts(n_gt=6, n_h=7, n_util=0, n_ext=7)
    assert hallucination_accuracy(NON_ARGUABLE, plies) == pytest.approx(1 - 7 / 6)
    assert hallucination_accuracy_extracted(NON_ARGUABLE, plies) == 0.0
    assert abstention_accuracy(NON_ARGUABLE, plies) == pytest.approx(2 / 3)


def test_score_triple_needs_three_plies():
    with pytest.raises(ValueError, match="expected 3 plies"):
        score_triple(ARGUABLE, (ABSTAIN, ABSTAIN))


def _record(workflow, scenario, plies):
    return {
        "workflow": workflow,
        "kind": scenario.kind,
        **dataclasses.asdict(score_triple(scenario, plies)),
    }


def test_argument_table_and_markdown():
    correct = (ply(c1=["F4", "F5", "F23"], c2=["F2", "F4", "F16"], c3=["F2", "F5", "F12"]),) * 3
    records = [
        _record("sa", ARGUABLE, MIXED),
        _record("sa", ARGUABLE, correct),
        _record("sa", MISMATCHED, MIXED),
        _record("sa", NON_ARGUABLE, (ABSTAIN,) * 3),
        _record("sa", NON_ARGUABLE, (ABSTAIN, ABSTAIN, ply())),
        _record("rma", MISMATCHED, (ABSTAIN,) * 3),
    ]
    table = argument_table(records)
    assert list(table) == ["rma", "sa"]
    sa = table["sa"]
    assert sa["n"] == {"arguable": 2, "mismatched": 1, "non_arguable": 2}
    assert sa["hallucination_accuracy"]["arguable"] == pytest.approx(mean_with_ci([700 / 9, 100]))
    assert sa["hallucination_accuracy"]["arguable"]["mean"] == pytest.approx(800 / 9)
    assert sa["hallucination_accuracy_extracted"]["arguable"]["mean"] == pytest.approx(87.5)
    assert sa["utilisation_recall"]["mean"] == pytest.approx(50 * (2 / 3 + 1))
    assert sa["successful_abstention"]["mismatched"] == {"mean": 0.0, "low": 0.0, "high": 0.0}
    assert sa["successful_abstention"]["non_arguable"]["mean"] == 50.0
    assert sa["hallucination_accuracy"]["non_arguable"]["mean"] == 100.0
    # MIXED argues on 2 of its 3 plies, `correct` on all 3
    assert sa["abstention_accuracy"]["arguable"]["mean"] == pytest.approx(50 * (2 / 3 + 1))
    rma = table["rma"]
    assert rma["n"] == {"arguable": 0, "mismatched": 1, "non_arguable": 0}
    assert math.isnan(rma["utilisation_recall"]["mean"])
    assert rma["successful_abstention"]["mismatched"]["mean"] == 100.0
    assert argument_table(records, seed=5)["sa"] == argument_table(records, seed=5)["sa"]

    text = markdown_table(table)
    lines = text.splitlines()
    assert lines[2].startswith("| workflow | n (arg / mis / non) | Acc_H arguable")
    assert lines[4] == (
        "| rma | 0 / 1 / 0 | n/a | 100.00 [100.00, 100.00] | n/a | n/a | 100.00 [100.00, 100.00] "
        "| n/a | n/a |"
    )
    sa_cells = lines[5].split(" | ")
    assert sa_cells[0] == "| sa" and sa_cells[1] == "2 / 1 / 2"
    interval = sa["hallucination_accuracy"]["arguable"]
    assert sa_cells[2] == f"88.89 [{interval['low']:.2f}, {interval['high']:.2f}]"


# Hand-built triples, c2 won by the plaintiff and c3 by the defendant unless said otherwise.
# NO_DISTINCTION: c2's pro-plaintiff F4 is c1's too, c1's pro-defendant F5 is c2's too, and c3
# has c1's F4: nothing to distinguish; each ply one analogy (F4, F5, F4).
NO_DISTINCTION = Scenario("n", "arguable", ("F4", "F5"), ("F4", "F5"), ("F4", "F5"), "P", "D", 2)
# NO_DEFENDANT_DISTINCTION: as above, but c3 lacks c1's pro-plaintiff F4, so the rebuttal
# distinguishes c3 by it: parts 1 + 1 + 2.
NO_DEFENDANT_DISTINCTION = dataclasses.replace(NO_DISTINCTION, c3=("F5", "F12"))
# DEFENDANT_ABSTAINS: c1 and c3 share only the pro-plaintiff F4, so the defendant must abstain;
# the rebuttal distinguishes c3 by c1's F6 and reinforces F4: parts 1 + 0 + 2.
DEFENDANT_ABSTAINS = Scenario("d", "arguable", ("F4", "F6"), ("F4", "F16"), ("F4",), "P", "D", 2)
# PLAINTIFF_ABSTAINS: Table 1 with c2 won by the defendant: the plaintiff and rebuttal abstain,
# and the defendant, with no plaintiff's argument to answer, only analogises to c3: 1 part.
PLAINTIFF_ABSTAINS = dataclasses.replace(ARGUABLE, c2_outcome="D")


@pytest.mark.parametrize(
    ("scenario", "parts", "every"),
    [
        # 1 (plaintiff's analogy) + 2 (defendant's distinction and analogy) + 2 (rebuttal's).
        (ARGUABLE, 5, True),
        (NO_DISTINCTION, 3, False),
        (NO_DEFENDANT_DISTINCTION, 4, False),
        (DEFENDANT_ABSTAINS, 3, False),
        (PLAINTIFF_ABSTAINS, 1, False),
        (MISMATCHED, 0, False),
        (NON_ARGUABLE, 0, False),
    ],
)
def test_argument_parts_and_every_distinction_on_hand_built_triples(scenario, parts, every):
    assert argument_parts(scenario) == parts
    assert has_every_distinction(scenario) is every


def test_skipping_the_distinctions_costs_only_where_there_are_some():
    def analogies_only(scenario):
        return tuple(
            parse_ply(teacher_text(p if p["abstain"] else p | {"distinctions": []}))
            for p in teacher_plies(scenario)
        )

    # Where every ply's argument is an analogy, the analogies are the whole argument; where the
    # defendant and the rebuttal have a distinction to make, their recall of it is 0.
    assert task_score(NO_DISTINCTION, analogies_only(NO_DISTINCTION)) == 1.0
    assert task_score(NO_DEFENDANT_DISTINCTION, analogies_only(NO_DEFENDANT_DISTINCTION)) == 0.0
    assert task_score(ARGUABLE, analogies_only(ARGUABLE)) == 0.0
