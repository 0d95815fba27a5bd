import math

import pytest
import torch

from lexrl.train.advantages import group_advantages, rows_from_groups
from lexrl.train.loss import LossInputs, Totals, policy_loss
from lexrl.types import Group, Task, Trajectory, Turn


def test_group_advantages_by_hand():
    rewards = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
    assert torch.allclose(group_advantages(rewards, "group", eps=0.0)[0], torch.tensor([1.0, -1.0]))
    assert torch.equal(group_advantages(rewards, "group")[1], torch.tensor([0.0, 0.0]))
    assert torch.allclose(
        group_advantages(rewards, "none"), torch.tensor([[0.5, -0.5], [0.0, 0.0]])
    )
    batch_std = rewards.std(unbiased=False)
    assert torch.allclose(
        group_advantages(rewards, "batch", eps=0.0)[0], torch.tensor([0.5, -0.5]) / batch_std
    )


def test_batch_scaling_per_env_divides_by_each_envs_own_std():
    """A mixture's groups of one env (rewards in [0, 1]) and of another (rewards x10): with
    strata, each env's advantages are divided by its own batch std and so match in scale."""
    small = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    rewards = torch.cat([small, small * 10])
    strata = ["gdpr"] * 3 + ["statute"] * 3
    advantages = group_advantages(rewards, "batch", eps=0.0, strata=strata)
    std = small.std(unbiased=False)  # three 1s and three 0s: every deviation is 0.5
    assert std == 0.5
    expected = (small - small.mean(dim=1, keepdim=True)) / std
    assert torch.allclose(advantages[:3], expected) and torch.allclose(advantages[3:], expected)
    # Without strata the std of all twelve rewards, dominated by the x10 env.
    pooled = group_advantages(rewards, "batch", eps=0.0)
    assert pooled[0, 0] < 0.25 < advantages[0, 0]


def test_mixture_metrics_are_reported_per_env_for_the_envs_in_the_step():
    from types import SimpleNamespace

    from lexrl.envs.mixture import MixtureEnv
    from lexrl.train.trainer import metric_keys, reduce_metric_sums

    member = SimpleNamespace(roles=("meta",), reward_components=("correct",), episode_metrics=())
    mixture = MixtureEnv({"gdpr": member, "statute": member}, {"gdpr": 0.5, "statute": 0.5})
    keys = metric_keys(mixture)
    assert "gdpr/reward/correct" in keys and "statute/agent/meta/turns" in keys
    assert "reward/correct" not in keys, "components are per env, not summed across envs"
    sums = {
        "count/episodes": 4.0,
        "count/groups": 2.0,
        "reward/total": 1.0,
        "gdpr/count/episodes": 2.0,
        "gdpr/count/groups": 1.0,
        "gdpr/reward/total": 1.0,
        "gdpr/reward/correct": 1.0,
        "gdpr/agent/meta/turns": 2.0,
    }
    means = reduce_metric_sums(sums, keys, SimpleNamespace(num_processes=1), ["gdpr", "statute"])
    assert means["reward/total"] == 0.25 and means["gdpr/reward/total"] == 0.5
    assert means["gdpr/reward/correct"] == 0.5 and means["gdpr/agent/meta/turns"] == 1.0
    assert means["count/episodes"] == 4 and means["gdpr/count/episodes"] == 2
    assert not any(key.startswith("statute/") for key in means), "no statute episode this step"


def _toy():
    """Two trajectories of one group: traj 0 (reward 1) has two turns, traj 1 (reward 0) one."""
    turns0 = [
        Turn("planner", [1], [2, 3], [-1.0, -2.0], "", 0),
        Turn("single_element", [1], [4], [-0.5], "", 0),
    ]
    turns1 = [
        Turn("planner", [1], [5, 6], [-1.5, -0.5], "", 0),
        Turn("judge", [1], [7], [-1.0], "", 0, trainable=False),
    ]
    group = Group(
        Task("t", {}, []),
        [Trajectory("t", turns0, reward=1.0), Trajectory("t", turns1, reward=0.0)],
    )
    rows = rows_from_groups([group], "group", eps=0.0)
    return rows


def _inputs(rows, logprobs):
    width = max(len(r.completion_ids) for r in rows)
    mask = torch.zeros(len(rows), width)
    sampler = torch.zeros(len(rows), width)
    for i, r in enumerate(rows):
        mask[i, : len(r.completion_ids)] = 1
        sampler[i, : len(r.completion_ids)] = torch.tensor(r.sampler_logprobs)
    return LossInputs(logprobs, sampler, torch.tensor([r.advantage for r in rows]), mask)


