"""The plan's step model on hand-made profiles: rollout overlap (max, not sum), the shared-prefix
share of a hand-made trajectories file, the deduplicated update, the colocated engine's costs and
the reranker's shape."""

import dataclasses
import types

import pytest

from lexrl.errors import PlanError
from lexrl.train.plan import (
    KNOWN_SHAPES,
    PREFIX_GROUPER_ACTIVATIONS,
    PREFIX_GROUPER_THROUGHPUT,
    QWEN3_4B,
    GiB,
    Layout,
    ModelShape,
    RunSettings,
    TokenProfile,
    assumed_shared_prefix,
    common_prefix_length,
    gpu_for,
    group_shared_tokens,
    largest_shared_micro_batch,
    step_seconds,
    update_flops,
    update_memory,
    update_seconds,
)
from lexrl.train.plan_report import (
    ENGINE_CUDA_CONTEXT_BYTES,
    plan_layout,
    profile_from_counts,
    profile_from_trajectories,
    render,
    run_settings,
    shared_prefix_line,
    trainer_parts,
)
from lexrl.types import Trajectory, Turn

SMALL = ModelShape(layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10)


def _settings(**changes):
    settings = RunSettings(
        dtype_bytes=2,
        lora_rank=16,
        lora_targets=["q_proj", "k_proj", "v_proj", "o_proj"],
        micro_batch_size=4,
        micro_batch_tokens=None,
        gradient_checkpointing=True,
        logprob_chunk_tokens=512,
        max_new_tokens=200,
        vllm_max_model_len=4096,
        max_concurrent_episodes=256,
        max_batch_size=64,
        importance_sampling="sequence_mask",
        beta=0.0,
    )
    return dataclasses.replace(settings, **changes)


def _turn(prompt, completion, role="planner", trainable=True):
    return Turn(role, prompt, completion, [0.0] * len(completion), "", 0, trainable)


# --- rollout overlap -------------------------------------------------------------------------


def test_overlap_costs_the_longer_phase_not_both():
    assert step_seconds(10.0, 4.0, 0.5, overlap=False)[0] == pytest.approx(14.5)
    assert step_seconds(10.0, 4.0, 0.5, overlap=True)[0] == pytest.approx(10.5)
    assert step_seconds(3.0, 4.0, 0.5, overlap=True)[0] == pytest.approx(4.5)
    assert "max(rollout, update)" in step_seconds(1.0, 1.0, 0.0, overlap=True)[1]


def test_overlap_applies_to_the_server_layout_only():
    profile = profile_from_counts("4x1500+200")
    gpu = gpu_for(24)
    server = Layout("server", 8, 4, "vllm-server", 2, trajectories_per_step=16)
    colocate = Layout("colocate", 6, 6, "vllm-engine", trajectories_per_step=24)
    for layout in (server, colocate):
        plain = plan_layout(QWEN3_4B, profile, _settings(), layout, gpu, [])
        both = plan_layout(QWEN3_4B, profile, _settings(overlap=True), layout, gpu, [])
        s = plain.seconds
        rest = s["sleep and wake"] + s["adapter sync"]
        assert s["step"] == pytest.approx(s["rollout"] + s["update"] + rest)
        expected = (
            max(s["rollout"], s["update"]) if layout is server else s["rollout"] + s["update"]
        )
        assert both.seconds["step"] == pytest.approx(expected + rest)
    assert any("needs the server layout" in note for note in both.notes)
    assert plain.seconds["adapter sync"] > 0 and plain.seconds["sleep and wake"] > 0


# --- the shared-prefix share of trajectories ------------------------------------------------


def _write(tmp_path, trajectories):
    path = tmp_path / "rollouts.jsonl"
    path.write_text("".join(t.to_json() + "\n" for t in trajectories))
    return path


