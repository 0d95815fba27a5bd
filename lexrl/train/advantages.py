"""Group-relative advantages and the training rows they are attached to."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from lexrl.types import Group


def group_advantages(
    rewards: torch.Tensor,
    scale: str = "group",
    eps: float = 1e-4,
    strata: list[str] | None = None,
) -> torch.Tensor:
    """Advantages from rewards of shape [G, K] (G groups of K trajectories) -> [G, K].

    A NaN reward marks a failed trajectory (a judge could not score it): means and stds are
    taken over the others and its advantage is 0.
    `group`: (R - group mean) / (group std + eps)  (LegalMALR eq. 6, GRPO).
    `batch`: (R - group mean) / (std over all G*K rewards + eps)  (Hu et al. 2025, REINFORCE++);
             with `strata` (one label per group: a mixture's env) the std over the rewards of
             the groups with the same label, so envs with different reward scales each get
             unit-scale advantages.
    `none`:  R - group mean  (Dr. GRPO, Liu et al. 2025: std scaling up-weights groups whose
             rewards barely differ).
    The std is the population std (unbiased=False), so K = 2 with rewards (0, 1) gives +-1.
    """
    centered = rewards - rewards.nanmean(dim=1, keepdim=True)
    if scale == "group":
        advantages = centered / (centered.square().nanmean(dim=1, keepdim=True).sqrt() + eps)
    elif scale == "batch":
        labels = strata if strata is not None else [""] * rewards.shape[0]
        std = torch.zeros(rewards.shape[0], 1, dtype=rewards.dtype)
        for label in set(labels):
            rows = torch.tensor([g for g, other in enumerate(labels) if other == label])
            valid = rewards[rows][~rewards[rows].isnan()]
            if valid.numel():
                std[rows] = (valid - valid.mean()).square().mean().sqrt()
        advantages = centered / (std + eps)
    elif scale == "none":
        advantages = centered
    else:
        raise ValueError(f"unknown scale_rewards {scale!r}")
    return advantages.nan_to_num(nan=0.0)


def role_rewards(groups: list[Group]) -> dict[str, torch.Tensor]:
    """Per role, the [G, K] rewards its turns are credited with: the trajectory's
    `role_rewards[role]`, else its `reward`; NaN where the role took no trainable turn in that
    trajectory or the trajectory failed (so it neither shifts the role's group mean nor gets an
    advantage)."""
    roles = sorted(
        {turn.role for g in groups for t in g.trajectories for turn in t.turns if turn.trainable}
    )
    out = {}
    for role in roles:
        rewards = [
            [
                t.role_rewards.get(role, t.reward)
                if not t.failed and any(u.role == role and u.trainable for u in t.turns)
                else math.nan
                for t in group.trajectories
            ]
            for group in groups
        ]
        out[role] = torch.tensor(rewards, dtype=torch.float64)
    return out


@dataclass
class Row:
    """One trainable Turn carrying its trajectory's advantage."""

    prompt_ids: list[int]
    completion_ids: list[int]
    sampler_logprobs: list[float]
    advantage: float
    temperature: float
    trajectory: int
    """Index of the trajectory in the global batch (rows of one trajectory share it)."""
    role: str


@dataclass(frozen=True)
class Shard:
    """Which trajectories of a step one process samples."""

    tasks: list[int]
    """Indices (into the step's G tasks) of the tasks this process samples."""
    samples: int
    """Trajectories per task this process samples (K, or K / processes-per-task)."""


def shard_step(tasks: int, k: int, processes: int, rank: int) -> Shard:
    """Split a step of `tasks` x `k` trajectories over `processes`.

    With tasks % processes == 0 each process samples whole groups (tasks rank, rank + P, ...).
    Otherwise each task's K trajectories are split over processes % tasks == 0 consecutive
    processes, so LegalMALR's G = 2 runs on 8 GPUs (2 trajectories each). Anything else raises.
    """
    if tasks % processes == 0:
        return Shard(list(range(rank, tasks, processes)), k)
    per_task = processes // tasks
    if processes % tasks or k % per_task:
        raise ValueError(
            f"cannot split {tasks} tasks x {k} trajectories over {processes} processes: need "
            "tasks_per_step divisible by the processes, or the processes by tasks_per_step and "
            "num_generations by the processes per task"
        )
    return Shard([rank // per_task], k // per_task)


def split_group_advantages(
    all_rewards: torch.Tensor, tasks: int, rank: int, scale: str, eps: float
) -> torch.Tensor:
    """This process's advantages when groups are split over processes.

    all_rewards: [P, S], the S rewards each process sampled, gathered in rank order (consecutive
    ranks share a task, `shard_step`). Returns [1, S]: this process's slice of the [G, K]
    advantages computed over the whole groups.
    """
    processes, samples = all_rewards.shape
    per_task = processes // tasks
    grouped = all_rewards.reshape(tasks, per_task * samples)
    advantages = group_advantages(grouped, scale, eps)
    column = (rank % per_task) * samples
    return advantages[rank // per_task, column : column + samples].unsqueeze(0)


def rows_from_groups(
    groups: list[Group],
    scale: str,
    eps: float,
    trajectory_offset: int = 0,
    advantages: torch.Tensor | None = None,
    per_role: bool = False,
    strata: list[str] | None = None,
) -> list[Row]:
    """Every trainable Turn of every trajectory that did not fail becomes a Row with that
    trajectory's advantage.

    The log-prob of a trajectory is the sum over its actions (LegalMALR eq. 7), so a trajectory's
    planner turns and rewrite turns all carry the same advantage. `advantages` ([len(groups), K],
    e.g. from `split_group_advantages`) replaces the within-group computation. `per_role`: a
    turn instead carries its role's advantage, the role's rewards (`role_rewards`) normalised
    within the group over the trajectories in which that role acted. `strata`: one label per
    group for `batch` scaling (`group_advantages`).
    """
    if not groups:
        return []
    if advantages is None:
        rewards = torch.tensor([group.rewards for group in groups], dtype=torch.float64)
        advantages = group_advantages(rewards, scale, eps, strata)
    by_role = (
        {role: group_advantages(r, scale, eps, strata) for role, r in role_rewards(groups).items()}
        if per_role
        else {}
    )
    rows = []
    index = trajectory_offset
    for group_index, group in enumerate(groups):
        for k, trajectory in enumerate(group.trajectories):
            # A failed trajectory has no reward to learn from.
            turns = [] if trajectory.failed else trajectory.turns
            for turn in turns:
                if turn.trainable and turn.completion_ids:
                    credit = by_role[turn.role] if per_role else advantages
                    rows.append(
                        Row(
                            prompt_ids=turn.prompt_ids,
                            completion_ids=turn.completion_ids,
                            sampler_logprobs=turn.logprobs,
                            advantage=float(credit[group_index, k]),
                            temperature=turn.temperature,
                            trajectory=index,
                            role=turn.role,
                        )
                    )
            index += 1
    return rows
