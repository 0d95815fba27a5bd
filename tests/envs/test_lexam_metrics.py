import math

import pytest

from lexrl.bootstrap import mean_with_ci
from lexrl.envs.lexam.metrics import mcq_metrics, open_metrics


def _mcq(gold, predicted, language, n_options):
    return {"gold": gold, "predicted": predicted, "language": language, "n_options": n_options}


# en/4: right, wrong, unparsed; en/8: right; de/4: right, right, wrong; de/8: unparsed.
MCQ = [
    _mcq(0, 0, "en", 4),
    _mcq(1, 2, "en", 4),
    _mcq(2, None, "en", 4),
    _mcq(5, 5, "en", 8),
    _mcq(3, 3, "de", 4),
    _mcq(0, 0, "de", 4),
    _mcq(1, 0, "de", 4),
    _mcq(7, None, "de", 8),
]


def test_mcq_accuracy_parse_rate_and_breakdowns():
    metrics = mcq_metrics(MCQ)
    assert metrics["n"] == 8
    assert metrics["accuracy"]["mean"] == pytest.approx(4 / 8)
    assert metrics["parse_rate"] == pytest.approx(6 / 8)
    assert metrics["accuracy"]["low"] < 0.5 < metrics["accuracy"]["high"]
    assert metrics["accuracy"]["low"] >= 0.0 and metrics["accuracy"]["high"] <= 1.0
    assert metrics["accuracy"] == mean_with_ci([1, 0, 0, 1, 1, 1, 0, 0])
    by_language = metrics["by_language"]
    assert list(by_language) == ["de", "en"]
    assert by_language["en"]["n"] == 4 and by_language["en"]["accuracy"]["mean"] == 0.5
    assert by_language["de"]["n"] == 4 and by_language["de"]["accuracy"]["mean"] == 0.5
    assert by_language["en"]["parse_rate"] == 0.75
    by_options = metrics["by_n_options"]
    assert by_options[4]["n"] == 6 and by_options[4]["accuracy"]["mean"] == pytest.approx(3 / 6)
    assert by_options[8]["n"] == 2 and by_options[8]["accuracy"]["mean"] == 0.5
    assert by_options[8]["parse_rate"] == 0.5


def test_an_unparsed_answer_never_matches_gold():
    metrics = mcq_metrics([_mcq(0, None, "en", 4), _mcq(0, None, "en", 4)])
    assert metrics["accuracy"] == {"mean": 0.0, "low": 0.0, "high": 0.0}
    assert metrics["parse_rate"] == 0.0


def test_mcq_interval_is_seeded_and_shrinks_with_more_questions():
    small = mcq_metrics(MCQ, seed=3)["accuracy"]
    assert small == mcq_metrics(MCQ, seed=3)["accuracy"]
    large = mcq_metrics(MCQ * 25, seed=3)["accuracy"]
    assert large["mean"] == small["mean"]
    assert large["high"] - large["low"] < small["high"] - small["low"]


def test_open_scores_exclude_failed_judgements():
    records = [
        {"score": 0.7, "language": "en"},
        {"score": 0.4, "language": "en"},
        {"score": None, "language": "en"},
        {"score": 1.0, "language": "de"},
        {"score": None, "language": "de"},
    ]
    metrics = open_metrics(records)
    assert (metrics["n"], metrics["failed"]) == (5, 2)
    assert metrics["score"]["mean"] == pytest.approx(100 * 2.1 / 3)
    assert metrics["score"]["low"] <= metrics["score"]["mean"] <= metrics["score"]["high"]
    assert metrics["by_language"]["en"] == {
        "n": 3,
        "failed": 1,
        "score": pytest.approx(open_metrics(records[:2])["score"]),
    }
    assert metrics["by_language"]["en"]["score"]["mean"] == pytest.approx(55.0)
    assert metrics["by_language"]["de"]["score"] == {"mean": 100.0, "low": 100.0, "high": 100.0}


def test_all_failed_is_no_score_not_zero():
    metrics = open_metrics([{"score": None, "language": "en"}])
    assert metrics["failed"] == 1 and math.isnan(metrics["score"]["mean"])
