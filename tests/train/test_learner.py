import pytest
import torch
from accelerate import Accelerator

from lexrl.config import GRPOConfig, LoraConfig
from lexrl.models import add_lora
from lexrl.train.advantages import Row
from lexrl.train.learner import Learner, fill_deepspeed_config, split_micro_batches
from tests.train.step_gradients import capture_step_gradients


def _rows(advantages, seed=0):
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for index, advantage in enumerate(advantages):
        prompt = torch.randint(
            3, 200, (int(torch.randint(5, 12, (1,), generator=generator)),), generator=generator
        )
        completion = torch.randint(
            3, 200, (int(torch.randint(2, 6, (1,), generator=generator)),), generator=generator
        )
        rows.append(
            Row(
                prompt.tolist(),
                completion.tolist(),
                [-2.0] * len(completion),
                advantage,
                1.0,
                index // 2,
                "planner",
            )
        )
    return rows


def _snapshot(model):
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def _learner(tiny_model, loss="grpo"):
    model, tokenizer = tiny_model
    policy = add_lora(model, LoraConfig(r=4, alpha=8), seed=0)
    config = GRPOConfig(loss=loss, learning_rate=1e-2, micro_batch_size=3)
    return Learner(
        policy,
        config,
        max_steps=5,
        accelerator=Accelerator(cpu=True),
        pad_id=tokenizer.pad_token_id,
    )


def test_zero_advantage_moves_no_weight(tiny_model):
    learner = _learner(tiny_model)
    before = _snapshot(learner.policy)
    learner.update(_rows([0.0] * 6))
    after = _snapshot(learner.policy)
    assert all(torch.equal(before[name], after[name]) for name in before)


@pytest.mark.parametrize("loss", ["reinforce", "grpo", "dr_grpo", "dapo"])
def test_update_moves_lora_only_never_the_base(tiny_model, loss):
    learner = _learner(tiny_model, loss)
    before = _snapshot(learner.policy)
    metrics = learner.update(_rows([1.0, 1.0, -1.0, -1.0, 0.5, -0.5]))
    after = _snapshot(learner.policy)
    moved = {name for name in before if not torch.equal(before[name], after[name])}
    assert moved, "a non-zero advantage must change the adapter"
    assert all("lora_" in name for name in moved), sorted(n for n in moved if "lora_" not in n)
    assert metrics["loss/grad_norm"] > 0


def test_deepspeed_auto_keys_are_filled_from_grpo():
    ds_config = {
        "gradient_clipping": "auto",
        "train_micro_batch_size_per_gpu": "auto",
        "zero_optimization": {"stage": 2},
    }
    fill_deepspeed_config(ds_config, GRPOConfig(max_grad_norm=0.5, micro_batch_size=4), 8)
    assert ds_config == {
        "gradient_clipping": 0.5,
        "train_micro_batch_size_per_gpu": 4,
        "gradient_accumulation_steps": 1,
        "train_batch_size": 32,
        "zero_optimization": {"stage": 2},
    }


@pytest.mark.parametrize(
    ("key", "value"), [("gradient_clipping", 2.0), ("gradient_accumulation_steps", 4)]
)
def test_deepspeed_value_that_disagrees_with_grpo_names_the_key(key, value):
    with pytest.raises(ValueError, match=f"{key} = {value}"):
        fill_deepspeed_config({key: value}, GRPOConfig(max_grad_norm=1.0), 2)


def _accumulated_gradients(tiny_model, rows, **grpo):
    """The adapter's gradients that one `Learner.update` over `rows` accumulates over its
    micro-batches and hands the optimizer, and the update's metrics.

    The gradients are read by a step pre-hook, before the optimizer uses them: AdamW's first
    step moves each weight by about the learning rate whatever the gradient's size or rounding
    (a gradient of 1e-9 of either sign becomes a full step), so the weights after the step are
    no measure of two equal updates; the gradients are. `max_grad_norm` is out of reach so that
    clipping leaves them as accumulated (clipping would also hide a wrong constant factor in the
    loss). The adapter's B matrices start at small random values, not at peft's zeros, so that
    every LoRA weight, A included, gets a gradient to compare.
    """
    model, tokenizer = tiny_model
    policy = add_lora(model, LoraConfig(r=4, alpha=8), seed=0)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, parameter in sorted(policy.named_parameters()):
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.02)
    config = GRPOConfig(loss="dapo", learning_rate=1e-2, max_grad_norm=1e9, **grpo)
    learner = Learner(policy, config, 5, Accelerator(cpu=True), tokenizer.pad_token_id)
    gradients = capture_step_gradients(learner)
    metrics = learner.update(rows)
    assert gradients.keys() == {n for n, p in learner.policy.named_parameters() if p.requires_grad}
    return gradients, metrics


