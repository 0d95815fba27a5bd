"""Policy-gradient losses over completion tokens, as one pure function.

Every loss returns the micro-batch's share of the loss of the WHOLE global batch: the
denominators in `Totals` are counted over all rows of the optimizer step on all processes, so
summing micro-batch losses (gradient accumulation) and averaging across processes (DDP, after the
caller multiplies by the world size) give exactly the loss of the full batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class LossInputs:
    logprobs: torch.Tensor
    """[B, T] trainer log-probs of the completion tokens (right-padded)."""
    sampler_logprobs: torch.Tensor
    """[B, T] log-probs the sampler recorded for the same tokens."""
    advantages: torch.Tensor
    """[B] advantage of the trajectory each row belongs to."""
    mask: torch.Tensor
    """[B, T] 1.0 on completion tokens, 0.0 on padding."""
    ref_logprobs: torch.Tensor | None = None
    """[B, T] reference log-probs (adapter disabled); needed when beta > 0."""


@dataclass
class Totals:
    """Counts over the whole optimizer step (all micro-batches, all processes)."""

    trajectories: int
    rows: int
    tokens: int
    max_completion_length: int


def policy_loss(
    inputs: LossInputs,
    totals: Totals,
    loss_type: str = "reinforce",
    epsilon: float = 0.2,
    epsilon_high: float = 0.28,
    beta: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Returns (scalar loss, metrics).

    reinforce: -(1/N_traj) * sum_i A_i * sum_{turns, tokens} log pi  (LegalMALR eq. 7; the
               trajectory log-prob is the sum over all its actions, so long trajectories weigh more).
    grpo:      PPO-clipped surrogate, mean over each row's tokens, then mean over rows
               (DeepSeekMath eq. 3; biased toward short completions, Dr. GRPO sec. 3.1).
    dr_grpo:   same surrogate, token sum / (rows * max completion length) (Dr. GRPO eq. 2).
    dapo:      clip range (1 - epsilon, 1 + epsilon_high), token sum / all tokens (DAPO eq. 8).
    The ratio is pi / pi_sampler per token; KL is the k3 estimator to the reference.
    """
    mask = inputs.mask
    advantages = inputs.advantages.unsqueeze(1)  # [B, 1], broadcast over tokens
    log_ratio = inputs.logprobs - inputs.sampler_logprobs
    ratio = torch.exp(log_ratio)
    if loss_type == "reinforce":
        per_token = -advantages * inputs.logprobs
        clipped = torch.zeros_like(mask)
    else:
        high = epsilon_high if loss_type == "dapo" else epsilon
        unclipped_term = ratio * advantages
        clipped_term = torch.clamp(ratio, 1 - epsilon, 1 + high) * advantages
        per_token = -torch.minimum(unclipped_term, clipped_term)
        clipped = (clipped_term < unclipped_term).float()
    kl = torch.zeros_like(per_token)
    if beta > 0:
        if inputs.ref_logprobs is None:
            raise ValueError("beta > 0 needs ref_logprobs")
        delta = inputs.ref_logprobs - inputs.logprobs
        kl = torch.exp(delta) - delta - 1
        per_token = per_token + beta * kl

    if loss_type == "reinforce":
        loss = (per_token * mask).sum() / totals.trajectories
    elif loss_type == "grpo":
        row_means = (per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
        loss = row_means.sum() / totals.rows
    elif loss_type == "dr_grpo":
        loss = (per_token * mask).sum() / (totals.rows * totals.max_completion_length)
    elif loss_type == "dapo":
        loss = (per_token * mask).sum() / totals.tokens
    else:
        raise ValueError(f"unknown loss_type {loss_type!r}")

    tokens = mask.sum().clamp(min=1)
    log_ratio, clipped, kl = log_ratio.detach(), clipped.detach(), kl.detach()
    metrics = {
        "tokens": float(mask.sum()),
        "clip_fraction": float((clipped * mask).sum() / tokens),
        "kl": float((kl * mask).sum() / tokens),
        "sampler_logprob_diff": float((log_ratio.abs() * mask).sum() / tokens),
    }
    return loss, metrics
