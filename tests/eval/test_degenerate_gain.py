"""The trained policy against the best degenerate policy: hand-made audit rows and summaries."""

import pytest

from lexrl.eval.audit import AuditRow
from lexrl.eval.degenerate_gain import (
    BEATS,
    LOSES,
    WITHIN,
    as_json,
    gains,
    markdown,
    paired_difference,
)


def row(env: str, policy: str, reward: float | None, headline: float | None) -> AuditRow:
    return AuditRow(env, policy, 10, 0, reward, None, headline, "accuracy")


BASELINES = {
    "gdpr": [
        row("gdpr", "teacher", 0.8, 1.0),
        row("gdpr", "always_Yes", 0.14, 0.53),
        row("gdpr", "majority_label", 0.43, 0.80),
        row("gdpr", "empty", -0.7, 0.0),
    ],
    "lexam": [row("lexam", "teacher", 0.7, 0.7), row("lexam", "empty", 0.0, None)],
}


def test_a_mixture_is_compared_per_env_on_reward_and_headline_with_the_best_policy_of_each():
    summaries = {
        "before": {"gdpr/reward": 0.1, "gdpr/accuracy": 0.4, "lexam/reward": 0.2},
        "after": {"gdpr/reward": 0.5, "gdpr/accuracy": 0.6, "lexam/reward": 0.3},
    }
    intervals = {
        "after": {
            "gdpr/reward": {"mean": 0.5, "low": 0.45, "high": 0.55},
            "gdpr/accuracy": {"mean": 0.6, "low": 0.4, "high": 0.8},
            "lexam/reward": {"mean": 0.3, "low": 0.1, "high": 0.5},
        }
    }
    rows = gains(summaries, intervals, BASELINES, mixture=True)
    table = {(r.env, r.measure): r for r in rows}
    assert set(table) == {("gdpr", "reward"), ("gdpr", "accuracy"), ("lexam", "reward")}

    reward = table["gdpr", "reward"]
    assert (reward.best_policy, reward.best_value, reward.teacher) == ("majority_label", 0.43, 0.8)
    assert reward.gain == pytest.approx(0.07)
    assert reward.verdict == BEATS  # 0.45 > 0.43
    accuracy = table["gdpr", "accuracy"]
    assert (accuracy.best_policy, accuracy.before) == ("majority_label", 0.4)
    assert accuracy.verdict == LOSES  # 0.6 < 0.8
    # lexam's only degenerate policy reports no headline; on reward 0.3 > 0.0 but low 0.1 > 0.0
    assert table["lexam", "reward"].verdict == BEATS
    assert "| gdpr | accuracy | 0.400 | 0.600 | majority_label | 0.800 | -0.200 | n/a | no |" in (
        markdown(rows)
    )


def test_a_mean_above_the_baseline_with_an_interval_reaching_below_it_is_not_called_a_win():
    summaries = {"after": {"reward": 0.5, "accuracy": 0.9}}
    intervals = {"after": {"reward": {"mean": 0.5, "low": 0.3, "high": 0.7}}}
    rows = gains(summaries, intervals, {"gdpr": BASELINES["gdpr"]}, mixture=False)
    verdicts = {r.measure: r.verdict for r in rows}
    # reward: 0.5 > 0.43 but 0.3 < 0.43; accuracy has no interval, so its mean decides
    assert verdicts == {"reward": WITHIN, "accuracy": BEATS}
    assert rows[0].before is None


def test_a_tie_for_the_best_degenerate_value_is_reported():
    baselines = {"lexam": [row("lexam", f"always_{x}", 0.25, 0.25) for x in "ABCD"]}
    (reward,) = gains({"after": {"reward": 0.2}}, {}, baselines, False)
    assert (reward.best_policy, reward.tied) == ("always_D", 3)
    assert "| always_D (and 3 tied) | 0.250 | -0.050 | n/a | no |" in markdown([reward])


def test_an_env_without_degenerate_values_gets_no_verdict():
    baselines = {"x": [row("x", "teacher", 1.0, 1.0), row("x", "empty", None, None)]}
    (reward, accuracy) = gains({"after": {"reward": 0.2, "accuracy": 0.1}}, {}, baselines, False)
    assert reward.verdict == accuracy.verdict == "n/a"
    assert reward.gain is None


def rule_with_task_values(rewards: list[float]) -> AuditRow:
    baseline = row("argument", "rule", sum(rewards) / len(rewards), None)
    baseline.task_values = {f"t{i}": {"reward": r} for i, r in enumerate(rewards)}
    return baseline


