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
from lexrl.envs.argument.parsing import ParsedPly
from lexrl.envs.argument.scenarios import TABLE_1, Scenario

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
    return ParsedPly(
        argument="TERMINATE" if abstain else "an argument",
        abstain=abstain,
        factors={"c1": tuple(c1), "c2": tuple(c2), "c3": tuple(c3)},
        valid=valid,
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
