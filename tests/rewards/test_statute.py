import pytest

from lexrl.rewards.statute import coverage_gains, hit, recall, statute_reward


def test_recall_and_hit():
    assert recall([1, 2, 3], [2, 9]) == 0.5
    assert recall([], [1]) == 0.0
    assert recall([1], []) == 0.0
    assert hit([4, 2], [2, 9]) == 1.0 and hit([4], [2]) == 0.0


def test_coverage_gain_counts_only_new_gold_per_iteration():
    pools = [[1, 5], [1, 5, 7], [1, 5, 7, 2]]
    assert coverage_gains(pools, gold=[1, 2, 3, 4]) == [0.25, 0.0, 0.25]


def test_reward_components_by_hand():
    components = statute_reward(
        pool=[7, 1, 5, 2],
        gold=[1, 2],
        gains=[0.5, 0.5],
        planner_steps=3,
        exited_before_retrieval=False,
        alpha=0.1,
    )
    assert components == pytest.approx(
        {"recall": 1.0, "coverage_gain": 0.1, "step_penalty": -0.15, "early_exit": 0.0}
    )
    truncated = statute_reward([7, 1, 5, 2], [1, 2], [0.5, 0.5], 3, False, recall_k=2)
    assert truncated["recall"] == 0.5
    early = statute_reward([], [1], [], 1, True)
    assert sum(early.values()) == pytest.approx(-0.05 - 5.0)
