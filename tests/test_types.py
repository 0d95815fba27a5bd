from lexrl.types import Trajectory, Turn


def test_trajectory_round_trips_through_one_json_line():
    trajectory = Trajectory(
        task_id="q-1",
        turns=[
            Turn("planner", [1, 2, 3], [4, 5], [-0.5, -1.25], '{"action": "exit"}', 3, True, 0.6),
            Turn("judge", [7], [8], [-0.1], "好", 3, trainable=False),
        ],
        outcome=[12, 7],
        reward=0.85,
        components={"recall": 1.0, "step_penalty": -0.15},
        steps=[{"action": "single_element", "queries": ["security deposit"]}],
        metrics={"mas_recall": 1.0},
    )
    line = trajectory.to_json()
    assert "\n" not in line
    assert Trajectory.from_json(line) == trajectory


def test_turn_rejects_mismatched_logprobs():
    import pytest

    with pytest.raises(ValueError, match="2 completion ids but 1 log-probs"):
        Turn("planner", [1], [4, 5], [-0.5], "x", 0)
