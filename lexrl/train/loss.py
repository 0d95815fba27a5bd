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
    old_logprobs: torch.Tensor | None = None
    """[B, T] the trainer's log-probs before this update (no grad): the PPO ratio's denominator
    when the sampler is a separate engine; None uses `sampler_logprobs`."""
    is_weights: torch.Tensor | None = None
    """[B, 1] or [B, T] importance weights pi_old / pi_sampler, truncated or masked
    (`importance_weights`), multiplying every token's loss; None means 1."""


@dataclass
class Totals:
    """Counts over the whole optimizer step (all micro-batches, all processes)."""

    trajectories: int
    rows: int
    tokens: int
    max_completion_length: int


IS_MODES = ("none", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
MISMATCH_METRICS = (
    "mismatch/k3_kl",
    "mismatch/abs_logprob_diff",
    "mismatch/is_limited_fraction",
    "mismatch/is_weight_mean",
)


def importance_weights(
    old_logprobs: torch.Tensor,
    sampler_logprobs: torch.Tensor,
    mask: torch.Tensor,
    mode: str = "sequence_mask",
    cap: float = 3.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Truncated importance sampling for the sampler/trainer mismatch (as TRL's GRPOTrainer).

    old_logprobs, sampler_logprobs, mask: [B, T]. The ratio is pi_old / pi_sampler per token
    (`token_*`, weights [B, T]) or its product over a row's tokens (`sequence_*`, [B, 1]; a row
    is one LLM call). `*_truncate` clips the ratio at `cap`; `*_mask` zeroes rows or tokens whose
    ratio exceeds `cap`. Returns the detached weights and mismatch metrics: the k3 estimate of
    KL(sampler || trainer) per token, the mean |log-prob difference|, and the fraction of weights
    that were masked or clipped.
    """
    diff = ((old_logprobs - sampler_logprobs) * mask).detach()
    tokens = mask.sum().clamp(min=1)
    k3 = (torch.exp(diff) - diff - 1) * mask
    metrics = {
        "mismatch/k3_kl": float(k3.sum() / tokens),
        "mismatch/abs_logprob_diff": float(diff.abs().sum() / tokens),
    }
    if mode == "none":
        return torch.ones_like(diff[:, :1]), {**metrics, "mismatch/is_limited_fraction": 0.0}
    if mode.startswith("sequence"):
        ratio = torch.exp(diff.sum(dim=1, keepdim=True))
        valid = (mask.sum(dim=1, keepdim=True) > 0).float()
    else:
        ratio = torch.exp(diff)
        valid = mask
    if mode.endswith("truncate"):
        limited = (ratio > cap).float()
        weights = ratio.clamp(max=cap)
    elif mode.endswith("mask"):
        limited = (ratio > cap).float()
        weights = ratio * (1 - limited)
    else:
        raise ValueError(f"unknown importance sampling mode {mode!r}; one of {IS_MODES}")
    metrics["mismatch/is_limited_fraction"] = float(
        (limited * valid).sum() / valid.sum().clamp(min=1)
    )
    metrics["mismatch/is_weight_mean"] = float((weights * valid).sum() / valid.sum().clamp(min=1))
    return weights, metrics


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
    The ratio is pi / pi_old per token (pi_old = the sampler's log-probs unless `old_logprobs` is
    given); `is_weights` multiply every token's term; KL is the k3 estimator to the reference.
    """
    mask = inputs.mask
    advantages = inputs.advantages.unsqueeze(1)  # [B, 1], broadcast over tokens
    old = inputs.old_logprobs if inputs.old_logprobs is not None else inputs.sampler_logprobs
    log_ratio = inputs.logprobs - old
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
    if inputs.is_weights is not None:
        per_token = per_token * inputs.is_weights
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