def test_rows_carry_trajectory_advantage_and_skip_untrainable_turns():
    rows = _toy()
    assert [(r.role, r.advantage, r.trajectory) for r in rows] == [
        ("planner", 1.0, 0),
        ("single_element", 1.0, 0),
        ("planner", -1.0, 1),
    ]


def test_reinforce_loss_by_hand():
    rows = _toy()
    logprobs = torch.tensor([[-1.0, -2.0], [-0.5, 0.0], [-1.5, -0.5]])
    loss, _ = policy_loss(_inputs(rows, logprobs), Totals(2, 3, 5, 2), "reinforce")
    # -(1/2) * [ +1 * (-1 - 2 - 0.5) + (-1) * (-1.5 - 0.5) ] = -(1/2) * (-3.5 + 2) = 0.75
    assert loss.item() == pytest.approx(0.75)


def test_grpo_loss_clips_by_hand():
    rows = _toy()
    # Row 0 moved up by log(1.5) on its first token: ratio 1.5 > 1.2 is clipped for A = +1.
    logprobs = torch.tensor([[-1.0 + math.log(1.5), -2.0], [-0.5, 0.0], [-1.5, -0.5]])
    inputs = _inputs(rows, logprobs)
    loss, metrics = policy_loss(inputs, Totals(2, 3, 5, 2), "grpo", epsilon=0.2)
    # Row means of -min(r*A, clip(r)*A): row0 = -(1.2 + 1)/2, row1 = -1, row2 = -(-1 -1)/2 = 1.
    expected = (-(1.2 + 1.0) / 2 - 1.0 + 1.0) / 3
    assert loss.item() == pytest.approx(expected)
    assert metrics["clip_fraction"] == pytest.approx(1 / 5)
    dapo, _ = policy_loss(inputs, Totals(2, 3, 5, 2), "dapo", epsilon=0.2, epsilon_high=0.28)
    assert dapo.item() == pytest.approx((-1.28 - 1.0 - 1.0 + 1.0 + 1.0) / 5)
    dr, _ = policy_loss(inputs, Totals(2, 3, 5, 2), "dr_grpo", epsilon=0.2)
    assert dr.item() == pytest.approx((-1.2 - 1.0 - 1.0 + 1.0 + 1.0) / (3 * 2))


def test_kl_term_is_zero_at_the_reference_and_positive_away_from_it():
    rows = _toy()
    logprobs = torch.tensor([[-1.0, -2.0], [-0.5, 0.0], [-1.5, -0.5]])
    inputs = _inputs(rows, logprobs)
    inputs.ref_logprobs = logprobs.clone()
    _, metrics = policy_loss(inputs, Totals(2, 3, 5, 2), "grpo", beta=0.1)
    assert metrics["kl"] == pytest.approx(0.0)
    inputs.ref_logprobs = logprobs - 0.3
    _, metrics = policy_loss(inputs, Totals(2, 3, 5, 2), "grpo", beta=0.1)
    assert metrics["kl"] == pytest.approx(math.exp(-0.3) + 0.3 - 1, rel=1e-5)


def test_importance_weights_by_hand():
    from lexrl.train.loss import importance_weights

    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    sampler = torch.tensor([[-1.0, -1.0], [-2.0, 0.0]])
    # row 0: log ratios +0.5 and +1.0 (sequence ratio e^1.5 = 4.48 > 3); row 1: -0.5
    old = torch.tensor([[-0.5, 0.0], [-2.5, 9.0]])
    weights, metrics = importance_weights(old, sampler, mask, "sequence_mask", cap=3.0)
    assert weights.shape == (2, 1)
    assert torch.allclose(weights, torch.tensor([[0.0], [math.exp(-0.5)]]))
    assert metrics["mismatch/is_limited_fraction"] == 0.5
    weights, _ = importance_weights(old, sampler, mask, "sequence_truncate", cap=3.0)
    assert torch.allclose(weights, torch.tensor([[3.0], [math.exp(-0.5)]]))
    weights, metrics = importance_weights(old, sampler, mask, "token_truncate", cap=2.0)
    assert torch.allclose(weights[0], torch.tensor([math.exp(0.5), 2.0]))
    assert metrics["mismatch/is_limited_fraction"] == pytest.approx(1 / 3)
    weights, _ = importance_weights(old, sampler, mask, "token_mask", cap=2.0)
    assert torch.allclose(weights[0], torch.tensor([math.exp(0.5), 0.0]))
    k3 = [math.exp(d) - d - 1 for d in (0.5, 1.0, -0.5)]
    assert metrics["mismatch/k3_kl"] == pytest.approx(sum(k3) / 3)
    assert metrics["mismatch/abs_logprob_diff"] == pytest.approx(2.0 / 3)
    same, metrics = importance_weights(sampler, sampler, mask, "sequence_mask")
    assert torch.equal(same, torch.ones(2, 1)) and metrics["mismatch/k3_kl"] == 0.0