def test_shared_prefix_share_of_two_groups_by_hand(tmp_path):
    # Task a, three trajectories: the first call's prompt is the same (4 tokens shared by 3 rows:
    # 2 x 4 saved); the second call (a rewriter) shares [1, 2, 7] in two of them and [1, 2] with
    # the third (2 x 2 saved). A fourth trajectory's calls are of other roles: groups of their
    # own. Task b, two trajectories: first calls share [5, 6] (1 x 2 saved); a
    # judge turn is not trained and not counted.
    a = [1, 2, 3, 4]
    trajectories = [
        Trajectory("a", [_turn(a, [9]), _turn([1, 2, 7, 8], [9], "rewriter")]),
        Trajectory("a", [_turn(a, [9, 9]), _turn([1, 2, 7, 0], [9], "rewriter")]),
        Trajectory("a", [_turn(a, [9]), _turn([1, 2, 5], [9], "rewriter")]),
        Trajectory("a", [_turn([3, 3], [9], "analyst"), _turn([1, 2, 7, 8], [9], "planner")]),
        Trajectory("b", [_turn([5, 6, 1], [9]), _turn([5, 6, 7, 7], [9], trainable=False)]),
        Trajectory("b", [_turn([5, 6, 2, 2], [9])]),
    ]
    profile = profile_from_trajectories(_write(tmp_path, trajectories), ["statute"])
    trained = sum(p + c for p, c in profile.turns)
    assert profile.shared_prefix_tokens == 2 * 4 + 2 * 2 + 1 * 2
    assert profile.shared_prefix_share == pytest.approx(14 / trained)
    assert profile.shared_prefix_by_env == {"statute": pytest.approx(14 / trained)}
    # A row's common prefix over its prompt, summed over grouped rows, over all prompts.
    prompts = sum(p for p, _ in profile.turns)
    assert profile.shared_row_share == pytest.approx((3 * 4 + 3 * 2 + 2 * 2) / prompts)
    assert "measured" in shared_prefix_line(profile)
    assert group_shared_tokens([[1, 2, 3], [1, 2, 4], [1, 5]]) == 2 * 1
    assert common_prefix_length([[1, 2], [1, 2, 3]]) == 2 and group_shared_tokens([[1]]) == 0


def test_shared_prefix_share_per_env_of_a_mixture_and_unknown_without_ids(tmp_path):
    trajectories = [
        Trajectory("statute:q1", [_turn([1, 2, 3], [9])]),
        Trajectory("statute:q1", [_turn([1, 2, 4], [9])]),
        Trajectory("lexam:x", [_turn([], [9])]),  # a policy that recorded no token ids
        Trajectory("lexam:x", [_turn([], [9])]),
    ]
    profile = profile_from_trajectories(_write(tmp_path, trajectories), ["statute", "lexam"])
    assert profile.shared_prefix_by_env == {"lexam": None, "statute": pytest.approx(2 / 8)}
    assert profile.shared_prefix_tokens is None and profile.shared_prefix_share is None
    line = shared_prefix_line(profile)
    assert line.startswith("Shared prefixes: unknown") and "lexam unknown" in line
    assert "statute 25%" in line


def test_assumed_shared_prefix_of_given_counts():
    # K = 8, 4 calls of 1,500 prompt tokens, later calls half shared: a row shares
    # (1 + 3 x 0.5) / 4 = 62.5% of its prompt; a group of 8 saves 7 of 8 rows' share.
    shared, row_share = assumed_shared_prefix(4, 1500, 8, 0.5)
    assert row_share == pytest.approx(0.625)
    assert shared == pytest.approx(7 / 8 * 4 * 1500 * 0.625)
    profile = profile_from_counts("4x1500+200", generations=8, shared_fraction=0.5)
    assert profile.shared_prefix_share == pytest.approx(shared / 6800)
    assert "--shared-prefix 0.5" in shared_prefix_line(profile)
    assert profile_from_counts("2x100+10", 4, 0.0).shared_prefix_tokens == pytest.approx(
        3 / 4 * 2 * 100 * 0.5
    )
    with pytest.raises(PlanError, match="fraction from 0 to 1"):
        profile_from_counts("4x1500+200", 8, 1.5)


# --- the deduplicated update ----------------------------------------------------------------