def assert_same_gradients(actual, expected, rtol=1e-5):
    """`actual` equals `expected` up to float32 rounding: each element within `rtol` of itself
    plus `rtol` of the largest gradient element (a sum of terms cancelling to near zero keeps the
    rounding of its terms), and the whole gradient within `rtol` of its norm."""
    largest = max(float(g.abs().max()) for g in expected.values())
    assert largest > 0
    for name, value in expected.items():
        torch.testing.assert_close(
            actual[name],
            value,
            rtol=rtol,
            atol=rtol * largest,
            msg=lambda message, name=name: f"{name}: {message}",
        )
    difference = torch.cat([(actual[n] - g).flatten() for n, g in expected.items()]).norm()
    norm = torch.cat([g.flatten() for g in expected.values()]).norm()
    assert difference <= rtol * norm, (float(difference), float(norm))


UPDATE_METRICS = ("loss/policy", "loss/grad_norm", "loss/kl")


def assert_same_update(tiny_model_path, rows, expected, actual, keys, abs_tolerance=1e-12):
    """`Learner.update`s over `rows` of two fresh tiny models, one under the GRPO options
    `expected` and one under `actual`, hand the optimizer the same gradients and report the same
    `keys` metrics (within 1e-5 relative, `abs_tolerance` absolute)."""
    from lexrl.config import ModelConfig
    from lexrl.models import load_base

    reference, reference_metrics = _accumulated_gradients(
        load_base(ModelConfig(), path=tiny_model_path), rows, **expected
    )
    other, other_metrics = _accumulated_gradients(
        load_base(ModelConfig(), path=tiny_model_path), rows, **actual
    )
    assert reference_metrics["loss/grad_norm"] > 0
    for key in keys:
        assert other_metrics[key] == pytest.approx(
            reference_metrics[key], rel=1e-5, abs=abs_tolerance
        )
    assert_same_gradients(other, reference)


def test_token_budget_micro_batches_accumulate_the_same_gradient_as_row_micro_batches(
    tiny_model_path,
):
    rows = _rows([1.0, 1.0, -1.0, -1.0, 0.5, -0.5, 2.0, -2.0], seed=3)
    # Different cuts: rollout order three rows at a time, or sorted by length under 40 tokens.
    cuts = [[id(r) for r in b] for b in split_micro_batches(rows, 3)]
    assert cuts != [[id(r) for r in b] for b in split_micro_batches(rows, 3, 40)]
    assert_same_update(
        tiny_model_path,
        rows,
        {"micro_batch_size": 3},
        {"micro_batch_tokens": 40},
        ("loss/policy", "loss/grad_norm"),
    )


def test_token_budget_cuts_sorted_rows_under_the_budget():
    def row(prompt, completion, trajectory):
        return Row([5] * prompt, [6] * completion, [-1.0] * completion, 1.0, 1.0, trajectory, "r")

    rows = [row(10, 2, 0), row(3, 1, 1), row(30, 5, 2), row(4, 1, 3), row(9, 3, 4), row(50, 9, 5)]
    batches = split_micro_batches(rows, max_rows=2, max_tokens=30)
    # Sorted by length: 4 (3+1), 5 (4+1), 12 (10+2), 12 (9+3), 35, 59. Padded sizes: 2 x 5 = 10,
    # then 3 x 12 = 36 > 30 cuts; 2 x (10 + 3) = 26; 35 and 59 exceed the budget and go alone.
    assert [[len(r.prompt_ids) for r in b] for b in batches] == [[3, 4], [10, 9], [30], [50]]
    assert sorted(id(r) for b in batches for r in b) == sorted(id(r) for r in rows)
    assert [len(b) for b in split_micro_batches(rows, max_rows=4)] == [4, 2]