def test_is_weights_scale_the_loss_and_old_logprobs_set_the_ratio():
    rows = _toy()
    from lexrl.train.learner import pack_rows

    batch = pack_rows(rows, pad_id=0)
    logprobs = batch["sampler_logprobs"].clone().requires_grad_(True)
    totals = Totals(trajectories=2, rows=3, tokens=5, max_completion_length=2)
    base = LossInputs(
        logprobs, batch["sampler_logprobs"], batch["advantages"], batch["completion_mask"]
    )
    plain, _ = policy_loss(base, totals, "reinforce")
    weights = torch.tensor([[0.0], [1.0], [1.0]])
    masked, _ = policy_loss(
        LossInputs(logprobs, base.sampler_logprobs, base.advantages, base.mask, is_weights=weights),
        totals,
        "reinforce",
    )
    first_row = -(batch["advantages"][0] * (logprobs[0] * batch["completion_mask"][0]).sum()) / 2
    assert masked.item() == pytest.approx((plain - first_row).item())
    # with pi_old = pi the PPO ratio is 1 whatever the sampler said
    shifted = base.sampler_logprobs - 0.7
    _, metrics = policy_loss(
        LossInputs(logprobs, shifted, base.advantages, base.mask, old_logprobs=logprobs.detach()),
        totals,
        "grpo",
    )
    assert metrics["clip_fraction"] == 0.0 and metrics["sampler_logprob_diff"] == 0.0


def test_shard_step_whole_groups_or_split_groups():
    from lexrl.train.advantages import Shard, shard_step

    assert shard_step(4, 8, 2, 1) == Shard([1, 3], 8)
    # LegalMALR's G = 2, K = 8 on 8 GPUs: 4 processes per task, 2 trajectories each
    assert [shard_step(2, 8, 8, rank) for rank in (0, 3, 4, 7)] == [
        Shard([0], 2), Shard([0], 2), Shard([1], 2), Shard([1], 2)
    ]  # fmt: skip
    with pytest.raises(ValueError, match="cannot split 2 tasks x 8 trajectories over 6"):
        shard_step(2, 8, 6, 0)