def test_pairing_by_task_separates_a_steady_gain_that_the_unpaired_interval_cannot():
    # Tasks range from hard (0) to easy (2): the trained policy is 0.2 above the rule on every
    # one, so its own interval is wide but every paired difference is +0.2.
    rule_rewards = [0.0, 1.0, 2.0] * 10
    after_rewards = [r + 0.2 for r in rule_rewards]
    baselines = {
        "argument": [row("argument", "teacher", 3.0, None), rule_with_task_values(rule_rewards)]
    }
    after = {f"t{i}": {"reward": r} for i, r in enumerate(after_rewards)}
    mean = sum(after_rewards) / len(after_rewards)
    summaries = {"after": {"reward": mean}}
    intervals = {"after": {"reward": {"mean": mean, "low": mean - 0.3, "high": mean + 0.3}}}

    (unpaired,) = gains(summaries, intervals, baselines, False)
    assert unpaired.verdict == WITHIN and unpaired.paired is None
    (paired,) = gains(summaries, intervals, baselines, False, {"argument": after})
    assert paired.paired_tasks == 30
    assert paired.paired == pytest.approx({"mean": 0.2, "low": 0.2, "high": 0.2})
    assert paired.verdict == BEATS
    assert "| +0.200 [+0.200, +0.200] (30) | yes |" in markdown([paired])


def test_a_paired_gain_whose_interval_holds_0_is_within_and_a_paired_loss_is_no():
    rule = rule_with_task_values([1.0, 1.0, 1.0, 1.0])
    mixed = {f"t{i}": {"reward": r} for i, r in enumerate([2.0, 0.5, 1.5, 0.6])}
    difference, tasks = paired_difference(mixed, rule.task_values, "reward")
    assert tasks == 4 and difference["mean"] == pytest.approx(0.15)
    assert difference["low"] < 0 < difference["high"]
    baselines = {"argument": [rule]}
    (within,) = gains({"after": {"reward": 1.15}}, {}, baselines, False, {"argument": mixed})
    assert within.verdict == WITHIN
    worse = {f"t{i}": {"reward": 0.9} for i in range(4)}
    (loses,) = gains({"after": {"reward": 0.9}}, {}, baselines, False, {"argument": worse})
    assert loses.verdict == LOSES


def test_only_tasks_both_policies_played_are_paired():
    rule = rule_with_task_values([1.0, 1.0, 1.0])
    after = {"t0": {"reward": 2.0}, "t2": {"reward": 2.0}, "other": {"reward": -5.0}, "t1": {}}
    difference, tasks = paired_difference(after, rule.task_values, "reward")
    assert tasks == 2 and difference["mean"] == pytest.approx(1.0)
    assert paired_difference({"x": {"reward": 1.0}}, rule.task_values, "reward") == (None, 0)


def test_each_degenerate_policy_is_judged_paired_and_the_ones_not_beaten_are_named():
    after = {f"t{i}": {"reward": 1.0} for i in range(20)}
    best = row("argument", "always_abstain", 0.6, None)
    best.task_values = {f"t{i}": {"reward": 0.6} for i in range(20)}
    # Lower on average (0.5) than the best, yet as good as the trained policy on all but two
    # tasks: paired, the trained policy is not above it with 95% confidence.
    close = row("argument", "cato_never_abstains", 0.5, None)
    close.task_values = {f"t{i}": {"reward": -4.0 if i < 2 else 1.0} for i in range(20)}
    teacher = row("argument", "teacher", 2.0, None)
    teacher.task_values = {f"t{i}": {"reward": 2.0} for i in range(20)}
    rows = gains(
        {"after": {"reward": 1.0}},
        {},
        {"argument": [teacher, best, close]},
        mixture=False,
        task_values={"argument": after},
    )
    (reward,) = rows
    assert (reward.best_policy, reward.verdict) == ("always_abstain", BEATS)
    verdicts = {each.policy: each.verdict for each in reward.each}
    assert verdicts == {"always_abstain": BEATS, "cato_never_abstains": WITHIN}
    assert {each.policy: each.value for each in reward.each} == pytest.approx(
        {"always_abstain": 0.6, "cato_never_abstains": 0.5}
    )
    assert reward.not_beaten == ["cato_never_abstains"]
    assert "| 1 of 2 (not: cato_never_abstains) |" in markdown(rows)
    assert [each["verdict"] for each in as_json(rows)[0]["each"]] == [BEATS, WITHIN]
