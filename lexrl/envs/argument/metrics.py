"""Per-triple metrics of the 3-ply argument task (Zhang and Ashley 2025, "Mitigating Manipulation
and Enhancing Persuasion", arXiv:2506.02992, sec. 4.4, eqs. 1-6)
and the paper's tables over an evaluation, with percentile-bootstrap 95% intervals over triples
(`lexrl.bootstrap.mean_with_ci`, an interval being `{"mean", "low", "high"}`).

The paper has an LLM extract the factors an argument uses; here each ply lists the factors it
cites per case (`ParsedPly.factors`), so F_Ext,c is exact and matched by id. Every metric takes
the Scenario and its three parsed plies in PLIES order (plaintiff, defendant, rebuttal).

The `authors_*` metrics and `precedent_identification_accuracy` are Zhang & Ashley's own
definitions, from their code (lizhang-AIandLaw/Mitigating-Manipulation-and-Enhancing-Persuasion,
`multi_agent_factor.py`, read against commit 8bf723c), reported beside ours. Their factor
distiller reads the whole 3-ply argument, abstaining plies included, and lists the factors it
mentions for the "Input Case", "TSC1" and "TSC2": here those lists are `cited(plies, "c1")`,
`cited(plies, "c2")` and `cited(plies, "c3")`, matched by id instead of by name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lexrl.bootstrap import format_interval, mean_with_ci
from lexrl.envs.argument.parsing import ParsedPly
from lexrl.envs.argument.scenarios import CASES, KINDS, PLIES, Scenario, expected_abstentions


@dataclass(frozen=True)
class FactorCounts:
    n_gt: int
    """N_gt (eq. 3): |c1| + |c2| + |c3|."""
    n_h: int
    """N_h (eq. 2): cited factors the case they are cited for lacks, summed over cases."""
    n_util: int
    """N_util (eq. 5): cited factors the case has, summed over cases."""
    n_ext: int
    """N_ext: all cited factors, summed over cases (the authors' code's denominator)."""


def cited(plies: Sequence[ParsedPly], case: str) -> set[str]:
    """F_Ext,c: the factors cited for `case` by any of the plies. Abstaining plies count too: a
    factor attributed to a case that lacks it is a fabrication whether or not the ply goes on to
    argue, and the analyst and the reader see it either way."""
    return {f for ply in plies for f in ply.factors[case]}


def factor_counts(scenario: Scenario, plies: Sequence[ParsedPly]) -> FactorCounts:
    """N_gt, N_h, N_util and N_ext of one triple (a factor cited twice for a case counts once)."""
    n_h = n_util = n_ext = 0
    for case in CASES:
        citations, truth = cited(plies, case), set(scenario.case(case))
        n_h += len(citations - truth)
        n_util += len(citations & truth)
        n_ext += len(citations)
    n_gt = sum(len(scenario.case(case)) for case in CASES)
    return FactorCounts(n_gt=n_gt, n_h=n_h, n_util=n_util, n_ext=n_ext)


def hallucination_accuracy(scenario: Scenario, plies: Sequence[ParsedPly]) -> float:
    """Acc_H = 1 - N_h / N_gt (eq. 1, as a fraction). Unclipped: more fabricated attributions
    than ground-truth factors make it negative, as the paper's formula does."""
    counts = factor_counts(scenario, plies)
    return 1.0 - counts.n_h / counts.n_gt


def hallucination_accuracy_extracted(scenario: Scenario, plies: Sequence[ParsedPly]) -> float:
    """The authors' code's Acc_H: 1 - N_h / N_ext, the share of cited factors that are real
    (in [0, 1]); 1.0 when nothing is cited. For parity with their published numbers."""
    counts = factor_counts(scenario, plies)
    return 1.0 - counts.n_h / counts.n_ext if counts.n_ext else 1.0


def utilisation_recall(scenario: Scenario, plies: Sequence[ParsedPly]) -> float:
    """Rec_U = N_util / N_gt (eq. 4, as a fraction); reported on arguable triples. 0 when every
    ply abstains, as the paper scores an abstention, whatever the abstaining plies cite."""
    if all(ply.abstain for ply in plies):
        return 0.0
    counts = factor_counts(scenario, plies)
    return counts.n_util / counts.n_gt


