"""The memory and time plan: shapes and parts by hand, the CLI's verdicts, and `lexrl train`
refusing a run its GPU cannot hold (device memory simulated)."""

import json
from pathlib import Path

import pytest

from lexrl.config import load_config
from lexrl.errors import PlanError
from lexrl.train.plan import (
    QWEN3_4B,
    GiB,
    ModelShape,
    RunSettings,
    TokenProfile,
    activation_bytes,
    largest_micro_batch,
    layer_activation_bytes,
    lora_state_bytes,
    update_memory,
)
from lexrl.train.plan_report import (
    profile_from_counts,
    profile_from_trajectories,
    repeated_prefix_tokens,
    step_tasks,
)
from lexrl.types import Trajectory, Turn

ROOT = Path(__file__).parents[2]
SMALL = ModelShape(layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10)


def test_qwen3_4b_shape_matches_the_release():
    # Qwen3-4B's model card: 4.0B parameters, 3.6B without the (tied) embeddings.
    assert QWEN3_4B.params() == pytest.approx(4.02e9, rel=0.005)
    assert QWEN3_4B.layers * QWEN3_4B.layer_params() == pytest.approx(3.6e9, rel=0.01)
    assert QWEN3_4B.kv_bytes_per_token() == 36 * 2 * 8 * 128 * 2


def test_lora_params_by_hand():
    # r x (in + out): q 8+8, k 8+4, v 8+4, o 8+8, gate 8+16, up 8+16, down 16+8 = 128 a layer.
    assert SMALL.lora_params(2, ["q_proj", "k_proj", "v_proj", "o_proj"]) == 2 * 2 * 56
    everything = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    assert SMALL.lora_params(2, everything) == 2 * 2 * 128
    # ZeRO-2 over 4 processes keeps the float32 weights whole and a quarter of grads and moments.
    assert lora_state_bytes(SMALL, 2, everything, 4) == 512 * 4 + 512 * 12 // 4


def test_activation_bytes_by_hand():
    # H = A = 8, KV = 4, I = 16, 2 heads. Norm inputs 2*4*8 = 64, q/k norm inputs 4*(8+4) = 48,
    # q, k, v (repeated) and the output 4*2*8 = 64, a float32 lse a head 4*2 = 8, the MLP's
    # gate, up and SiLU 3*2*16 = 96: 280; the float32 LoRA inputs 5*4*8 + 4*8 + 4*16 = 256.
    assert layer_activation_bytes(SMALL, 2, 3) == 2 * 3 * 536
    assert layer_activation_bytes(SMALL, 2, 3, ("q_proj", "down_proj")) == 2 * 3 * (280 + 32 + 64)
    assert activation_bytes(SMALL, 2, 3, checkpointing=False) == 2 * 2 * 3 * 536
    # Checkpointing keeps each layer's bf16 input; the backward rebuilds one layer at a time.
    assert activation_bytes(SMALL, 2, 3, checkpointing=True) == 2 * 6 * 2 * 8


def test_update_peak_holds_the_log_prob_chunks_or_a_layer_backward_not_both():
    off = update_memory(SMALL, 2, 3, 1, lora_rank=2, checkpointing=False, chunk_tokens=4)
    on = update_memory(SMALL, 2, 3, 1, lora_rank=2, checkpointing=True, attention="cpu")
    lora = 2 * 2 * 128 * 4
    logprobs = 2 * 3 * 8 * 2 + 2 * 10 * 12  # hidden states, then a chunk of 2 positions
    layer = 2 * 3 * 536
    assert off == {
        "activations": 2 * layer,
        "logprobs": logprobs,
        "recomputed_layer": 0,
        "attention_backward": 0,
        "lora_gradients": lora,
        "total": 2 * layer + logprobs + lora,
    }
    scores = 2 * 2 * 3 * 3 * 2  # the CPU attention backward's [rows, heads, seq, seq] bf16
    assert on["recomputed_layer"] == layer and on["attention_backward"] == scores
    assert on["total"] == 2 * 6 * 2 * 8 + max(logprobs, layer + scores) + lora


