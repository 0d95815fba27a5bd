"""Shared-prefix updates: the grouping of rows by prompt prefix, and the packed forward's
log-probs, gradients and full updates against the repeated form's on the tiny model (float32)."""

import copy

import pytest
import torch
import torch.nn.functional as F
from accelerate import Accelerator

from lexrl.config import GRPOConfig, LoraConfig
from lexrl.models import add_lora
from lexrl.train import prefix_attention
from lexrl.train.advantages import Row
from lexrl.train.learner import Learner, completion_logprobs, pack_rows
from lexrl.train.prefix_attention import PackLayout, grouped_attention
from lexrl.train.shared_prefix import (
    PrefixGroup,
    group_by_prefix,
    pack_shared,
    split_shared_micro_batches,
)
from tests.train.step_gradients import capture_step_gradients
from tests.train.test_learner import (
    UPDATE_METRICS,
    assert_same_gradients,
    assert_same_update,
)
from tests.train.test_logprobs import _policy


def _tokens(generator, length):
    return torch.randint(3, 200, (length,), generator=generator).tolist()


def _row(prompt, completion_length, generator, advantage, trajectory):
    completion = _tokens(generator, completion_length)
    return Row(
        prompt, completion, [-2.0] * completion_length, advantage, 0.9, trajectory, "planner"
    )


def _step_rows(seed=0):
    """A step's rows as the envs make them: two tasks of three trajectories. Each trajectory's
    first call is the task's whole prompt (system text + task text); a second call extends it with
    the first reply and a tool result. Then a row whose prompt is shorter than any sharing
    threshold. The two tasks share only their 20-token system text."""
    generator = torch.Generator().manual_seed(seed)
    system = _tokens(generator, 20)
    rows = []
    for task in range(2):
        prompt = system + _tokens(generator, 30 + 6 * task)
        for k in range(3):
            trajectory = 3 * task + k
            first = _row(prompt, 4 + k, generator, (-1.0) ** k * (1 + task), trajectory)
            rows.append(first)
            follow_up = prompt + first.completion_ids + _tokens(generator, 3 + k)
            rows.append(_row(follow_up, 3 + task, generator, first.advantage, trajectory))
    rows.append(_row(_tokens(generator, 9), 5, generator, 0.5, 6))
    return rows


def _hand_row(prompt, completion=(7, 8)):
    return Row(list(prompt), list(completion), [-1.0] * len(completion), 1.0, 1.0, 0, "r")


def test_rows_sharing_a_first_call_prompt_are_one_group():
    shared = list(range(10, 50))  # 40 tokens
    rows = [_hand_row(shared), _hand_row(shared), _hand_row(shared, (9,))]
    groups, saved = group_by_prefix(rows, min_tokens=32)
    assert groups == [PrefixGroup((0, 1, 2), 40)]
    # Two of the three 40-token prompts are copies: 80 of 40 x 3 + 2 + 2 + 1 tokens.
    assert saved == pytest.approx(80 / 125)


def test_rows_with_different_prompts_are_groups_of_their_own():
    rows = [_hand_row(range(10, 50)), _hand_row(range(11, 51)), _hand_row(range(10, 20))]
    groups, saved = group_by_prefix(rows, min_tokens=32)
    assert groups == [PrefixGroup((0,), 40), PrefixGroup((1,), 40), PrefixGroup((2,), 10)]
    assert saved == 0


def test_a_prompt_that_is_a_prefix_of_another_is_the_shared_prefix():
    short, long = list(range(10, 50)), list(range(10, 70))
    rows = [_hand_row(long), _hand_row(short), _hand_row(long[:45] + [3, 4])]
    groups, saved = group_by_prefix(rows, min_tokens=32)
    assert groups == [PrefixGroup((0, 1, 2), 40)]
    assert saved == pytest.approx(80 / (60 + 40 + 47 + 6))


def test_a_short_common_prefix_is_not_shared():
    rows = [_hand_row(list(range(10, 41)) + [3]), _hand_row(list(range(10, 41)) + [4])]
    groups, _ = group_by_prefix(rows, min_tokens=32)
    assert [g.rows for g in groups] == [(0,), (1,)]
    assert [g.rows for g in group_by_prefix(rows, min_tokens=31)[0]] == [(0, 1)]


