"""`lexrl plan`: a config's memory and time plan for each GPU layout, as a table and a verdict.

The model's widths come from its config.json (a local folder or the Hugging Face cache) or from
`plan.KNOWN_SHAPES`; nothing is downloaded. Token counts come, in this order of preference, from
a file of trajectories (`lexrl rollout`), from a short rollout of the env's scripted teacher
with the model's own tokenizer, or from the configuration's caps (every trainable turn
`rollout.vllm_max_model_len` tokens long), which the output says.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lexrl.config import Config
from lexrl.errors import PlanError
from lexrl.retrieval.options import RetrievalConfig
from lexrl.train.plan import (
    ASSUMED_FROM,
    CUDA_CONTEXT_BYTES,
    ENGINE_CUDA_CONTEXT_BYTES,
    FRAGMENTATION,
    KNOWN_SHAPES,
    SHARED_PREFIX_FRACTION,
    VLLM_ASLEEP_BYTES,
    VLLM_OVERHEAD_BYTES,
    GiB,
    Gpu,
    Layout,
    ModelShape,
    RunSettings,
    TokenProfile,
    adapter_sync_seconds,
    assumed_shared_prefix,
    common_prefix_length,
    decode_steps,
    gpu_for,
    largest_micro_batch,
    largest_shared_micro_batch,
    lora_state_bytes,
    rollout_parts,
    step_seconds,
    update_memory,
    update_seconds,
)

if TYPE_CHECKING:
    from lexrl.types import Trajectory

LAYOUTS = ("colocate", "zero2", "server")
SAMPLER = "sampler in the rollout"
"""The rollout phase's part: a colocated vLLM engine awake (weights, KV blocks, overhead), or
the `hf` sampler's KV cache; the update phase frees it."""
SMOLLM2_SHAPE = ModelShape(30, 576, 1536, 9, 3, 64, 49_152, tied=True)
SLEEP_WAKE_S = 1.5
"""A colocated engine's sleep before and wake after the update (vLLM's sleep mode, level 1: the
weights go to CPU memory and come back; a 4B-class model wakes in about 1 s)."""
PAPER_STEP_S = 9.3
"""LegalMALR's seconds per update of 16 trajectories on 8 x RTX 4090: ten epochs of its training
queries at 2 groups per update (about 6,170 updates) in about sixteen hours (Li et al. 2026,
"LegalMALR", arXiv:2601.17692, sec. 3.5.3)."""