def _settings(**changes):
    values = dict(
        dtype_bytes=2,
        lora_rank=16,
        lora_targets=["q_proj"],
        micro_batch_size=4,
        micro_batch_tokens=None,
        gradient_checkpointing=False,
        logprob_chunk_tokens=512,
        max_new_tokens=256,
        vllm_max_model_len=4096,
        max_concurrent_episodes=256,
        max_batch_size=64,
        importance_sampling="none",
        beta=0.0,
    )
    return RunSettings(**{**values, **changes})


def test_largest_micro_batch_by_rows_or_by_token_budget():
    # The longest prompt (1,000) with the longest completion seen or the cap, whichever is more.
    short = TokenProfile([(1000, 100), (400, 30)], 1, "test")
    assert largest_micro_batch(short, _settings(), rows_available=10) == (4, 1256, 256)
    profile = TokenProfile([(1000, 100), (400, 300)], 1, "test")
    assert largest_micro_batch(profile, _settings(), rows_available=10) == (4, 1300, 300)
    assert largest_micro_batch(profile, _settings(), rows_available=2) == (2, 1300, 300)
    tokens = _settings(micro_batch_tokens=4000)
    assert largest_micro_batch(profile, tokens, rows_available=10) == (3, 1300, 300)


def test_step_tasks_keeps_g_when_it_splits():
    assert step_tasks(2, 8, 8) == 2  # 4 processes a task, 2 trajectories each
    assert step_tasks(2, 8, 4) == 2
    assert step_tasks(2, 8, 6) == 3  # 3 tasks, each over 2 processes
    assert step_tasks(2, 8, 3) == 3  # a whole task a process


def _turn(prompt, completion, trainable=True):
    return Turn("r", prompt, completion, [0.0] * len(completion), "", 0, trainable)


def test_profile_from_trajectories_counts_trainable_turns_and_repeated_prefixes(tmp_path):
    first = _turn([1, 2, 3], [4, 5])
    extends = _turn([1, 2, 3, 4, 5, 6], [7])  # the first turn's prompt + completion, then 6
    fresh = _turn([9, 9], [8])
    judge = _turn([1, 2, 3, 4, 5], [0, 0, 0], trainable=False)
    lines = [
        Trajectory("a", turns=[first, extends, judge]).to_json(),
        Trajectory("b", turns=[fresh]).to_json(),
    ]
    path = tmp_path / "rollouts.jsonl"
    path.write_text("\n".join(lines) + "\n")
    profile = profile_from_trajectories(path)
    assert profile.turns == [(3, 2), (6, 1), (2, 1)]
    assert profile.trajectories == 2
    assert profile.repeated_prefix_tokens == 5
    assert repeated_prefix_tokens([([1], [2]), ([1, 2], [3]), ([1, 2, 3], [4])]) == 2 + 3


def test_a_bad_trajectory_line_names_the_file_and_line(tmp_path):
    path = tmp_path / "rollouts.jsonl"
    path.write_text(Trajectory("a", turns=[_turn([1], [2])]).to_json() + "\n{not json\n")
    with pytest.raises(PlanError, match=r"rollouts.jsonl, line 2"):
        profile_from_trajectories(path)
    with pytest.raises(PlanError, match="TURNSxPROMPT"):
        profile_from_counts("4 turns")
    assert profile_from_counts("4x1500+200").tokens == 4 * 1700


@pytest.fixture()
def plan(lexrl_in_process, monkeypatch):
    """`lexrl plan ARGS` from the repository root: exit status, stdout, stderr."""
    monkeypatch.chdir(ROOT)

    def run(*args: str) -> tuple[int, str, str]:
        out = lexrl_in_process("plan", *args)
        return out.returncode, out.stdout, out.stderr

    return run