def abstention_accuracy(scenario: Scenario, plies: Sequence[ParsedPly]) -> float:
    """Share of the three plies whose `abstain` is what `expected_abstentions` requires."""
    expected = expected_abstentions(scenario)
    return sum(ply.abstain == owed for ply, owed in zip(plies, expected, strict=True)) / len(PLIES)


def successful_abstention(scenario: Scenario, plies: Sequence[ParsedPly]) -> float:
    """1.0 when every ply abstains (a success on the triples built for abstention, eq. 6's
    N_sa), else 0.0. `scenario` is unused; it keeps every metric's signature the same."""
    return float(all(ply.abstain for ply in plies))


def format_validity(scenario: Scenario, plies: Sequence[ParsedPly]) -> float:
    """Share of the three plies that parsed as the JSON schema (`ParsedPly.valid`)."""
    return sum(ply.valid for ply in plies) / len(plies)


ABSTENTION_KINDS = ("mismatched", "non_arguable")
"""The kinds on which their code scores successful abstention (and applies its override)."""


def authors_successful_abstention(scenario: Scenario, plies: Sequence[ParsedPly]) -> float:
    """Their `calculate_successful_abstention`: 1.0 when the distilled factor lists are all
    empty, whether or not the plies said TERMINATE. So a triple whose plies argue without
    citing a factor is a success, and one whose plies abstain but cite factors is not (ours,
    `successful_abstention`, reads `abstain` instead). Their `main` scores it only on
    mismatched and non-arguable triples and sets it to 0 on arguable ones; so does this."""
    if scenario.kind not in ABSTENTION_KINDS:
        return 0.0
    return float(all(not cited(plies, case) for case in CASES))


def _abstention_override(scenario: Scenario, plies: Sequence[ParsedPly]) -> bool:
    # Their `main` forces Acc_H 100 and recall 0 after a successful abstention. With every list
    # empty their formulas give those values anyway (N_gt > 0), so it changes no number; it is
    # kept so the definitions read as theirs.
    return authors_successful_abstention(scenario, plies) == 1.0


def authors_hallucination_accuracy(scenario: Scenario, plies: Sequence[ParsedPly]) -> float:
    """Their `calculate_hallucination_accuracy_and_factor_recall`'s Acc_H, as a fraction:
    1 - N_h / N_claimed (N_claimed = N_ext, every cited factor summed over the three cases),
    1.0 when nothing is claimed, clipped at 0; 1.0 after a successful abstention (their
    override). Equal to `hallucination_accuracy_extracted` in every case."""
    if _abstention_override(scenario, plies):
        return 1.0
    counts = factor_counts(scenario, plies)
    return max(0.0, 1.0 - counts.n_h / counts.n_ext) if counts.n_ext else 1.0


def authors_factor_recall(scenario: Scenario, plies: Sequence[ParsedPly]) -> float:
    """Their factor-utilisation recall, as a fraction: 1 - (ground-truth factors not cited for
    their case) / N_gt = N_util / N_gt, computed whatever the plies' `abstain` (ours,
    `utilisation_recall`, is 0 when every ply abstains): only their override after a
    successful abstention (all lists empty, on mismatched and non-arguable) sets it to 0.
    1.0 when N_gt is 0, as their code has it."""
    if _abstention_override(scenario, plies):
        return 0.0
    counts = factor_counts(scenario, plies)
    return counts.n_util / counts.n_gt if counts.n_gt else 1.0