def test_shared_prefix_update_trains_the_deduplicated_tokens():
    settings = _settings(importance_sampling="none", gradient_checkpointing=False)
    full = update_flops(SMALL, 100, 20, settings)
    shared = update_flops(SMALL, 100, 20, settings, shared=60)
    head = 20 * 2 * SMALL.vocab * SMALL.hidden * 3  # the completion's vocabulary projection
    assert (shared - head) / (full - head) == pytest.approx(60 / 120)
    profile = TokenProfile([(100, 20)] * 4, 1, "hand", shared_prefix_tokens=150.0)
    layout = Layout("x", 1, 1, "hf", trajectories_per_step=1)
    gpu = gpu_for(24)
    plain = update_seconds(SMALL, profile, settings, layout, gpu)
    deduplicated = update_seconds(
        SMALL, profile, dataclasses.replace(settings, shared_prefix=True), layout, gpu
    )
    # 150 of 400 prompt tokens are shared: each turn's 100 prompt tokens count 62.5, encoded at
    # the grouped attention's measured share of the repeated form's rate.
    per_turn = update_flops(SMALL, 100, 20, settings, shared=37.5)
    assert deduplicated / plain == pytest.approx(per_turn / full / PREFIX_GROUPER_THROUGHPUT)


def test_the_grouped_attention_keeps_more_a_position_in_every_layer():
    repeated = update_memory(SMALL, 3, 100, 20, 2, checkpointing=False, shared_tokens=120)
    grouped = update_memory(
        SMALL, 3, 100, 20, 2, checkpointing=False, shared_tokens=120, grouped_attention=True
    )
    assert grouped["activations"] / repeated["activations"] == pytest.approx(
        PREFIX_GROUPER_ACTIVATIONS, rel=1e-3
    )
    assert grouped["logprobs"] == repeated["logprobs"]
    # With checkpointing the layers keep their inputs only; the recomputed layer is grouped.
    kept = update_memory(SMALL, 3, 100, 20, 2, checkpointing=True, shared_tokens=120)
    grouped_kept = update_memory(
        SMALL, 3, 100, 20, 2, checkpointing=True, shared_tokens=120, grouped_attention=True
    )
    assert grouped_kept["activations"] == kept["activations"]
    assert grouped_kept["recomputed_layer"] / kept["recomputed_layer"] == pytest.approx(
        PREFIX_GROUPER_ACTIVATIONS, rel=1e-3
    )


def test_the_update_runs_at_each_gpus_measured_efficiency():
    # The H100 and the H200 have the same bf16 peak; the H100 measured a lower share of it.
    settings = _settings(importance_sampling="none")
    profile = TokenProfile([(100, 20)] * 4, 1, "hand")
    layout = Layout("x", 1, 1, "hf", trajectories_per_step=1)
    h100, h200 = gpu_for(None, "h100"), gpu_for(None, "h200")
    assert h100.bf16_tflops == h200.bf16_tflops
    assert h100.update_efficiency < h200.update_efficiency
    ratio = update_seconds(SMALL, profile, settings, layout, h100) / update_seconds(
        SMALL, profile, settings, layout, h200
    )
    assert ratio == pytest.approx(h200.update_efficiency / h100.update_efficiency)
    # --gpu-memory keeps the named GPU's measured efficiency.
    assert gpu_for(80).update_efficiency == h100.update_efficiency


def test_shared_prefix_activation_memory_counts_packed_tokens():
    # rows x sequence - shared: the per-token parts as for the packed token count.
    packed = update_memory(SMALL, 3, 100, 20, 2, checkpointing=True, shared_tokens=120)
    alone = update_memory(SMALL, 1, 300 - 120, 20, 2, checkpointing=True)
    assert packed["activations"] == alone["activations"]
    assert packed["recomputed_layer"] == alone["recomputed_layer"]
    # A micro-batch of rows x 1,756 padded tokens whose rows share 62.5% of 1,500 (937 tokens):
    # the token budget counts packed tokens, so it takes more rows: (4096 - 937) // 819 = 3.
    profile = TokenProfile([(1500, 200)] * 8, 2, "hand", shared_row_share=0.625)
    budget = _settings(micro_batch_tokens=4096, max_new_tokens=256)
    assert largest_shared_micro_batch(profile, budget, 64) == (3, 1756, 256, 2 * 937)
    # By rows alone the micro-batch is as many rows, fewer tokens.
    rows = _settings(micro_batch_size=4, max_new_tokens=256)
    assert largest_shared_micro_batch(profile, rows, 64) == (4, 1756, 256, 3 * 937)
    layout = Layout("x", 1, 1, "hf", trajectories_per_step=2)
    on = trainer_parts(QWEN3_4B, profile, dataclasses.replace(rows, shared_prefix=True), layout, [])
    off = trainer_parts(QWEN3_4B, profile, rows, layout, [])
    assert on["activations"] < off["activations"]


