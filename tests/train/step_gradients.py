"""The gradients a `Learner`'s optimizer is handed at its step, for tests that compare updates."""

import torch


def capture_step_gradients(learner) -> dict[str, torch.Tensor]:
    """A dict, filled at the learner's next optimizer step (a step pre-hook), of each trained
    parameter's gradient by name: read before the step, so AdamW's first-step rounding of tiny
    gradients does not enter the comparison."""
    names = {p: n for n, p in learner.policy.named_parameters() if p.requires_grad}
    gradients = {}

    def capture(optimizer, args, kwargs):
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                gradients[names[parameter]] = parameter.grad.detach().clone()

    learner.optimizer.optimizer.register_step_pre_hook(capture)
    return gradients