def precedent_identification_accuracy(scenario: Scenario, plies: Sequence[ParsedPly]) -> float:
    """Their `calculate_precedent_identification_accuracy`, as a fraction. A factor cited for
    both c1 and c2 is a claimed c1-c2 commonality, wrong unless both cases have it; when there
    is at least one, citing c2 is checked too, wrong unless c2 was won by the plaintiff. The
    same for c1-c3 and the defendant. Accuracy = 1 - wrong / checked, clipped at 0, and 0.0
    when nothing was checked (no factor cited for c1 and a precedent: an abstention too)."""
    c1 = cited(plies, "c1")
    checked = wrong = 0
    for precedent, side in (("c2", "P"), ("c3", "D")):
        common = c1 & cited(plies, precedent)
        truth = set(scenario.c1) & set(scenario.case(precedent))
        checked += len(common)
        wrong += len(common - truth)
        if common:
            outcome = scenario.c2_outcome if precedent == "c2" else scenario.c3_outcome
            checked += 1
            wrong += outcome != side
    return max(0.0, 1.0 - wrong / checked) if checked else 0.0


AUTHORS_METRICS = (
    "authors_hallucination_accuracy",
    "authors_factor_recall",
    "authors_successful_abstention",
    "precedent_identification_accuracy",
)
"""The TripleScore fields that hold the authors' definitions."""


@dataclass(frozen=True)
class TripleScore:
    hallucination_accuracy: float
    hallucination_accuracy_extracted: float
    utilisation_recall: float
    abstention_accuracy: float
    successful_abstention: float
    format_validity: float
    n_gt: int
    n_h: int
    n_util: int
    n_ext: int
    authors_hallucination_accuracy: float
    authors_factor_recall: float
    authors_successful_abstention: float
    precedent_identification_accuracy: float


def score_triple(scenario: Scenario, plies: Sequence[ParsedPly]) -> TripleScore:
    """Every metric and count of one triple; `dataclasses.asdict` of it, plus `kind` and
    `workflow`, is the record `argument_table` reads."""
    if len(plies) != len(PLIES):
        raise ValueError(f"expected 3 plies (plaintiff, defendant, rebuttal), got {len(plies)}")
    counts = factor_counts(scenario, plies)
    return TripleScore(
        hallucination_accuracy=hallucination_accuracy(scenario, plies),
        hallucination_accuracy_extracted=hallucination_accuracy_extracted(scenario, plies),
        utilisation_recall=utilisation_recall(scenario, plies),
        abstention_accuracy=abstention_accuracy(scenario, plies),
        successful_abstention=successful_abstention(scenario, plies),
        format_validity=format_validity(scenario, plies),
        n_gt=counts.n_gt,
        n_h=counts.n_h,
        n_util=counts.n_util,
        n_ext=counts.n_ext,
        authors_hallucination_accuracy=authors_hallucination_accuracy(scenario, plies),
        authors_factor_recall=authors_factor_recall(scenario, plies),
        authors_successful_abstention=authors_successful_abstention(scenario, plies),
        precedent_identification_accuracy=precedent_identification_accuracy(scenario, plies),
    )


def argument_table(records: Sequence[Mapping], seed: int = 0) -> dict:
    """The paper's Tables 2-4 per workflow, from records `{"kind", "workflow", <TripleScore
    fields>}`, every value x100 with its interval over triples:

    `{workflow: {"n": {kind: triples}, "hallucination_accuracy": {kind: interval} (Table 2, all
    kinds), "hallucination_accuracy_extracted": {kind: interval} (the authors' variant),
    "utilisation_recall": interval on arguable (Table 3), "successful_abstention": {"mismatched",
    "non_arguable": interval} (Table 4)}}`. A kind without triples has n 0 and a NaN mean.

    When every record of a workflow carries the authors' fields (`AUTHORS_METRICS`), its row
    also holds `"authors"`: `{"hallucination_accuracy": {kind: interval}, "factor_recall":
    interval on arguable, "successful_abstention": {"mismatched", "non_arguable": interval},
    "precedent_identification_accuracy": {kind: interval}}`, their definitions.
    """

    def interval(group: Sequence[Mapping], key: str) -> dict[str, float]:
        return mean_with_ci([100.0 * r[key] for r in group], seed=seed)

    table = {}
    for workflow in sorted({r["workflow"] for r in records}):
        by_kind = {
            kind: [r for r in records if r["workflow"] == workflow and r["kind"] == kind]
            for kind in KINDS
        }
        table[workflow] = {
            "n": {kind: len(group) for kind, group in by_kind.items()},
            "hallucination_accuracy": {
                kind: interval(group, "hallucination_accuracy") for kind, group in by_kind.items()
            },
            "hallucination_accuracy_extracted": {
                kind: interval(group, "hallucination_accuracy_extracted")
                for kind, group in by_kind.items()
            },
            "utilisation_recall": interval(by_kind["arguable"], "utilisation_recall"),
            "abstention_accuracy": {
                kind: interval(group, "abstention_accuracy") for kind, group in by_kind.items()
            },
            "successful_abstention": {
                kind: interval(by_kind[kind], "successful_abstention") for kind in ABSTENTION_KINDS
            },
        }
        rows = [r for group in by_kind.values() for r in group]
        if all(key in r for r in rows for key in AUTHORS_METRICS):
            table[workflow]["authors"] = {
                "hallucination_accuracy": {
                    kind: interval(group, "authors_hallucination_accuracy")
                    for kind, group in by_kind.items()
                },
                "factor_recall": interval(by_kind["arguable"], "authors_factor_recall"),
                "successful_abstention": {
                    kind: interval(by_kind[kind], "authors_successful_abstention")
                    for kind in ABSTENTION_KINDS
                },
                "precedent_identification_accuracy": {
                    kind: interval(group, "precedent_identification_accuracy")
                    for kind, group in by_kind.items()
                },
            }
    return table