def test_tasks_keep_their_long_task_prompts_rather_than_share_the_system_prompt():
    rows = _step_rows()
    groups, saved = group_by_prefix(rows)
    # Task 0's six rows share its 50-token prompt, task 1's its 56 tokens; sharing only the
    # 20-token system text across both would save less.
    assert groups == [
        PrefixGroup((0, 1, 2, 3, 4, 5), 50),
        PrefixGroup((6, 7, 8, 9, 10, 11), 56),
        PrefixGroup((12,), 9),
    ]
    trained = sum(len(r.prompt_ids) + len(r.completion_ids) for r in rows)
    assert saved == pytest.approx((5 * 50 + 5 * 56) / trained)


def _dense_reference(query, key, value, segments):
    """What each packed position's attention must give: a masked softmax over the prefix and
    its own segment up to itself (the repeated form's keys), computed densely; padding: 0."""
    repeat = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(repeat, 1), value.repeat_interleave(repeat, 1)
    q_seg, k_seg = segments.unsqueeze(2), segments.unsqueeze(1)
    width = segments.shape[1]
    causal = torch.ones(width, width, dtype=torch.bool).tril()
    sees = causal & ((k_seg == q_seg) | ((k_seg == 0) & (q_seg > 0))) & (q_seg >= 0)
    sees = sees | torch.eye(width, dtype=torch.bool)  # padding: any key, zeroed below
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=sees.unsqueeze(1))
    return out.transpose(1, 2) * (segments >= 0).view(*segments.shape, 1, 1)


def test_grouped_attention_scores_no_suffix_against_another():
    torch.manual_seed(0)
    # Two packs: a 3-token prefix with suffixes of 2, 4 and 1 tokens, and a 5-token prefix with
    # one suffix of 3 tokens, right-padded to 12.
    segments = torch.tensor(
        [
            [0, 0, 0, 1, 1, 2, 2, 2, 2, 3, -1, -1],
            [0, 0, 0, 0, 0, 1, 1, 1, -1, -1, -1, -1],
        ]
    )
    layout = PackLayout.from_segments(segments)
    assert layout.suffix_pack.tolist() == [0, 0, 0, 1]
    assert layout.output_index.sort().values.tolist() == [
        s * 12 + i for s in range(2) for i in range(12) if segments[s, i] >= 0
    ]
    query = torch.randn(2, 4, 12, 8, dtype=torch.float64)
    key, value = torch.randn(2, 2, 12, 8, dtype=torch.float64), torch.randn(2, 2, 12, 8).double()
    actual = grouped_attention(query, key, value, layout, scaling=None)
    torch.testing.assert_close(actual, _dense_reference(query, key, value, segments))


def test_an_attention_without_a_mask_function_is_refused_by_name(tiny_model):
    config = copy.deepcopy(tiny_model[0].config)
    config._attn_implementation = "paged|eager"
    with pytest.raises(ValueError, match="paged\\|eager"):
        prefix_attention.enable(config)


def test_micro_batches_keep_a_group_together_and_respect_the_packed_token_budget():
    rows = _step_rows()
    by_rows = split_shared_micro_batches(rows, max_rows=6)
    # Group by group, each group's rows shortest first.
    assert [[rows.index(r) for r in b] for b in by_rows] == [
        [0, 2, 4, 1, 3, 5],
        [6, 8, 10, 7, 9, 11],
        [12],
    ]
    by_tokens = split_shared_micro_batches(rows, max_rows=6, max_tokens=90)
    assert len(by_tokens) > 3
    assert sorted(rows.index(r) for b in by_tokens for r in b) == list(range(len(rows)))
    for batch in by_tokens:
        assert pack_shared(batch, pad_id=0)["input_ids"].numel() <= 90 or len(batch) == 1


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_shared_logprobs_equal_the_repeated_rows(tiny_model, attention):
    policy, pad_id = _policy(tiny_model)
    policy.set_attn_implementation(attention)
    rows = _step_rows()
    shared = pack_shared(rows, pad_id)
    # 3 packs of at most 56 + 6 x 11 tokens instead of 13 rows of 71.
    assert shared["input_ids"].shape[0] == 3
    assert shared["input_ids"].numel() < pack_rows(rows, pad_id)["input_ids"].numel() / 2
    with torch.no_grad():
        expected = completion_logprobs(policy, pack_rows(rows, pad_id), chunk_tokens=7)
        actual = completion_logprobs(policy, shared, chunk_tokens=7)
        # The wrapping implementation hands every other forward to the model's own attention.
        assert policy.config._attn_implementation == prefix_attention.PREFIX + attention
        again = completion_logprobs(policy, pack_rows(rows, pad_id), chunk_tokens=7)
    torch.testing.assert_close(again, expected, rtol=0, atol=0)
    mask = shared["completion_mask"].bool()
    assert mask.equal(pack_rows(rows, pad_id)["completion_mask"].bool())
    torch.testing.assert_close(actual[mask], expected[mask], rtol=0, atol=1e-5)


