"""Zhang & Ashley's own metric definitions (their `multi_agent_factor.py`) beside ours, on
hand-made triples, above all where the two disagree: plies that abstain but cite factors,
plies that cite nothing without abstaining, and two of three plies abstaining."""

import dataclasses

import pytest

from lexrl.envs.argument.metrics import (
    argument_table,
    authors_factor_recall,
    authors_hallucination_accuracy,
    authors_successful_abstention,
    hallucination_accuracy_extracted,
    markdown_table,
    precedent_identification_accuracy,
    score_triple,
)
from lexrl.envs.argument.parsing import ParsedPly
from lexrl.envs.argument.scenarios import TABLE_1, Scenario

# c1 = (F4, F5, F23), c2 = (F2, F4, F16) won by P, c3 = (F2, F5, F12) won by D: N_gt = 9.
ARGUABLE = TABLE_1
MISMATCHED = dataclasses.replace(
    ARGUABLE, id="mismatched", kind="mismatched", c2_outcome="D", c3_outcome="P"
)
# N_gt = 6; c1 shares nothing with c2 or c3.
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


def ply(abstain=False, c1=(), c2=(), c3=()):
    return ParsedPly(
        argument="TERMINATE" if abstain else "an argument",
        abstain=abstain,
        factors={"c1": tuple(c1), "c2": tuple(c2), "c3": tuple(c3)},
        valid=True,
    )


ABSTAIN = ply(abstain=True)
SILENT = ply()  # argues, cites nothing

# name: (scenario, plies, ours, theirs); ours = (successful_abstention, utilisation_recall,
# hallucination_accuracy), theirs = (Acc_H, recall, successful abstention, PI accuracy).
TRIPLES = {
    # every factor cited for its own case; PI: c1-c2 {F4} + outcome P, c1-c3 {F5} + D: 4 of 4
    "arguable, right": (
        ARGUABLE,
        (
            ply(c1=["F4"], c2=["F4"]),
            ply(c1=["F5"], c3=["F5"]),
            ply(c1=["F23"], c2=["F2", "F16"], c3=["F2", "F12"]),
        ),
        (0.0, 1.0, 1.0),
        (1.0, 1.0, 0.0, 1.0),
    ),
    # all abstain but cite 4 real factors: our recall is 0 and our abstention a success;
    # their recall is 4/9 and their abstention is 0 (arguable)
    "arguable, abstain citing": (
        ARGUABLE,
        (
            ply(abstain=True, c1=["F4"], c2=["F4"]),
            ply(abstain=True, c1=["F5"], c3=["F5"]),
            ABSTAIN,
        ),
        (1.0, 0.0, 1.0),
        (1.0, 4 / 9, 0.0, 1.0),
    ),
    # arguing with no factor: nothing claimed, nothing checked (their PI is then 0)
    "arguable, silent": (ARGUABLE, (SILENT,) * 3, (0.0, 0.0, 1.0), (1.0, 0.0, 0.0, 0.0)),
    # 2 of 3 abstain; F5 is not c2's: N_h 1, N_util 3, N_claimed 4; PI: c1-c2 {F4} + P
    "arguable, 2 of 3 abstain": (
        ARGUABLE,
        (ply(c1=["F4"], c2=["F4", "F5"]), ABSTAIN, ply(abstain=True, c3=["F2"])),
        (0.0, 1 / 3, 8 / 9),
        (0.75, 1 / 3, 0.0, 1.0),
    ),
    # F2 claimed for c1 (c1 lacks it): N_h 1, N_util 2, N_claimed 3; PI: c1-c2 {F2} wrong + P,
    # c1-c3 {F2} wrong + D: 2 wrong of 4
    "arguable, misattributed": (
        ARGUABLE,
        (ply(c1=["F2"], c2=["F2"], c3=["F2"]), SILENT, SILENT),
        (0.0, 2 / 9, 8 / 9),
        (2 / 3, 2 / 9, 0.0, 0.5),
    ),
    # the right behaviour on both definitions; their override sets what their formulas give
    "mismatched, abstain": (
        MISMATCHED,
        (ABSTAIN,) * 3,
        (1.0, 0.0, 1.0),
        (1.0, 0.0, 1.0, 0.0),
    ),
    # all abstain, explaining with factors: ours a success, theirs not (lists not empty);
    # PI: c1-c2 {F4} right, but c2 was won by D: 1 wrong of 2
    "mismatched, abstain citing": (
        MISMATCHED,
        (ply(abstain=True, c1=["F4"], c2=["F4"]), ABSTAIN, ABSTAIN),
        (1.0, 0.0, 1.0),
        (1.0, 2 / 9, 0.0, 0.5),
    ),
    # arguing without a factor: theirs a success (lists empty), ours not
    "mismatched, silent": (MISMATCHED, (SILENT,) * 3, (0.0, 0.0, 1.0), (1.0, 0.0, 1.0, 0.0)),
    # 2 of 3 abstain, the defendant argues from c3, won by P: PI 1 wrong of 2
    "mismatched, 2 of 3 abstain": (
        MISMATCHED,
        (ABSTAIN, ply(c1=["F5"], c3=["F5"]), ABSTAIN),
        (0.0, 2 / 9, 1.0),
        (1.0, 2 / 9, 0.0, 0.5),
    ),
    "non_arguable, abstain": (
        NON_ARGUABLE,
        (ABSTAIN,) * 3,
        (1.0, 0.0, 1.0),
        (1.0, 0.0, 1.0, 0.0),
    ),
    # 2 of 3 abstain; F1 is c2's, claimed common with c1: N_h 1, N_util 1, N_claimed 2 of
    # N_gt 6; PI: c1-c2 {F1} wrong + P right
    "non_arguable, 2 of 3 abstain": (
        NON_ARGUABLE,
        (ply(c1=["F1"], c2=["F1"]), ABSTAIN, ABSTAIN),
        (0.0, 1 / 6, 5 / 6),
        (0.5, 1 / 6, 0.0, 0.5),
    ),
    # 7 fabricated attributions of 7: ours goes negative (N_gt 6), theirs stops at 0;
    # c1 and c2 cited apart: nothing claimed common, PI 0
    "non_arguable, fabricated": (
        NON_ARGUABLE,
        (ply(c1=["F1", "F2", "F3", "F4"], c2=["F6", "F22", "F99"]), ABSTAIN, ABSTAIN),
        (0.0, 0.0, 1 - 7 / 6),
        (0.0, 0.0, 0.0, 0.0),
    ),
    "non_arguable, silent": (NON_ARGUABLE, (SILENT,) * 3, (0.0, 0.0, 1.0), (1.0, 0.0, 1.0, 0.0)),
}