def _cell(interval: Mapping[str, float]) -> str:
    if math.isnan(interval["mean"]):  # no triples of that kind
        return "n/a"
    return format_interval(interval, 2, 2)


def markdown_table(table: Mapping) -> str:
    """`argument_table` as one Markdown table, a row per workflow: triples per kind, Acc_H on
    each kind, Rec_U on arguable, successful abstention on mismatched and non_arguable, and the
    share of plies that argue on arguable triples (so that abstaining everywhere shows; x100,
    `mean [low, high]`)."""
    lines = [
        "| workflow | n (arg / mis / non) | Acc_H arguable | Acc_H mismatched "
        "| Acc_H non_arguable | Rec_U arguable | abstention mismatched "
        "| abstention non_arguable | plies argued, arguable |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for workflow, row in table.items():
        cells = [
            workflow,
            " / ".join(str(row["n"][kind]) for kind in KINDS),
            *(_cell(row["hallucination_accuracy"][kind]) for kind in KINDS),
            _cell(row["utilisation_recall"]),
            _cell(row["successful_abstention"]["mismatched"]),
            _cell(row["successful_abstention"]["non_arguable"]),
            _cell(row["abstention_accuracy"]["arguable"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += _authors_block(table)
    return "\n".join(["## Argument (3-ply, with abstention)", "", *lines]) + "\n"


def _authors_block(table: Mapping) -> list[str]:
    rows = {workflow: row["authors"] for workflow, row in table.items() if "authors" in row}
    if not rows:
        return []
    lines = [
        "",
        "### Authors' definitions (Zhang & Ashley, `multi_agent_factor.py`)",
        "",
        "| workflow | Acc_H arguable | Acc_H mismatched | Acc_H non_arguable | recall arguable "
        "| abstention mismatched | abstention non_arguable | PI arguable | PI mismatched "
        "| PI non_arguable |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for workflow, row in rows.items():
        cells = [
            workflow,
            *(_cell(row["hallucination_accuracy"][kind]) for kind in KINDS),
            _cell(row["factor_recall"]),
            *(_cell(row["successful_abstention"][kind]) for kind in ABSTENTION_KINDS),
            *(_cell(row["precedent_identification_accuracy"][kind]) for kind in KINDS),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Acc_H = 1 - N_h / N_claimed (100 when nothing is claimed); recall = N_util / N_gt "
        "whether or not the plies abstain; abstention = every distilled factor list empty "
        "(TERMINATE or not); PI = share of claimed c1-precedent commonalities and precedent "
        "outcomes that are right (0 when none is claimed). Their override (Acc_H 100, recall "
        "0 after a successful abstention) changes no number.",
    ]
    return lines