def _gradients(policy, batch):
    policy.zero_grad(set_to_none=True)
    logprobs = completion_logprobs(policy, batch, chunk_tokens=5)
    loss = -(logprobs * batch["completion_mask"] * batch["advantages"].view(-1, 1)).sum()
    loss.backward()
    return loss.detach(), {
        n: p.grad.clone() for n, p in policy.named_parameters() if p.grad is not None
    }


def assert_gradients_equal_the_padded_rows(tiny_model, pack, checkpointing):
    """A step's rows laid out by `pack(rows, pad_id)` give the loss and LoRA gradients that
    `pack_rows` gives them, with or without gradient checkpointing."""
    policy, pad_id = _policy(tiny_model)
    policy.train()
    if checkpointing:
        policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    rows = _step_rows(seed=2)
    expected_loss, expected = _gradients(policy, pack_rows(rows, pad_id))
    loss, actual = _gradients(policy, pack(rows, pad_id))
    torch.testing.assert_close(loss, expected_loss, rtol=1e-5, atol=0)
    assert actual.keys() == expected.keys() and any("lora_A" in n for n in actual)
    assert_same_gradients(actual, expected)


@pytest.mark.parametrize("checkpointing", [False, True])
def test_shared_gradients_equal_the_repeated_rows(tiny_model, checkpointing):
    assert_gradients_equal_the_padded_rows(tiny_model, pack_shared, checkpointing)


@pytest.mark.parametrize(
    "grpo",
    [
        {"micro_batch_size": 2},
        {"micro_batch_size": 2, "gradient_checkpointing": True},
        {"micro_batch_tokens": 150, "beta": 0.1},
    ],
    ids=["micro_batch_2", "checkpointing", "token_budget_and_reference"],
)
def test_update_accumulates_the_repeated_forms_gradients(tiny_model_path, grpo):
    shared = {**grpo, "shared_prefix": True}
    assert_same_update(tiny_model_path, _step_rows(seed=4), grpo, shared, UPDATE_METRICS, 1e-9)


def _update(tiny_model_path, rows, **grpo):
    """One `Learner.update` of a fresh LoRA (peft's init) over `rows`: its metrics, the gradients
    the optimizer got (read by a step pre-hook) and the adapter after the step."""
    from lexrl.config import ModelConfig
    from lexrl.models import load_base

    model, tokenizer = load_base(ModelConfig(), path=tiny_model_path)
    policy = add_lora(model, LoraConfig(r=4, alpha=8), seed=0)
    config = GRPOConfig(loss="grpo", learning_rate=1e-2, micro_batch_size=3, **grpo)
    learner = Learner(policy, config, 5, Accelerator(cpu=True), tokenizer.pad_token_id)
    gradients = capture_step_gradients(learner)
    metrics = learner.update(rows)
    adapter = {n: p.detach().clone() for n, p in learner.policy.named_parameters() if "lora_" in n}
    return metrics, gradients, adapter


def test_full_update_gives_the_same_loss_and_adapter(tiny_model_path):
    rows = _step_rows(seed=5)
    repeated_metrics, repeated_gradients, repeated = _update(tiny_model_path, rows)
    shared_metrics, shared_gradients, shared = _update(tiny_model_path, rows, shared_prefix=True)
    for key in ("loss/policy", "loss/grad_norm", "loss/clip_fraction"):
        assert shared_metrics[key] == pytest.approx(repeated_metrics[key], rel=1e-5)
    assert_same_gradients(shared_gradients, repeated_gradients)
    # AdamW's first step moves a weight by lr x g / (|g| + eps), eps = 1e-8: where |g| is far
    # above eps the step barely depends on g's rounding, and the adapters agree to float32; an
    # element whose gradient is near eps turns that rounding into a visible share of a step
    # (test_learner's reason to compare gradients), so there only the step's bound holds.
    for name, value in repeated.items():
        steady = repeated_gradients[name].abs() > 1e-6
        torch.testing.assert_close(shared[name][steady], value[steady], rtol=1e-5, atol=1e-7)
        assert (shared[name] - value).abs().max() <= 2 * 1e-2, name