@pytest.mark.parametrize("name", TRIPLES)
def test_ours_and_theirs_on_hand_made_triples(name):
    scenario, plies, ours, theirs = TRIPLES[name]
    score = score_triple(scenario, plies)
    assert (
        score.successful_abstention,
        score.utilisation_recall,
        score.hallucination_accuracy,
    ) == pytest.approx(ours)
    assert (
        authors_hallucination_accuracy(scenario, plies),
        authors_factor_recall(scenario, plies),
        authors_successful_abstention(scenario, plies),
        precedent_identification_accuracy(scenario, plies),
    ) == pytest.approx(theirs)
    assert (
        score.authors_hallucination_accuracy,
        score.authors_factor_recall,
        score.authors_successful_abstention,
        score.precedent_identification_accuracy,
    ) == pytest.approx(theirs)
    # their Acc_H is the `_extracted` variant we already report, override included
    assert score.authors_hallucination_accuracy == pytest.approx(
        hallucination_accuracy_extracted(scenario, plies)
    )


def test_the_definitions_disagree_where_the_issue_says():
    disagree = [
        name
        for name, (scenario, plies, ours, theirs) in TRIPLES.items()
        if ours[0] != theirs[2] and scenario.kind != "arguable"
    ]
    assert disagree == ["mismatched, abstain citing", "mismatched, silent", "non_arguable, silent"]
    recall = [name for name, (_, _, ours, theirs) in TRIPLES.items() if ours[1] != theirs[1]]
    assert recall == ["arguable, abstain citing", "mismatched, abstain citing"]


def records(workflow, names, authors=True):
    rows = []
    for name in names:
        scenario, plies, _, _ = TRIPLES[name]
        score = dataclasses.asdict(score_triple(scenario, plies))
        if not authors:
            score = {k: v for k, v in score.items() if not k.startswith(("authors_", "precedent"))}
        rows.append({"workflow": workflow, "kind": scenario.kind, **score})
    return rows


def test_the_table_and_its_authors_block():
    table = argument_table(records("x", TRIPLES) + records("legacy", TRIPLES, authors=False))
    assert "authors" not in table["legacy"]
    row, authors = table["x"], table["x"]["authors"]
    assert row["n"] == {"arguable": 5, "mismatched": 4, "non_arguable": 4}
    # arguable: recall (1 + 4/9 + 0 + 1/3 + 2/9) / 5 = 2/5; ours (1 + 0 + 0 + 1/3 + 2/9) / 5
    assert authors["factor_recall"]["mean"] == pytest.approx(40.0)
    assert row["utilisation_recall"]["mean"] == pytest.approx(100 * 14 / 45)
    assert authors["hallucination_accuracy"]["arguable"]["mean"] == pytest.approx(
        100 * (1 + 1 + 1 + 0.75 + 2 / 3) / 5
    )
    assert authors["precedent_identification_accuracy"]["arguable"]["mean"] == pytest.approx(70.0)
    # mismatched: theirs (1, 0, 1, 0), ours (1, 1, 0, 0); non_arguable: theirs (1, 0, 0, 1),
    # ours (1, 0, 0, 0)
    assert authors["successful_abstention"]["mismatched"]["mean"] == pytest.approx(50.0)
    assert authors["successful_abstention"]["non_arguable"]["mean"] == pytest.approx(50.0)
    assert row["successful_abstention"]["non_arguable"]["mean"] == pytest.approx(25.0)
    assert authors["hallucination_accuracy"]["non_arguable"]["mean"] == pytest.approx(62.5)
    assert authors["precedent_identification_accuracy"]["mismatched"]["mean"] == pytest.approx(25.0)
    assert authors["precedent_identification_accuracy"]["non_arguable"]["mean"] == pytest.approx(
        12.5
    )

    text = markdown_table(table)
    block = text.split("### Authors' definitions")[1].splitlines()
    assert block[2].startswith("| workflow | Acc_H arguable |")
    assert len([line for line in block if line.startswith("| x |")]) == 1
    assert not any(line.startswith("| legacy |") for line in block)
    cells = next(line for line in block if line.startswith("| x |")).split(" | ")
    interval = authors["factor_recall"]
    assert cells[4] == f"40.00 [{interval['low']:.2f}, {interval['high']:.2f}]"


def test_no_block_when_no_record_carries_the_authors_fields():
    table = argument_table(records("legacy", TRIPLES, authors=False))
    assert "Authors' definitions" not in markdown_table(table)
