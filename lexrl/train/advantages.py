"""Group-relative advantages and the training rows they are attached to."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lexrl.types import Group


def group_advantages(
    rewards: torch.Tensor, scale: str = "group", eps: float = 1e-4
) -> torch.Tensor:
    """Advantages from rewards of shape [G, K] (G groups of K trajectories) -> [G, K].

    `group`: (R - group mean) / (group std + eps)  (LegalMALR eq. 6, GRPO).
    `batch`: (R - group mean) / (std over all G*K rewards + eps)  (Hu et al. 2025, REINFORCE++).
    `none`:  R - group mean  (Dr. GRPO, Liu et al. 2025: std scaling up-weights groups whose
             rewards barely differ).
    The std is the population std (unbiased=False), so K = 2 with rewards (0, 1) gives +-1.
    """
    centered = rewards - rewards.mean(dim=1, keepdim=True)
    if scale == "group":
        return centered / (rewards.std(dim=1, unbiased=False, keepdim=True) + eps)
    if scale == "batch":
        return centered / (rewards.std(unbiased=False) + eps)
    if scale == "none":
        return centered
    raise ValueError(f"unknown scale_rewards {scale!r}")


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


def rows_from_groups(
    groups: list[Group], scale: str, eps: float, trajectory_offset: int = 0
) -> list[Row]:
    """Every trainable Turn of every trajectory becomes a Row with that trajectory's advantage.

    The log-prob of a trajectory is the sum over its actions (LegalMALR eq. 7), so a trajectory's
    planner turns and rewrite turns all carry the same advantage.
    """
    if not groups:
        return []
    rewards = torch.tensor([group.rewards for group in groups], dtype=torch.float64)
    advantages = group_advantages(rewards, scale, eps)
    rows = []
    index = trajectory_offset
    for group_index, group in enumerate(groups):
        for k, trajectory in enumerate(group.trajectories):
            for turn in trajectory.turns:
                if turn.trainable and turn.completion_ids:
                    rows.append(
                        Row(
                            prompt_ids=turn.prompt_ids,
                            completion_ids=turn.completion_ids,
                            sampler_logprobs=turn.logprobs,
                            advantage=float(advantages[group_index, k]),
                            temperature=turn.temperature,
                            trajectory=index,
                            role=turn.role,
                        )
                    )
            index += 1
    return rows