def test_the_8x4090_layouts_of_the_paper_config_fit(plan):
    code, out, err = plan(
        "configs/stard_mas_grpo.yaml", "--gpus", "8", "--gpu-memory", "24", "--json"
    )
    assert code == 0, err
    plans = {p["layout"]: p for p in json.loads(out.strip().splitlines()[-1])}
    assert set(plans) == {"colocate", "zero2", "server"}
    assert all(p["fits"] for p in plans.values())
    for name in ("colocate: fits", "zero2: fits", "server: fits"):
        assert name in out
    # The served retrieval models are not in any trainer.
    assert all(p["trainer_gib"]["retrieval models"] == 0 for p in plans.values())


def test_without_checkpointing_the_paper_config_does_not_fit_and_says_what_to_change(plan):
    code, out, err = plan(
        "configs/stard_mas_grpo.yaml",
        "--gpus",
        "8",
        "--gpu-memory",
        "24",
        "--grpo.gradient_checkpointing",
        "false",
        "--grpo.micro_batch_tokens",
        "null",
    )
    assert code == 8  # a plan error, not exit 1 (a lexrl bug)
    assert "DOES NOT FIT" in out and "grpo.gradient_checkpointing: true" in out
    assert "does not fit (the table above says what to change)" in err
    assert err.startswith("plan error: ") and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--gpu-memory", "1e9", "--gpu-memory 1e+09: give the GPU's memory in GiB, from 1 to 1024"),
        ("--gpu-memory", "0.5", "--gpu-memory 0.5: give the GPU's memory in GiB, from 1 to 1024"),
        ("--gpus", "1000", "--gpus 1000: give the GPUs of one machine, from 1 to 72"),
        ("--gpus", "0", "--gpus 0: give the GPUs of one machine, from 1 to 72"),
    ],
)
def test_a_gpu_no_machine_has_is_a_plan_error_not_a_plan(plan, flag, value, message):
    code, out, err = plan("configs/stard_mas_grpo.yaml", flag, value)
    assert (code, out) == (8, "")
    assert err.startswith(f"plan error: {message}") and len(err.strip().splitlines()) == 1


def test_lexrl_train_refuses_a_run_its_gpu_cannot_hold(monkeypatch, capsys, tmp_path):
    from lexrl import cli
    from lexrl.train import plan_report

    monkeypatch.setattr(plan_report, "device_memory_bytes", lambda: 24 * GiB)
    # A busy machine (a CI run's other tests) would print the busy-cores warning first.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    config = load_config(str(ROOT / "configs" / "stard_mas_grpo.yaml"), [])
    assert config.grpo.gradient_checkpointing
    argv = [
        "train",
        str(ROOT / "configs" / "stard_mas_grpo.yaml"),
        "--grpo.gradient_checkpointing",
        "false",
        "--grpo.micro_batch_tokens",
        "null",
        "--run.output_dir",
        str(tmp_path / "run"),
    ]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 8
    message = capsys.readouterr().err.strip()
    assert message.startswith("plan error: this run cannot fit its GPU")
    assert "activations" in message and "grpo.gradient_checkpointing: true" in message
    assert len(message.splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_the_one_h100_config_fits_one_h100(plan):
    code, out, err = plan("configs/stard_mas_grpo_h100.yaml", "--gpu", "h100", "--json")
    assert code == 0, err
    (plan,) = json.loads(out.strip().splitlines()[-1])
    assert plan["fits"] and plan["trainer_gib"]["peak"] < 0.9 * 80
    assert plan["trainer_gib"]["retrieval models"] > 14  # two 4B models in the process


@pytest.mark.slow
def test_token_counts_from_a_scripted_rollout_with_the_models_tokenizer(plan, tmp_path):
    code, out, err = plan(
        "configs/demo_cpu.yaml", "--episodes", "4", "--model.cache_dir", str(tmp_path)
    )
    assert code == 0, err
    assert "Tokens: 4 scripted episodes of statute, the model's tokenizer" in out
    # The statute env renders every agent's prompt afresh: no turn extends an earlier one.
    assert "extending an earlier turn of their trajectory" in out
    assert "once): 0% of trained tokens" in out
    # One scripted episode a task: no group, so the shared share is not known.
    assert "Shared prefixes: unknown share of trained tokens" in out