def model_shape(name_or_path: str, key: str, config: Config | None = None) -> ModelShape:
    """The widths of `name_or_path`: its config.json (a folder, or the Hugging Face cache with
    no download), a built-in model's, or a known release's (`KNOWN_SHAPES`)."""
    if name_or_path == "tiny" and config is not None:
        model = config.model
        heads = max(1, model.tiny_hidden_size // 64)
        return ModelShape(
            model.tiny_layers,
            model.tiny_hidden_size,
            3 * model.tiny_hidden_size,
            heads,
            heads,
            64,
            model.tiny_vocab_size,
        )
    if name_or_path == "smollm2-135m":
        return SMOLLM2_SHAPE
    folder = Path(name_or_path)
    if (folder / "config.json").is_file():
        from transformers import AutoConfig

        return ModelShape.from_hf_config(AutoConfig.from_pretrained(folder))
    if name_or_path in KNOWN_SHAPES:
        return KNOWN_SHAPES[name_or_path]
    try:
        from transformers import AutoConfig

        return ModelShape.from_hf_config(
            AutoConfig.from_pretrained(name_or_path, local_files_only=True)
        )
    except (OSError, ValueError):
        raise PlanError(
            f"`{key}: {name_or_path}`: no config.json in a local folder or the Hugging Face "
            f"cache, and not a known release ({', '.join(KNOWN_SHAPES)}): download the model "
            "or point the key at its folder"
        ) from None


def retrieval_models(config: Config) -> list[tuple[str, str]]:
    """(key, model) of every retrieval model an env of the run loads into each GPU process: the
    `RetrievalConfig` sections of the trained envs' options, minus served or CPU models."""
    found = []
    for prefix, options in config.env.sections().items():
        for path, section in _sections(options, prefix):
            if section.device.startswith("cpu"):
                continue
            wanted = (
                [("dense_model", section.dense_endpoint)] if section.first_stage == "dense" else []
            )
            wanted.append(("reranker_model", section.reranker_endpoint))
            for field_name, endpoint in wanted:
                model = getattr(section, field_name)
                if model and model != "tiny" and not endpoint:
                    found.append((f"{path}.{field_name}", model))
    return found


def _sections(options: object, prefix: str) -> list[tuple[str, RetrievalConfig]]:
    if not is_dataclass(options):
        return []
    found = []
    for item in fields(options):
        value = getattr(options, item.name)
        if isinstance(value, RetrievalConfig):
            found.append((f"{prefix}.{item.name}", value))
        elif is_dataclass(value):
            found += _sections(value, f"{prefix}.{item.name}")
    return found


def run_settings(config: Config) -> RunSettings:
    grpo, rollout = config.grpo, config.rollout
    return RunSettings(
        # Read so that a config without the key (before `grpo.shared_prefix` exists) plans too.
        shared_prefix=bool(getattr(grpo, "shared_prefix", False)),
        overlap=bool(getattr(rollout, "overlap", False)),
        dtype_bytes=4 if config.model.dtype == "float32" else 2,
        lora_rank=config.lora.r,
        lora_targets=list(config.lora.target_modules),
        micro_batch_size=grpo.micro_batch_size,
        micro_batch_tokens=grpo.micro_batch_tokens,
        gradient_checkpointing=grpo.gradient_checkpointing,
        logprob_chunk_tokens=grpo.logprob_chunk_tokens,
        max_new_tokens=rollout.max_new_tokens,
        vllm_max_model_len=rollout.vllm_max_model_len,
        max_concurrent_episodes=rollout.max_concurrent_episodes,
        max_batch_size=rollout.max_batch_size,
        importance_sampling=grpo.importance_sampling,
        beta=grpo.beta,
    )


def read_trajectories(path: str | Path) -> list[Trajectory]:
    """The trajectories of a `lexrl rollout --out` JSONL (blank lines skipped); `PlanError`
    naming the file, and the line, when one cannot be read."""
    from lexrl.types import Trajectory

    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise PlanError(f"{path}: {error}") from None
    played = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            played.append(Trajectory.from_json(line))
        except (ValueError, TypeError, KeyError) as error:
            raise PlanError(f"{path}, line {number}: not a trajectory ({error})") from None
    return played


def profile_from_trajectories(path: str | Path, envs: list[str] | None = None) -> TokenProfile:
    """Token counts of the trainable turns in a JSONL of trajectories (`lexrl rollout --out`),
    with the shared prefixes of each env's groups (`shared_prefixes`). `envs`: the config's env
    names (a mixture's members name their tasks `<env>:<id>`)."""
    played = read_trajectories(path)
    turns: list[tuple[int, int]] = []
    repeated = 0
    for trajectory in played:
        rows = [(t.prompt_ids, t.completion_ids) for t in trajectory.turns if t.trainable]
        turns += [(len(p), len(c)) for p, c in rows]
        repeated += repeated_prefix_tokens(rows)
    trajectories = len(played)
    if not turns:
        raise PlanError(f"{path}: no trainable turns")
    shared, by_env, row_share = shared_prefixes(played, envs or [])
    return TokenProfile(
        turns,
        trajectories,
        f"{trajectories} trajectories in {path}",
        repeated,
        shared_prefix_tokens=shared,
        shared_prefix_by_env=by_env,
        shared_prefix_note=(
            "measured: rows of one task at one call (trainable turn and role), their common "
            "prompt prefix"
            if shared is not None
            else "the trajectories carry no prompt token ids"
        ),
        shared_row_share=row_share,
    )


def env_of(task_id: str, envs: list[str]) -> str:
    """The env that played a task: a mixture's member named by the id's `<env>:` prefix, else
    the config's one env (`?` when not known)."""
    head = task_id.split(":", 1)[0]
    if len(envs) > 1 and head in envs:
        return head
    return envs[0] if len(envs) == 1 else (head if ":" in task_id else "?")


def shared_prefixes(
    trajectories: list[Trajectory], envs: list[str]
) -> tuple[int | None, dict[str, float | None], float]:
    """(shared-prefix tokens, each env's share of its trained tokens, the mean share of a row's
    prompt that is its group's common prefix) of trajectories. A group is the trainable turns of
    one task at one call: the same trainable-turn index and role, one row per trajectory; it
    saves (rows - 1) x their common prompt prefix (`plan.group_shared_tokens`). An env whose
    trainable turns carry no prompt token ids has an unknown share (None), and so has the whole
    when any env's is unknown."""
    groups: dict[tuple[str, str, int, str], list[list[int]]] = {}
    tokens: dict[str, int] = {}
    unknown: set[str] = set()
    for trajectory in trajectories:
        env = env_of(trajectory.task_id, envs)
        trainable = [turn for turn in trajectory.turns if turn.trainable]
        for index, turn in enumerate(trainable):
            tokens[env] = tokens.get(env, 0) + len(turn.prompt_ids) + len(turn.completion_ids)
            if not turn.prompt_ids:
                unknown.add(env)
            key = (env, trajectory.task_id, index, turn.role)
            groups.setdefault(key, []).append(turn.prompt_ids)
    saved: dict[str, int] = dict.fromkeys(tokens, 0)
    row_prefixes = prompts = 0
    for (env, *_), rows in groups.items():
        prompts += sum(len(row) for row in rows)
        if len(rows) > 1:
            common = common_prefix_length(rows)
            saved[env] += (len(rows) - 1) * common
            row_prefixes += len(rows) * common
    by_env = {
        env: None if env in unknown else saved[env] / max(tokens[env], 1) for env in sorted(tokens)
    }
    total = None if unknown else sum(saved.values())
    return total, by_env, row_prefixes / max(prompts, 1)


def repeated_prefix_tokens(rows: list[tuple[list[int], list[int]]]) -> int:
    """Prompt tokens of a trajectory's turns that begin with an earlier turn's whole prompt and
    completion: what training the turns as one sequence would not recompute."""
    total = 0
    for index, (prompt, _) in enumerate(rows):
        best = 0
        for earlier_prompt, earlier_completion in rows[:index]:
            prefix = earlier_prompt + earlier_completion
            if len(prefix) > best and prompt[: len(prefix)] == prefix:
                best = len(prefix)
        total += best
    return total


def profile_from_rollout(config: Config, episodes: int) -> TokenProfile:
    """Token counts of `episodes` scripted-teacher episodes of the config's env, rendered with the
    config's own tokenizer. Completions are the teacher's replies; the memory plan still sizes
    them at `rollout.max_new_tokens`."""
    from lexrl.envs import make_env
    from lexrl.models import config_tokenizer
    from lexrl.train.warmstart import scripted_rows

    env = make_env(config.env)
    tokenizer = config_tokenizer(config.model, env.text_corpus())
    rows = scripted_rows(env, tokenizer, episodes, config.run.seed)
    turns = [(len(r.prompt_ids), len(r.completion_ids)) for r in rows]
    return TokenProfile(
        turns,
        episodes,
        f"{episodes} scripted episodes of {env.name}, the model's tokenizer",
        shared_prefix_note="one scripted episode a task: no group of K to compare; pass "
        "--trajectories FILE (a `lexrl rollout` JSONL) or --tokens",
    )


def profile_from_caps(config: Config, turns_per_trajectory: int) -> TokenProfile:
    """The worst case the configuration allows: every trainable turn `vllm_max_model_len` tokens,
    of which `max_new_tokens` completion."""
    length, completion = config.rollout.vllm_max_model_len, config.rollout.max_new_tokens
    turns = [(length - completion, completion)] * turns_per_trajectory
    return TokenProfile(
        turns,
        1,
        f"the config's caps: {turns_per_trajectory} trainable turns of {length:,} tokens "
        f"({completion} completion) per trajectory; pass --trajectories FILE for measured counts",
        worst_case=True,
        shared_prefix_note="the caps' worst case counts none shared",
    )


def profile_from_counts(
    text: str, generations: int = 8, shared_fraction: float = SHARED_PREFIX_FRACTION
) -> TokenProfile:
    """`TxP+C`: every trajectory has T trainable turns of P prompt and C completion tokens; the
    K = `generations` trajectories of a task share the first call's whole prompt and the first
    `shared_fraction` of a later call's (`plan.assumed_shared_prefix`)."""
    try:
        turns, rest = text.lower().split("x")
        prompt, completion = rest.split("+")
        counts = int(turns), int(prompt), int(completion)
    except ValueError:
        raise PlanError(
            f"--tokens {text!r}: expected TURNSxPROMPT+COMPLETION, e.g. 4x1500+200"
        ) from None
    if min(counts) < 1:
        raise PlanError(f"--tokens {text!r}: every count must be >= 1")
    try:
        shared, row_share = assumed_shared_prefix(
            counts[0], counts[1], generations, shared_fraction
        )
    except ValueError as error:
        raise PlanError(str(error)) from None
    return TokenProfile(
        [(counts[1], counts[2])] * counts[0],
        1,
        f"given: {counts[0]} trainable turns of {counts[1]:,} + {counts[2]} tokens a trajectory",
        shared_prefix_tokens=shared,
        shared_prefix_note=(
            f"assumed: the K = {generations} trajectories of a task share the first call's "
            f"whole prompt and {shared_fraction:.0%} of a later call's (--shared-prefix "
            f"{shared_fraction:g})"
        ),
        shared_row_share=row_share,
    )


def token_profile(
    config: Config,
    trajectories: str | None,
    episodes: int,
    turns: int,
    counts: str | None = None,
    shared_fraction: float | None = None,
) -> tuple[TokenProfile, str]:
    """The best token counts available, and why a better source was not used ('' if none).
    `shared_fraction`: the share of a later call's prompt a group shares, assumed for `counts`
    (`--shared-prefix`; default `plan.SHARED_PREFIX_FRACTION`)."""
    if trajectories:
        return profile_from_trajectories(trajectories, config.env.member_names()), ""
    if counts:
        fraction = SHARED_PREFIX_FRACTION if shared_fraction is None else shared_fraction
        return profile_from_counts(counts, config.grpo.num_generations, fraction), ""
    try:
        return profile_from_rollout(config, episodes), ""
    except Exception as error:  # noqa: BLE001 - any reason the rollout cannot run is reported
        reason = f"no scripted rollout ({type(error).__name__}: {str(error).splitlines()[0]})"
        return profile_from_caps(config, turns), reason


def layouts(config: Config, gpus: int, names: list[str] | None = None) -> list[Layout]:
    """The layouts to plan: the config as it is on one GPU, or on several the three layouts of
    scripts/train_8x4090.sh generalised to `gpus`. The config's retrieval models, if it loads
    any, are served from GPUs of their own, one a model (the last ones), never loaded by each
    trainer; of the rest, `colocate` and `zero2` train on every GPU with a vLLM engine each, and
    `server` serves vLLM from two GPUs and trains on the others. When G x K trajectories do not
    split over the trainers, each trainer takes a whole task (G = trainers), as the script does."""
    retrieval = [model for _, model in retrieval_models(config)]
    per_step = config.grpo.tasks_per_step * config.grpo.num_generations
    if gpus == 1 and not names:
        backend = config.rollout.backend
        servers = len(config.rollout.vllm_urls) if backend == "vllm-server" else 0
        return [Layout("configured", 1 + servers, 1, backend, servers, False, per_step, retrieval)]
    chosen = []
    for name in names or list(LAYOUTS):
        if name not in LAYOUTS:
            raise PlanError(f"unknown layout {name!r}; one of {', '.join(LAYOUTS)}")
        servers = (2 if gpus - len(retrieval) > 3 else 1) if name == "server" else 0
        trainers = gpus - len(retrieval) - servers
        if trainers < 1:
            raise PlanError(f"{gpus} GPUs leave no trainer in the {name} layout")
        layout = Layout(
            name,
            gpus,
            trainers,
            "vllm-server" if servers else "vllm-engine",
            servers,
            name == "zero2",
            per_step,
            retrieval_gpus=len(retrieval),
        )
        tasks = step_tasks(config.grpo.tasks_per_step, config.grpo.num_generations, trainers)
        if tasks != config.grpo.tasks_per_step:
            layout.trajectories_per_step = tasks * config.grpo.num_generations
            layout.note = (
                f"G = {tasks}: G = {config.grpo.tasks_per_step} x K does not split over "
                f"{trainers} trainers"
            )
        chosen.append(layout)
    return chosen


def step_tasks(tasks: int, k: int, processes: int) -> int:
    """The smallest G >= `tasks` whose G x K trajectories split over `processes`."""
    return next(g for g in range(tasks, tasks + processes + 1) if _splits(g, k, processes))


def _splits(tasks: int, k: int, processes: int) -> bool:
    """Whether `shard_step` can share G tasks of K trajectories over `processes`."""
    if tasks % processes == 0:
        return True
    return processes % tasks == 0 and k % (processes // tasks) == 0


@dataclass
class LayoutPlan:
    layout: Layout
    trainer: dict[str, int]
    """Bytes per part of one training process; `peak` is the larger phase's total."""
    others: dict[str, int]
    """Peak bytes of each other kind of GPU the layout uses (`vLLM server GPU`, `retrieval
    server GPU`)."""
    seconds: dict[str, float]
    fits: bool
    advice: list[str]
    gpu: Gpu
    notes: list[str] = dataclasses.field(default_factory=list)
    """How the step's seconds add up, and what the plan assumed for this layout."""
    limit: str = ""
    """What bounds the step most: the rollout's decode or prefill, or the update."""
    recipe: LayoutPlan | None = None
    """The same layout with `grpo.shared_prefix` and `rollout.overlap` on (None when the config
    already has both, or is this very plan)."""


def trainer_parts(
    model: ModelShape,
    profile: TokenProfile,
    settings: RunSettings,
    layout: Layout,
    retrieval: list[ModelShape],
) -> dict[str, int]:
    """Bytes each part of one training process holds at its peak, and `peak`: the fixed parts
    and the larger of the update phase (the engine asleep) and the rollout phase. The update's
    parts are not a plain sum: its log-prob buffers and a recomputed layer come one after the
    other (`plan.update_memory`)."""
    rows_available = math.ceil(
        profile.turns_per_trajectory * layout.trajectories_per_step / layout.trainers
    )
    if settings.shared_prefix:
        rows, sequence, completion, shared = largest_shared_micro_batch(
            profile, settings, rows_available
        )
    else:
        rows, sequence, completion = largest_micro_batch(profile, settings, rows_available)
        shared = 0
    colocated = layout.backend == "vllm-engine"
    fixed = {
        "base weights": model.params() * settings.dtype_bytes,
        "LoRA, gradients, AdamW": lora_state_bytes(
            model, settings.lora_rank, settings.lora_targets, layout.trainers if layout.zero2 else 1
        ),
        "retrieval models": sum(shape.params() * 2 for shape in retrieval),
        "CUDA context": CUDA_CONTEXT_BYTES,
        "vLLM engine's CUDA context": ENGINE_CUDA_CONTEXT_BYTES if colocated else 0,
    }
    memory = update_memory(
        model,
        rows,
        sequence,
        completion,
        settings.lora_rank,
        settings.gradient_checkpointing,
        chunk_tokens=settings.logprob_chunk_tokens,
        lora_targets=tuple(settings.lora_targets),
        shared_tokens=shared,
        grouped_attention=settings.shared_prefix,
    )
    update = {
        "activations": memory["activations"],
        "log-prob buffers": memory["logprobs"],
        "recomputed layer": memory["recomputed_layer"],
        "vLLM engine asleep": VLLM_ASLEEP_BYTES if colocated else 0,
    }
    # The log-prob chunks and a recomputed layer are never alive together (`update_memory`).
    update_peak = memory["total"] - memory["lora_gradients"] + update["vLLM engine asleep"]
    # The update's freed blocks are not counted in the rollout phase: the engine's `resume`
    # empties PyTorch's cache before `wake_up` (lexrl/rollout/vllm_engine.py).
    rollout = {SAMPLER: 0}
    if colocated:
        rollout[SAMPLER] = engine_bytes(
            model, concurrent_episodes(layout, settings), settings.vllm_max_model_len
        )
    elif layout.backend == "hf":
        episodes = min(concurrent_episodes(layout, settings), settings.max_batch_size)
        rollout[SAMPLER] = episodes * sequence * model.kv_bytes_per_token()
    peak = sum(fixed.values()) + max(update_peak, rollout[SAMPLER])
    return {**fixed, **update, **rollout, "peak": peak}


def concurrent_episodes(layout: Layout, settings: RunSettings) -> int:
    per_process = math.ceil(layout.trajectories_per_step / layout.trainers)
    return min(per_process, settings.max_concurrent_episodes)


def engine_bytes(model: ModelShape, sequences: int, max_len: int) -> int:
    """A vLLM engine's weights (bf16), the KV blocks of `sequences` at `max_len` tokens, and its
    overhead."""
    kv = sequences * max_len * model.kv_bytes_per_token()
    return model.params() * 2 + kv + VLLM_OVERHEAD_BYTES


def engine_memory_fraction(
    model: ModelShape, sequences: int, max_len: int, device_bytes: int
) -> float:
    """`gpu_memory_utilization` for a vLLM engine that must hold `sequences` at `max_len`: its
    share of the device, rounded up to a hundredth."""
    return math.ceil(100 * engine_bytes(model, sequences, max_len) / device_bytes) / 100


def plan_layout(
    model: ModelShape,
    profile: TokenProfile,
    settings: RunSettings,
    layout: Layout,
    gpu: Gpu,
    retrieval: list[ModelShape],
) -> LayoutPlan:
    if settings.importance_sampling == "auto":
        # `auto` is none for `hf`, which samples from the trainer's own weights.
        mode = "none" if layout.backend == "hf" else "sequence_mask"
        settings = dataclasses.replace(settings, importance_sampling=mode)
    in_process = retrieval if layout.retrieval_in_process else []
    trainer = trainer_parts(model, profile, settings, layout, in_process)
    others = {}
    if layout.backend == "vllm-server":
        sequences = math.ceil(layout.trajectories_per_step / max(layout.server_gpus, 1))
        engine = engine_bytes(model, sequences, settings.vllm_max_model_len)
        others["vLLM server GPU"] = engine + CUDA_CONTEXT_BYTES
    if layout.retrieval_gpus:
        largest = max(shape.params() * 2 for shape in retrieval)
        others["retrieval server GPU"] = largest + VLLM_OVERHEAD_BYTES + CUDA_CONTEXT_BYTES
    budget = (1 - FRAGMENTATION) * gpu.memory_bytes
    fits = trainer["peak"] <= budget and all(v <= budget for v in others.values())
    sampling = rollout_parts(model, profile, settings, layout, gpu)
    seconds = {
        "rollout": sampling["prefill"] + sampling["decode"],
        "update": update_seconds(model, profile, settings, layout, gpu),
        "sleep and wake": SLEEP_WAKE_S if layout.backend == "vllm-engine" else 0.0,
        "adapter sync": (
            adapter_sync_seconds(model, settings) if layout.backend.startswith("vllm") else 0.0
        ),
    }
    overlap = settings.overlap and layout.backend == "vllm-server"
    rest = seconds["sleep and wake"] + seconds["adapter sync"]
    seconds["step"], how = step_seconds(seconds["rollout"], seconds["update"], rest, overlap)
    notes = [f"step = {how}"]
    if settings.overlap and not overlap:
        notes.append("rollout.overlap needs the server layout: not applied here")
    if settings.shared_prefix:
        share = profile.shared_prefix_share
        notes.append(
            "grpo.shared_prefix: the update encodes "
            + (
                f"{1 - share:.0%} of the trained tokens (shared prefixes once)"
                if share is not None
                else "every token (the shared share is unknown)"
            )
        )
    if layout.backend == "vllm-engine":
        cached = trainer["activations"] + max(
            trainer["log-prob buffers"], trainer["recomputed layer"]
        )
        notes.append(
            f"the update's {cached / GiB:.1f} GiB, freed but cached by PyTorch, is not counted "
            "beside the woken engine: `resume` empties the cache before `wake_up`"
        )
    busy = {
        "decode": sampling["decode"],
        "prefill": sampling["prefill"],
        "update": seconds["update"],
        "sleep, wake and adapter sync": rest,
    }
    if not overlap:
        limit = max(busy, key=busy.get)
    elif seconds["rollout"] >= seconds["update"]:
        limit = "decode" if sampling["decode"] >= sampling["prefill"] else "prefill"
    else:
        limit = "update"
    if limit == "decode":
        per_step = sampling["decode"] / max(decode_steps(profile), 1)
        limit = (
            f"decode latency ({decode_steps(profile):,.0f} decoding steps one after another, "
            f"{1000 * per_step:.0f} ms each: the weights and KV read per step)"
        )
    elif limit == "update":
        limit = "update FLOPs"
    advice = advise(trainer, others, settings, budget)
    return LayoutPlan(layout, trainer, others, seconds, fits, advice, gpu, notes, limit)


def advise(
    trainer: dict[str, int], others: dict[str, int], settings: RunSettings, budget: float
) -> list[str]:
    """What to change, largest lever first, when a process does not fit."""
    advice = []
    if trainer["peak"] > budget:
        if not settings.gradient_checkpointing and trainer["activations"] > 2 * GiB:
            advice.append("set `grpo.gradient_checkpointing: true`")
        if trainer["activations"] + trainer["log-prob buffers"] > 4 * GiB:
            advice.append("lower `grpo.micro_batch_tokens` (or `grpo.micro_batch_size`)")
        if trainer["retrieval models"]:
            advice.append(
                "serve the retrieval models once (`dense_endpoint`, `reranker_endpoint`) instead "
                "of loading them in every process"
            )
        if trainer[SAMPLER] > budget / 2:
            advice.append("lower `rollout.vllm_max_model_len` or use the server layout")
    if others.get("vLLM server GPU", 0) > budget:
        advice.append(
            "the vLLM servers need more KV: lower `rollout.vllm_max_model_len`, or add servers"
        )
    return advice


def make_plan(
    config: Config, gpu: Gpu, gpus: int, profile: TokenProfile, names: list[str] | None = None
) -> list[LayoutPlan]:
    """Each layout's plan, and beside it (`LayoutPlan.recipe`) the same layout with shared
    prefixes and overlap on, unless the config already has both."""
    model = model_shape(config.model.name_or_path, "model.name_or_path", config)
    retrieval = [model_shape(name, key) for key, name in retrieval_models(config)]
    settings = run_settings(config)
    both = dataclasses.replace(settings, shared_prefix=True, overlap=True)
    plans = []
    for layout in layouts(config, gpus, names):
        plan = plan_layout(model, profile, settings, layout, gpu, retrieval)
        if both != settings:
            plan.recipe = plan_layout(model, profile, both, layout, gpu, retrieval)
        plans.append(plan)
    return plans


def best_recipe(plans: list[LayoutPlan]) -> LayoutPlan | None:
    """The fitting layout whose step with shared prefixes and overlap is shortest (per
    trajectory, as layouts may differ in trajectories per update)."""
    candidates = [p.recipe or p for p in plans if (p.recipe or p).fits]
    if not candidates:
        return None
    return min(candidates, key=lambda p: p.seconds["step"] / max(p.layout.trajectories_per_step, 1))


def recipe_line(plans: list[LayoutPlan]) -> str:
    """The step closest to the paper's (`PAPER_STEP_S`): the best layout with shared prefixes
    and rollout overlap, and what limits it."""
    best = best_recipe(plans)
    if best is None:
        return "No layout fits with shared prefixes and overlap."
    layout, seconds = best.layout, best.seconds
    flags = "--grpo.shared_prefix true"
    if layout.backend == "vllm-server":
        flags += " --rollout.backend vllm-server --rollout.overlap true"
    per_16 = seconds["step"] * 16 / max(layout.trajectories_per_step, 1)
    return (
        f"Closest to the paper's {PAPER_STEP_S} s per update of 16 trajectories: {layout.name} "
        f"with `{flags}`, {seconds['step']:.1f} s per step of {layout.trajectories_per_step} "
        f"trajectories ({per_16:.1f} s per 16; rollout {seconds['rollout']:.1f}, update {seconds['update']:.1f}, "
        f"sleep and wake {seconds['sleep and wake']:.1f}, adapter sync "
        f"{seconds['adapter sync']:.1f}; {best.notes[0]}); limited by {best.limit}."
    )


def update_rate_line(gpu: Gpu) -> str:
    """The update's rate the plan uses for `gpu`, and the measurement it comes from."""
    rate = f"Update rate: {gpu.update_efficiency:.1%} of the GPU's bf16 peak"
    if gpu.update_measured:
        return f"{rate}, measured: {gpu.update_measured}."
    return (
        f"{rate}, assumed: the {ASSUMED_FROM.upper()}'s measured rate; no {gpu.name} has been "
        "measured (scripts/gpu_bench.sh, then scripts/update_rates.py)."
    )


def render(plans: list[LayoutPlan], gpu: Gpu, profile: TokenProfile, note: str = "") -> str:
    """The plan as Markdown: GiB per GPU by part for each layout, seconds per update, verdicts."""
    gib = lambda value: f"{value / GiB:.1f}"  # noqa: E731
    header = [
        f"{p.layout.name} ({p.layout.trainers} trainer{'s' if p.layout.trainers > 1 else ''})"
        for p in plans
    ]
    lines = [
        f"GPU: {gpu.name}, {gpu.memory_bytes / GiB:.1f} GiB; a process fits at <= "
        f"{100 * (1 - FRAGMENTATION):.0f}% of it.",
        update_rate_line(gpu),
        f"Tokens: {profile.source}: {profile.turns_per_trajectory:.1f} trainable turns and "
        f"{profile.tokens / max(profile.trajectories, 1):,.0f} tokens per trajectory, longest "
        f"turn {sum(profile.longest()):,}.",
        shared_prefix_line(profile),
        f"Turns extending an earlier turn of their trajectory (one sequence would train them "
        f"once): {profile.repeated_prefix_tokens / max(profile.tokens, 1):.0%} of trained tokens.",
    ]
    if note:
        lines.append(f"({note})")
    lines += ["", "| GiB per training GPU | " + " | ".join(header) + " |"]
    lines.append("|---" * (len(plans) + 1) + "|")
    for part in plans[0].trainer:
        values = [gib(p.trainer[part]) for p in plans]
        label = f"**{part}**" if part == "peak" else part
        lines.append(f"| {label} | " + " | ".join(values) + " |")
    for kind in dict.fromkeys(kind for p in plans for kind in p.others):
        values = [gib(p.others[kind]) if kind in p.others else "-" for p in plans]
        lines.append(f"| **{kind} peak** | " + " | ".join(values) + " |")
    for key in dict.fromkeys(key for p in plans for key in p.seconds):
        values = [f"{p.seconds.get(key, 0.0):.1f}" for p in plans]
        label = f"**predicted {key} s**" if key == "step" else f"predicted {key} s"
        lines.append(f"| {label} | " + " | ".join(values) + " |")
    if any(p.recipe for p in plans):
        values = [f"{(p.recipe or p).seconds['step']:.1f}" for p in plans]
        lines.append("| step s with shared prefixes and overlap | " + " | ".join(values) + " |")
    lines.append("")
    for p in plans:
        verdict = "fits" if p.fits else "DOES NOT FIT"
        extra = f"; {p.layout.note}" if p.layout.note else ""
        lines.append(
            f"{p.layout.name}: {verdict} ({gib(p.trainer['peak'])} GiB per training GPU"
            + "".join(f", {gib(v)} GiB per {k}" for k, v in p.others.items())
            + f"; {p.layout.trajectories_per_step} trajectories per update{extra})"
        )
        lines += [f"  - {item}" for item in p.advice]
        lines += [f"  - {item}" for item in [*p.notes, f"limited by {p.limit}"]]
    if len(plans) > 1 or plans[0].recipe:
        lines += ["", recipe_line(plans)]
    return "\n".join(lines)


def shared_prefix_line(profile: TokenProfile) -> str:
    """The share of trained tokens that are prompt prefixes a task's group shares, each env's
    where measured, and how it was counted."""
    share = profile.shared_prefix_share
    envs = ""
    if profile.shared_prefix_by_env:
        envs = (
            " (by env: "
            + ", ".join(
                f"{env} {'unknown' if value is None else f'{value:.0%}'}"
                for env, value in profile.shared_prefix_by_env.items()
            )
            + ")"
        )
    if share is None:
        how = profile.shared_prefix_note or (
            "pass --trajectories FILE (a `lexrl rollout` JSONL) or --tokens to count them"
        )
        return f"Shared prefixes: unknown share of trained tokens{envs} ({how})."
    return f"Shared prefixes {share:.0%} of trained tokens{envs}; {profile.shared_prefix_note}."


def plan_json(plans: list[LayoutPlan]) -> str:
    return json.dumps(
        [
            {
                "layout": p.layout.name,
                "fits": p.fits,
                "trainer_gib": {k: round(v / GiB, 3) for k, v in p.trainer.items()},
                "other_gpus_gib": {k: round(v / GiB, 3) for k, v in p.others.items()},
                "seconds": {k: round(v, 2) for k, v in p.seconds.items()},
                "limit": p.limit,
                "notes": p.notes,
                "step_with_shared_prefix_and_overlap": round((p.recipe or p).seconds["step"], 2),
            }
            for p in plans
        ]
    )


def device_memory_bytes() -> int | None:
    """Total memory of this process's CUDA device, or None without one."""
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory


def preflight(config: Config, processes: int, deepspeed: bool) -> LayoutPlan | None:
    """The plan of this very run on this process's GPU (None on a CPU): the configured backend,
    `processes` trainers, the token counts of the config's caps (no rollout before training)."""
    memory = device_memory_bytes()
    if memory is None:
        return None
    gpu = gpu_for(memory / GiB)
    profile = profile_from_caps(config, turns_per_trajectory=1)
    retrieval_names = retrieval_models(config)
    layout = Layout(
        "this run",
        processes,
        processes,
        config.rollout.backend,
        len(config.rollout.vllm_urls) if config.rollout.backend == "vllm-server" else 0,
        deepspeed,
        config.grpo.tasks_per_step * config.grpo.num_generations,
        [name for _, name in retrieval_names],
    )
    model = model_shape(config.model.name_or_path, "model.name_or_path", config)
    retrieval = [model_shape(name, key) for key, name in retrieval_names]
    return plan_layout(model, profile, run_settings(config), layout, gpu, retrieval)


def refuse_if_cannot_fit(config: Config, processes: int, deepspeed: bool) -> None:
    """Raise `PlanError` with the plan's numbers when this run cannot fit its GPU (CUDA only;
    `run.preflight: false` skips it)."""
    if not config.run.preflight:
        return
    plan = preflight(config, processes, deepspeed)
    if plan is None or plan.fits:
        return
    parts = ", ".join(
        f"{name} {value / GiB:.1f}"
        for name, value in plan.trainer.items()
        if value and name != "peak"
    )
    budget = (1 - FRAGMENTATION) * plan.gpu.memory_bytes
    raise PlanError(
        f"this run cannot fit its GPU: a training process peaks at "
        f"{plan.trainer['peak'] / GiB:.1f} GiB of the {budget / GiB:.1f} GiB usable ({parts}; "
        f"GiB, rows of up to `rollout.vllm_max_model_len` = {config.rollout.vllm_max_model_len} "
        f"tokens). To fit: {'; '.join(plan.advice) or 'a larger GPU'}. `lexrl plan CONFIG` "
        "shows the whole plan; `--run.preflight false` skips this check"
    )


def engine_gpu_memory_utilization(config: Config, processes: int, device_bytes: int) -> float:
    """`rollout.vllm_gpu_memory_utilization` when the config leaves it to the plan: what a
    colocated engine needs for this process's concurrent episodes at `vllm_max_model_len`."""
    if config.rollout.vllm_gpu_memory_utilization is not None:
        return config.rollout.vllm_gpu_memory_utilization
    model = model_shape(config.model.name_or_path, "model.name_or_path", config)
    trajectories = config.grpo.tasks_per_step * config.grpo.num_generations
    sequences = min(math.ceil(trajectories / processes), config.rollout.max_concurrent_episodes)
    return engine_memory_fraction(model, sequences, config.rollout.vllm_max_model_len, device_bytes)


def resolve_engine_memory(config: Config, processes: int) -> None:
    """Fill `rollout.vllm_gpu_memory_utilization` from the plan when the config leaves it unset
    and a colocated engine will run on a GPU (before the backend is built; the saved config
    then records the value used)."""
    rollout = config.rollout
    if rollout.backend != "vllm-engine" or rollout.vllm_gpu_memory_utilization is not None:
        return
    memory = device_memory_bytes()
    if memory is not None:
        rollout.vllm_gpu_memory_utilization = engine_gpu_memory_utilization(
            config, processes, memory
        )