def test_run_settings_reads_shared_prefix_when_the_config_has_it_or_not():
    from lexrl.config import load_config

    config = load_config("configs/stard_mas_grpo.yaml", [])
    assert not run_settings(config).shared_prefix and not run_settings(config).overlap
    grpo = {f.name: getattr(config.grpo, f.name) for f in dataclasses.fields(config.grpo)}
    grpo.pop("shared_prefix", None)  # a GRPOConfig from before the key existed
    older = types.SimpleNamespace(**{**vars(config), "grpo": types.SimpleNamespace(**grpo)})
    assert run_settings(older).shared_prefix is False
    grpo["shared_prefix"] = True
    newer = types.SimpleNamespace(**{**vars(config), "grpo": types.SimpleNamespace(**grpo)})
    assert run_settings(newer).shared_prefix is True


# --- the colocated engine's costs and the shapes ---------------------------------------------


def test_a_colocated_engine_adds_its_own_cuda_context():
    profile = profile_from_counts("4x1500+200")
    colocate = Layout("colocate", 6, 6, "vllm-engine", trajectories_per_step=24)
    server = Layout("server", 8, 4, "vllm-server", 2, trajectories_per_step=16)
    parts = trainer_parts(QWEN3_4B, profile, _settings(), colocate, [])
    assert parts["vLLM engine's CUDA context"] == ENGINE_CUDA_CONTEXT_BYTES == int(0.5 * GiB)
    assert (
        trainer_parts(QWEN3_4B, profile, _settings(), server, [])["vLLM engine's CUDA context"] == 0
    )
    plan = plan_layout(QWEN3_4B, profile, _settings(), colocate, gpu_for(24), [])
    assert any("empties the cache before `wake_up`" in note for note in plan.notes)


def test_the_engine_empties_the_cache_before_waking(monkeypatch):
    from lexrl.rollout import vllm_engine

    calls = []
    monkeypatch.setattr(vllm_engine.torch.cuda, "empty_cache", lambda: calls.append("empty"))
    backend = object.__new__(vllm_engine.VLLMEngineBackend)
    backend.llm = types.SimpleNamespace(wake_up=lambda: calls.append("wake"))
    backend._asleep = True
    backend.resume()
    assert calls == ["empty", "wake"] and not backend._asleep
    backend.resume()  # awake: nothing to do
    assert calls == ["empty", "wake"]


def test_the_seq_cls_reranker_keeps_the_vocabulary_embedding():
    reranker = KNOWN_SHAPES["tomaarsen/Qwen3-Reranker-4B-seq-cls"]
    assert reranker.vocab == 151_669
    # The decoder and the token embedding of Qwen3-Reranker-4B; no LM head (a 1-row score head).
    assert reranker.params() == KNOWN_SHAPES["Qwen/Qwen3-Reranker-4B"].params()
    assert reranker.params() * 2 / GiB == pytest.approx(7.5, abs=0.1)


def test_the_printed_plan_names_the_shared_prefixes_and_the_closest_recipe():
    from lexrl.config import load_config
    from lexrl.train.plan_report import make_plan

    config = load_config("configs/stard_mas_grpo.yaml", [])
    profile = profile_from_counts("4x1500+200", config.grpo.num_generations)
    plans = make_plan(config, gpu_for(24), 8, profile)
    out = render(plans, gpu_for(24), profile)
    assert "Shared prefixes 48% of trained tokens; assumed" in out
    assert "step s with shared prefixes and overlap" in out
    assert "Closest to the paper's 9.3 s per update of 16 trajectories" in out
    server = next(p for p in plans if p.layout.name == "server")
    recipe = server.recipe.seconds
    assert recipe["step"] == pytest.approx(
        max(recipe["rollout"], recipe["update"]) + recipe["adapter sync"]
    )
    assert recipe["update"] < server.seconds["update"]