def test_split_group_advantages_equal_the_whole_group_ones():
    from lexrl.train.advantages import split_group_advantages

    rewards = torch.tensor([[1.0, 0.0, 0.5, 0.25], [0.0, 0.0, 1.0, 1.0]], dtype=torch.float64)
    for scale in ("group", "batch", "none"):
        whole = group_advantages(rewards, scale, eps=1e-4)
        gathered = rewards.reshape(4, 2)  # 4 processes, 2 per task, 2 samples each, rank order
        for rank in range(4):
            mine = split_group_advantages(gathered, tasks=2, rank=rank, scale=scale, eps=1e-4)
            expected = whole[rank // 2, (rank % 2) * 2 : (rank % 2) * 2 + 2]
            assert torch.equal(mine[0], expected), (scale, rank)


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_a_failed_trajectory_is_left_out_of_its_groups_advantages(scale):
    with_failed = torch.tensor([[1.0, math.nan, 0.0, 0.5], [0.2, 0.4, math.nan, math.nan]])
    without = group_advantages(torch.tensor([[1.0, 0.0, 0.5]]), scale, eps=1e-4)
    advantages = group_advantages(with_failed, scale, eps=1e-4)
    assert advantages[0, 1] == 0 and advantages[1, 2] == advantages[1, 3] == 0
    if scale != "batch":  # the batch std also spans the second group
        assert torch.allclose(advantages[0, [0, 2, 3]], without[0])
    assert not advantages.isnan().any()
    assert group_advantages(torch.full((1, 3), math.nan), scale).eq(0).all()


def test_a_failed_trajectory_has_no_training_rows():
    turns = [Turn("examinee", [1], [5, 6], [-1.5, -0.5], "", 0)]
    failed = Trajectory("t", list(turns), reward=0.0, failed="judge failed: no score")
    group = Group(
        Task("t", {}, None),
        [
            Trajectory("t", list(turns), reward=1.0),
            failed,
            Trajectory("t", list(turns), reward=0.0),
        ],
    )
    assert math.isnan(group.rewards[1])
    rows = rows_from_groups([group], "group", eps=0.0)
    assert [(r.trajectory, r.advantage) for r in rows] == [(0, 1.0), (2, -1.0)]


def test_failed_episodes_are_counted_not_averaged():
    from types import SimpleNamespace

    from lexrl.train.trainer import reduce_metric_sums, step_metrics

    env = SimpleNamespace(
        name="lexam", roles=("examinee",), reward_components=("score",), episode_metrics=()
    )
    turns = [Turn("examinee", [1], [5, 6], [-1.5, -0.5], "", 0)]
    group = Group(
        Task("t", {}, None),
        [
            Trajectory("t", list(turns), reward=0.8, components={"score": 0.8}),
            Trajectory("t", list(turns), reward=0.0, failed="judge failed"),
            Trajectory("t", list(turns), reward=0.4, components={"score": 0.4}),
        ],
    )
    sums = step_metrics([group], env)
    assert sums["judge/failed"] == 1 and sums["reward/total"] == pytest.approx(1.2)
    accelerator = SimpleNamespace(num_processes=1)
    keys = [
        "count/episodes",
        "count/groups",
        "reward/total",
        "reward/score",
        "judge/failed",
        "reward/group_std",
        "agent/examinee/turns",
        "agent/examinee/tokens",
    ]
    means = reduce_metric_sums(sums, keys, accelerator)
    assert means["reward/total"] == pytest.approx(0.6) and means["reward/score"] == pytest.approx(
        0.6
    )
    assert means["judge/failed"] == 1 and means["agent/examinee/turns"] == 1
    assert means["reward/group_std"] == pytest.approx(0.2)


def _arguer_analyst_group():
    """Three argument episodes: the arguer's plies earn 1.0, 0.0, 0.5; the analyst's verdicts
    0.0, 1.0, 1.0 (it acted in episodes 0 and 1 only; episode 2 has no analyst turn)."""

    def turn(role):
        return Turn(role, [1], [2], [-1.0], "", 0)

    return Group(
        Task("t", {}, None),
        [
            Trajectory(
                "t",
                [turn("arguer"), turn("analyst")],
                reward=1.0,
                role_rewards={"arguer": 1.0, "analyst": 0.0},
            ),
            Trajectory(
                "t",
                [turn("arguer"), turn("analyst")],
                reward=0.0,
                role_rewards={"arguer": 0.0, "analyst": 1.0},
            ),
            Trajectory("t", [turn("arguer")], reward=0.5, role_rewards={"arguer": 0.5}),
        ],
    )


def test_per_role_advantages_by_hand():
    group = _arguer_analyst_group()
    rows = rows_from_groups([group], "none", eps=0.0, per_role=True)
    # arguer: rewards (1, 0, 0.5), mean 0.5 -> (0.5, -0.5, 0); analyst: rewards (0, 1) over the
    # two episodes it acted in, mean 0.5 -> (-0.5, 0.5)
    assert [(r.trajectory, r.role, r.advantage) for r in rows] == [
        (0, "arguer", 0.5),
        (0, "analyst", -0.5),
        (1, "arguer", -0.5),
        (1, "analyst", 0.5),
        (2, "arguer", 0.0),
    ]
    # group-scaled: the analyst's std is 0.5 -> +-1; the arguer's sqrt(1/6)
    rows = rows_from_groups([group], "group", eps=0.0, per_role=True)
    arguer_std = math.sqrt(((0.5**2) * 2) / 3)
    assert rows[0].advantage == pytest.approx(0.5 / arguer_std)
    assert (rows[1].advantage, rows[3].advantage) == (pytest.approx(-1.0), pytest.approx(1.0))
    # per trajectory (the default), both roles of an episode share its advantage
    rows = rows_from_groups([group], "none", eps=0.0)
    assert [r.advantage for r in rows] == [0.5, 0.5, -0.5, -0.5, 0.0]


def test_role_rewards_are_logged_per_role():
    from types import SimpleNamespace

    from lexrl.train.trainer import metric_keys, reduce_metric_sums, step_metrics

    env = SimpleNamespace(name="argument", roles=("arguer", "analyst"))
    sums = step_metrics([_arguer_analyst_group()], env)
    means = reduce_metric_sums(sums, metric_keys(env), SimpleNamespace(num_processes=1))
    assert means["agent/arguer/reward"] == pytest.approx(0.5)
    assert means["agent/analyst/reward"] == pytest.approx(0.5)
    assert "agent/analyst/rewarded" not in means
