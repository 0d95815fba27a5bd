"""The memory and time plan of a GRPO run: what each process holds at its peak, part by part, and
how long an update takes, predicted from shapes and token counts before anything is loaded.

Pure arithmetic over `ModelShape`, `Gpu`, `TokenProfile` and the run's settings; `lexrl plan`
prints it (`lexrl.train.plan_report`) and `lexrl train` on CUDA refuses a configuration whose
plan does not fit. Every constant that is not a shape is an assumption, named here with where
it comes from; the activation model is checked against measured peaks of a real
`Learner.update` on the CPU by `scripts/bench_update_memory.py` (docs/benchmarks.md).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

GiB = 2**30

CUDA_CONTEXT_BYTES = int(0.5 * GiB)
"""The CUDA context and cuBLAS workspaces of a process (an assumption: about 0.3-0.6 GiB on
recent drivers, not measured here)."""
ENGINE_CUDA_CONTEXT_BYTES = CUDA_CONTEXT_BYTES
"""A colocated vLLM engine's own CUDA context on the trainer's GPU: vLLM's V1 `LLM` runs its
engine core in a process of its own (`VLLM_ENABLE_V1_MULTIPROCESSING`, on by default), which
makes a context of its own beside the trainer's; sleep mode keeps it. The same assumption as
`CUDA_CONTEXT_BYTES`."""
VLLM_OVERHEAD_BYTES = int(1.0 * GiB)
"""A vLLM engine's own activations, sampler buffers and CUDA graphs beside weights and KV blocks
(vLLM's profiling run reserves about this much for a 4B model at 2-4k tokens)."""
VLLM_ASLEEP_BYTES = int(0.25 * GiB)
"""What a colocated engine keeps on the GPU asleep at level 1 (weights offloaded to CPU memory,
KV blocks dropped): its allocator pools and graph handles."""
FRAGMENTATION = 0.10
"""Share of the GPU kept free for allocator fragmentation: the plan fits when its peak is at most
90% of the device."""
MATMUL_EFFICIENCY = 0.40
"""Achieved share of the GPU's dense bf16 peak in the prefill's matmuls (an assumption: vLLM's
prefill of long prompts runs large dense matmuls, below large-batch pre-training's 50-60%)."""
UPDATE_RATES_FILE = Path(__file__).with_name("update_rates.json")
"""The update's achieved share of each GPU kind's dense bf16 peak (`update_flops` over its
seconds), measured: `scripts/update_rates.py` computes it from the lines `scripts/gpu_bench.sh`
wrote on lent GPUs (docs/data/) and writes this file; each kind names its lines. A random
Qwen3-4B in bf16, sdpa, peft LoRA r 16 on every projection, 64 rows of 1,500 + 200 tokens,
micro-batches of 8,192 tokens, the mean of checkpointing on and off: peft's float32 LoRA path,
the row-sized matmuls and the chunked log-probs keep it at about half of what a dense
pre-training step reaches."""
UPDATE_RATES: dict[str, dict] = json.loads(UPDATE_RATES_FILE.read_text())
ASSUMED_FROM = "h200"
"""The measured kind whose rate a GPU without a measurement is planned at (and says so)."""
UPDATE_EFFICIENCY = UPDATE_RATES[ASSUMED_FROM]["update_efficiency"]
"""The rate of a GPU kind without a measurement of its own: `ASSUMED_FROM`'s."""
PREFIX_GROUPER_THROUGHPUT = 0.70
"""Tokens per second of a shared-prefix update (`grpo.shared_prefix`) as a share of the repeated
form's, per token it encodes: Prefix Grouper's attention gathers each pack's prefix and suffixes
and runs two attention calls with copied keys, where the repeated form runs one fused call. On
the H200 (`scripts/gpu_bench.sh`): 0.67-0.73 over first calls alone and four calls, with and
without checkpointing."""
PREFIX_GROUPER_ACTIVATIONS = 1.31
"""What a decoder layer of the shared-prefix update (`grpo.shared_prefix`) keeps for its backward,
per position it encodes, as a multiple of `layer_activation_bytes`. Prefix Grouper's attention
keeps each suffix's keys and values with their copy of the prefix, repeated to every query head,
the attention output gathered back into place, and its masks. Measured as the slope over layers
of the update's peak (`scripts/gpu_bench.py --layers 2` and `6`, no checkpointing, H100): 2,212
MiB a layer for about 7,800 positions against the repeated form's 1,477 for 6,800, 1.31x; on the
CPU, counting the tensors autograd saves, 1.33x (docs/benchmarks.md)."""
BANDWIDTH_EFFICIENCY = 0.60
"""Achieved share of the GPU's memory bandwidth while decoding (weights and KV read per step)."""
ADAPTER_DISK_BYTES_PER_S = 1.0e9
"""How fast the trainer writes the adapter's files and an engine reads them back after each
update (an assumption: a local SSD or the page cache, about 1 GB/s either way)."""
ADAPTER_LOAD_S = 0.1
"""An engine's fixed cost of switching to a new LoRA adapter beside reading its file (an
assumption: vLLM builds its LoRA slots on the first request that names the adapter)."""
SHARED_PREFIX_FRACTION = 0.5
"""Default share of a later call's prompt that the K trajectories of a task share (their common
prefix), for token counts given as `--tokens`; the first call's prompt is shared whole. The
statute env renders every call afresh as the role's instructions, then the question
(`StatuteEnv.planner_message`, `run_agent`): a rewrite agent's prompt is its instructions and
the question only, so it is shared whole by the trajectories that call that agent at that turn;
the planner's later prompts are shared up to its list of agents already used, and what follows
(the emitted queries and the candidates' names) differs. Measured on the built-in demo world
(16 tasks x K = 8 episodes of the scripted teacher, which picks agents at random; `tiny`'s
tokenizer), a later call's rows share 69% of their prompt with their group; half leaves room
for the longer histories and candidate lists of 1,500-token prompts. Measured on trajectories
(`--trajectories`), the share replaces this assumption."""


@dataclass(frozen=True)
class ModelShape:
    """The widths of a decoder-only transformer that memory and FLOPs depend on."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool = True

    @classmethod
    def from_hf_config(cls, config: object) -> ModelShape:
        heads = config.num_attention_heads
        return cls(
            layers=config.num_hidden_layers,
            hidden=config.hidden_size,
            intermediate=config.intermediate_size,
            heads=heads,
            kv_heads=getattr(config, "num_key_value_heads", None) or heads,
            head_dim=getattr(config, "head_dim", None) or config.hidden_size // heads,
            vocab=config.vocab_size,
            tied=bool(getattr(config, "tie_word_embeddings", False)),
        )

    @property
    def attention_width(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_dim

    def layer_params(self) -> int:
        attention = self.hidden * (2 * self.attention_width + 2 * self.kv_width)
        return attention + 3 * self.hidden * self.intermediate + 2 * self.hidden

    def params(self) -> int:
        embeddings = self.vocab * self.hidden * (1 if self.tied else 2)
        return embeddings + self.layers * self.layer_params() + self.hidden

    def lora_params(self, rank: int, targets: list[str] | tuple[str, ...]) -> int:
        """r x (in + out) per targeted projection and layer (Qwen / Llama module names)."""
        shapes = {
            "q_proj": (self.hidden, self.attention_width),
            "k_proj": (self.hidden, self.kv_width),
            "v_proj": (self.hidden, self.kv_width),
            "o_proj": (self.attention_width, self.hidden),
            "gate_proj": (self.hidden, self.intermediate),
            "up_proj": (self.hidden, self.intermediate),
            "down_proj": (self.intermediate, self.hidden),
        }
        return self.layers * sum(rank * sum(shapes[t]) for t in targets if t in shapes)

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return self.layers * 2 * self.kv_width * dtype_bytes


QWEN3_4B = ModelShape(36, 2560, 9728, 32, 8, 128, 151_936, tied=True)
"""Qwen3-4B (and its Instruct-2507): config.json of the release."""
RERANKER_4B_SEQ_CLS = ModelShape(36, 2560, 9728, 32, 8, 128, 151_669, tied=True)
"""tomaarsen/Qwen3-Reranker-4B-seq-cls: Qwen3-Reranker-4B's decoder and embedding (config.json
of Qwen/Qwen3-Reranker-4B) under a 1 x 2,560 score head (negligible) instead of the LM head."""
KNOWN_SHAPES = {
    "Qwen/Qwen3-4B-Instruct-2507": QWEN3_4B,
    "Qwen/Qwen3-4B": QWEN3_4B,
    "Qwen/Qwen3-8B": ModelShape(36, 4096, 12288, 32, 8, 128, 151_936, tied=False),
    "Qwen/Qwen3-1.7B": ModelShape(28, 2048, 6144, 16, 8, 128, 151_936, tied=True),
    "Qwen/Qwen3-0.6B": ModelShape(28, 1024, 3072, 16, 8, 128, 151_936, tied=True),
    "Qwen/Qwen3-Embedding-4B": ModelShape(36, 2560, 9728, 32, 8, 128, 151_665, tied=True),
    "Qwen/Qwen3-Embedding-0.6B": ModelShape(28, 1024, 3072, 16, 8, 128, 151_669, tied=True),
    "Qwen/Qwen3-Reranker-4B": ModelShape(36, 2560, 9728, 32, 8, 128, 151_669, tied=True),
    # The sequence-classification conversion keeps the whole token embedding (its input) and
    # swaps the 151,669-row LM head for a one-row score head, which `tied` stands for.
    "tomaarsen/Qwen3-Reranker-4B-seq-cls": RERANKER_4B_SEQ_CLS,
    "Qwen/Qwen3-Reranker-0.6B": ModelShape(28, 1024, 3072, 16, 8, 128, 151_669, tied=True),
}
"""Shapes of models a plan may name without their files (config.json of each release)."""


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_bytes: int
    bf16_tflops: float
    """Dense bf16 tensor-core peak (no sparsity), from the vendor's data sheet."""
    bandwidth_tbs: float
    update_efficiency: float = UPDATE_EFFICIENCY
    """The update's achieved share of `bf16_tflops` where measured on this GPU, else the H200's
    (`UPDATE_EFFICIENCY`)."""
    update_measured: str = ""
    """Where `update_efficiency` was measured (`update_rates.json`); empty: assumed."""


def _measured(gpu: Gpu, kind: str) -> Gpu:
    rate = UPDATE_RATES.get(kind)
    if rate is None:
        return gpu
    return dataclasses.replace(
        gpu, update_efficiency=rate["update_efficiency"], update_measured=rate["measured"]
    )


GPUS = {
    kind: _measured(gpu, kind)
    for kind, gpu in {
        "rtx4090": Gpu("RTX 4090", 24 * GiB, 165.2, 1.008),
        "h100": Gpu("H100 SXM", 80 * GiB, 989.0, 3.35),
        "h200": Gpu("H200", 140 * GiB, 989.0, 4.8),
    }.items()
}
"""Memory as CUDA reports it (a "24 GB" 4090 has 24 GiB); speeds from the data sheets; the
update's rate from `UPDATE_RATES_FILE` where measured."""


MAX_GPU_MEMORY_GIB = 1024
"""The most `--gpu-memory` a plan takes: 1 TiB, several times the largest GPU's today (an NVIDIA
B300, 288 GB), so a typo in the unit (bytes, MiB) is caught instead of planned."""
MAX_GPUS = 72
"""The most `--gpus` a plan takes: the GPUs of one NVLink domain (an NVIDIA GB200 NVL72). A plan
is of one machine; several machines are planned one machine at a time."""


def gpu_for(memory_gib: float | None, name: str | None = None) -> Gpu:
    """The named GPU, or the one whose memory `--gpu-memory` gives (24: an RTX 4090, 80: an
    H100, more: an H200), with its memory set to exactly `memory_gib` GiB (at least 1: a plan
    divides by it)."""
    # Written as what passes, so that NaN fails too.
    if memory_gib is not None and not 1 <= memory_gib <= MAX_GPU_MEMORY_GIB:
        raise ValueError(
            f"--gpu-memory {memory_gib:g}: give the GPU's memory in GiB, from 1 to "
            f"{MAX_GPU_MEMORY_GIB} (e.g. 24, 80)"
        )
    if name is None:
        if memory_gib is None:
            name = "h100"
        else:
            name = "rtx4090" if memory_gib <= 32 else "h100" if memory_gib <= 96 else "h200"
    if name not in GPUS:
        raise ValueError(f"unknown GPU {name!r}; one of {', '.join(GPUS)}")
    gpu = GPUS[name]
    if memory_gib is None:
        return gpu
    return dataclasses.replace(gpu, memory_bytes=int(memory_gib * GiB))


@dataclass
class TokenProfile:
    """The trainable turns of a step's trajectories, as (prompt, completion) token counts."""

    turns: list[tuple[int, int]]
    """One (prompt tokens, completion tokens) pair per trainable turn of the sample."""
    trajectories: int
    """Trajectories the sample's turns come from."""
    source: str
    """Where the counts come from, printed with the plan."""
    repeated_prefix_tokens: int = 0
    """Prompt tokens of turns that repeat an earlier turn of the same trajectory verbatim (its
    prompt and completion): what training a trajectory's turns as one sequence would save."""
    worst_case: bool = False
    """The counts are the configuration's caps, not a rollout's."""
    shared_prefix_tokens: float | None = None
    """Prompt tokens (over all `trajectories`) that a group's other rows already hold: for the
    rows of one task at one call, (rows - 1) x their common prompt prefix, summed. What encoding
    a shared prefix once (`grpo.shared_prefix`, Prefix Grouper) saves; None: unknown."""
    shared_prefix_by_env: dict[str, float | None] = field(default_factory=dict)
    """The shared-prefix share of each env's trained tokens (None: its trajectories carry no
    token ids), when the counts come from trajectories."""
    shared_prefix_note: str = ""
    """How the shared prefixes were counted (measured, or the assumption made)."""
    shared_row_share: float = 0.0
    """The mean share of a row's prompt that is its group's common prefix (prompt tokens
    weighted; rows alone at their call count 0): what each further row of a group in one
    micro-batch does not hold again."""

    @property
    def prompt_tokens(self) -> int:
        return sum(p for p, _ in self.turns)

    @property
    def shared_prefix_share(self) -> float | None:
        """Shared-prefix tokens as a share of trained tokens (None: unknown)."""
        if self.shared_prefix_tokens is None:
            return None
        return self.shared_prefix_tokens / max(self.tokens, 1)

    @property
    def shared_prompt_share(self) -> float:
        """Shared-prefix tokens as a share of prompt tokens (0 when unknown): what the update
        need not encode again when a group's rows are encoded together."""
        return (self.shared_prefix_tokens or 0) / max(self.prompt_tokens, 1)

    @property
    def turns_per_trajectory(self) -> float:
        return len(self.turns) / max(self.trajectories, 1)

    @property
    def tokens(self) -> int:
        return sum(p + c for p, c in self.turns)

    @property
    def completion_tokens(self) -> int:
        return sum(c for _, c in self.turns)

    def longest(self) -> tuple[int, int]:
        return max(self.turns, key=sum)


@dataclass
class Layout:
    """How a run's processes and GPUs are arranged."""

    name: str
    gpus: int
    trainers: int
    """Training processes, one GPU each."""
    backend: str
    """`hf`, `vllm-engine` (an engine colocated in each trainer) or `vllm-server`."""
    server_gpus: int = 0
    zero2: bool = False
    trajectories_per_step: int = 16
    retrieval_in_process: list[str] = field(default_factory=list)
    """Retrieval models each training process loads (none when they are served)."""
    retrieval_gpus: int = 0
    """GPUs that serve the retrieval models, one model each."""
    note: str = ""


@dataclass
class RunSettings:
    """The parts of a config the plan reads."""

    dtype_bytes: int
    lora_rank: int
    lora_targets: list[str]
    micro_batch_size: int
    micro_batch_tokens: int | None
    gradient_checkpointing: bool
    logprob_chunk_tokens: int
    max_new_tokens: int
    vllm_max_model_len: int
    max_concurrent_episodes: int
    max_batch_size: int
    importance_sampling: str
    """`grpo.importance_sampling`: anything but `none` adds a forward pass for pi_old."""
    beta: float
    shared_prefix: bool = False
    """`grpo.shared_prefix`: the update encodes a group's shared prompt prefix once."""
    overlap: bool = False
    """`rollout.overlap`: the servers sample the next step while the trainers update."""


def common_prefix_length(prompts: list[list[int]]) -> int:
    """Tokens at the start of every one of `prompts` (0 for none)."""
    if not prompts:
        return 0
    length = min(len(p) for p in prompts)
    first = prompts[0]
    for index in range(length):
        if any(p[index] != first[index] for p in prompts[1:]):
            return index
    return length


def group_shared_tokens(prompts: list[list[int]]) -> int:
    """Prompt tokens that encoding the common prefix of one group's rows (one task, one call)
    once saves: (rows - 1) x the common prefix, in tokens."""
    if len(prompts) < 2:
        return 0
    return (len(prompts) - 1) * common_prefix_length(prompts)


def assumed_shared_prefix(
    turns: int, prompt: int, generations: int, fraction: float
) -> tuple[float, float]:
    """(shared-prefix tokens per trajectory, a row's shared share of its prompt) when each of a
    trajectory's `turns` calls has `prompt` tokens, the first call's prompt is the same in all K
    = `generations` trajectories of the task and a later call's first `fraction` of it is. A
    group of K rows saves (K - 1) common prefixes, so per trajectory (K - 1) / K of the row's."""
    if not 0 <= fraction <= 1:
        raise ValueError(f"--shared-prefix {fraction:g}: give a fraction from 0 to 1")
    row_share = (1 + (turns - 1) * fraction) / turns
    return (generations - 1) / generations * turns * prompt * row_share, row_share


ALL_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def layer_activation_bytes(
    model: ModelShape, rows: int, sequence: int, lora_targets: tuple[str, ...] = ALL_PROJECTIONS
) -> int:
    """What one decoder layer keeps for its backward, for `rows` x `sequence` tokens.

    Per token, the saved tensors of a Qwen3 layer with its base frozen (a frozen projection
    keeps nothing: its input gradient needs only its weight): the two RMSNorms' float32 inputs
    (2 x 4H bytes) and the q / k RMSNorms' (4 (A + KV)); q, k and v as the attention sees them,
    k and v repeated to every query head, and its output (4 x 2A; plus a float32 log-sum-exp a
    head); the MLP's gate (SiLU's input) and the two factors of its product (3 x 2I); and each
    LoRA'd projection's input in float32, which peft casts to the adapter's float32 and keeps
    for the LoRA A gradient (4H for q, k, v, gate and up, 4A for o, 4I for down). Measured on
    the CPU for Qwen3-4B's widths: within 5% (scripts/bench_update_memory.py).
    """
    h, a, kv, i = model.hidden, model.attention_width, model.kv_width, model.intermediate
    lora_inputs = {"o_proj": 4 * a, "down_proj": 4 * i}
    per_token = 2 * 4 * h + 4 * (a + kv) + 4 * 2 * a + 4 * model.heads + 3 * 2 * i
    per_token += sum(lora_inputs.get(name, 4 * h) for name in lora_targets)
    return rows * sequence * per_token


def attention_backward_bytes(model: ModelShape, rows: int, sequence: int, attention: str) -> int:
    """The transient of one layer's attention backward: none for flash attention on a GPU; the
    CPU's scaled-dot-product backward builds a [rows, heads, sequence, sequence] matrix in the
    activations' bf16 (fitted to the measured peaks of scripts/bench_update_memory.py)."""
    if attention != "cpu":
        return 0
    return rows * model.heads * sequence * sequence * 2


def activation_bytes(
    model: ModelShape,
    rows: int,
    sequence: int,
    checkpointing: bool,
    lora_targets: tuple[str, ...] = ALL_PROJECTIONS,
    per_position: float = 1.0,
) -> int:
    """Activations a micro-batch keeps from its forward until its backward: every layer's set
    (`layer_activation_bytes`, times `per_position`: `PREFIX_GROUPER_ACTIVATIONS` for the
    grouped attention), or with checkpointing only each layer's input (2H a token)."""
    if checkpointing:
        return model.layers * rows * sequence * 2 * model.hidden
    layer = layer_activation_bytes(model, rows, sequence, lora_targets)
    return model.layers * int(layer * per_position)


def logprob_bytes(
    model: ModelShape, rows: int, sequence: int, completion: int, chunk_tokens: int
) -> int:
    """The chunked log-probs' peak: the decoder's final hidden states (rows x sequence x H, bf16),
    and in the backward of one chunk of `chunk_tokens` completion positions three float32
    [chunk, vocab] tensors alive at once (the recomputed log-softmax, the gradient flowing into
    it and the one it returns; 12 bytes a logit, measured on the CPU)."""
    chunk = min(chunk_tokens, rows * completion)
    return rows * sequence * model.hidden * 2 + chunk * model.vocab * 3 * 4


def lora_state_bytes(model: ModelShape, rank: int, targets: list[str], processes: int) -> int:
    """LoRA weights, gradients and AdamW moments, all float32 (peft keeps adapters in float32 on
    a bf16 base); ZeRO-2 partitions the gradients and moments over `processes` (1: plain DDP)."""
    params = model.lora_params(rank, targets)
    return params * 4 + params * 12 // processes


def update_memory(
    model: ModelShape,
    rows: int,
    sequence: int,
    completion: int,
    lora_rank: int,
    checkpointing: bool,
    attention: str = "flash",
    chunk_tokens: int = 512,
    lora_targets: tuple[str, ...] = ALL_PROJECTIONS,
    shared_tokens: int = 0,
    grouped_attention: bool = False,
) -> dict[str, int]:
    """Bytes an update of one micro-batch adds above the loaded model, by part, and `total`,
    its peak. The backward runs the log-probs' chunks first, then the layers from the last; with
    checkpointing a layer's activations are rebuilt (`recomputed_layer`) only after the chunks
    are done. So the peak holds, beside what the forward kept, the larger of the log-prob
    buffers and one layer's backward (its rebuilt activations and its attention's transient).

    `shared_tokens`: tokens of the rows x `sequence` that are a prefix another row of the
    micro-batch already holds (`grpo.shared_prefix`): the per-token parts count only the rest.
    `grouped_attention`: the layers run Prefix Grouper's attention (`grpo.shared_prefix`), which
    keeps `PREFIX_GROUPER_ACTIVATIONS` times as much a position."""
    tokens = rows * sequence - shared_tokens
    per_position = PREFIX_GROUPER_ACTIVATIONS if grouped_attention else 1.0
    layer = int(layer_activation_bytes(model, 1, tokens, lora_targets) * per_position)
    # Every per-token part is linear in the tokens, so one row of `tokens` stands for them.
    parts = {
        "activations": activation_bytes(
            model, 1, tokens, checkpointing, lora_targets, per_position
        ),
        "logprobs": logprob_bytes(model, rows, sequence, completion, chunk_tokens)
        - shared_tokens * model.hidden * 2,
        "recomputed_layer": layer if checkpointing else 0,
        "attention_backward": attention_backward_bytes(model, rows, sequence, attention),
        "lora_gradients": model.lora_params(lora_rank, list(lora_targets)) * 4,
    }
    layer_backward = parts["recomputed_layer"] + parts["attention_backward"]
    backward = max(parts["logprobs"], layer_backward)
    return {**parts, "total": parts["activations"] + backward + parts["lora_gradients"]}


def largest_micro_batch(
    profile: TokenProfile, settings: RunSettings, rows_available: int
) -> tuple[int, int, int]:
    """(rows, padded sequence, completion width) of the largest micro-batch the learner can
    build: rows of the longest prompt with a completion at the cap (`max_new_tokens`), as many
    as `micro_batch_size` allows, or the token budget (`split_micro_batches` never exceeds it
    unless one row alone does), and no more than the process has."""
    prompt = max(p for p, _ in profile.turns)
    completion = max(max(c for _, c in profile.turns), settings.max_new_tokens)
    sequence = prompt + completion
    if settings.micro_batch_tokens is None:
        rows = settings.micro_batch_size
    else:
        rows = max(1, settings.micro_batch_tokens // sequence)
    return max(1, min(rows, rows_available)), sequence, completion


def largest_shared_micro_batch(
    profile: TokenProfile, settings: RunSettings, rows_available: int
) -> tuple[int, int, int, int]:
    """`largest_micro_batch` with `grpo.shared_prefix` (lexrl/train/shared_prefix.py): rows of
    one group packed after their common prefix, each further row holding only its suffix
    (`profile.shared_row_share` of its prompt shared). `micro_batch_tokens` then counts packed
    tokens, so the learner fills the budget with more rows and the peak stays near it; with
    `micro_batch_size` alone the rows are as many and hold fewer tokens. Returns (rows, padded
    row length, completion width, tokens the packing does not hold again)."""
    rows, sequence, completion = largest_micro_batch(profile, settings, rows_available)
    prefix = int((sequence - completion) * profile.shared_row_share)
    if settings.micro_batch_tokens is not None and sequence > prefix:
        # rows x sequence - (rows - 1) x prefix <= budget
        packed = (settings.micro_batch_tokens - prefix) // (sequence - prefix)
        rows = max(1, min(max(rows, packed), rows_available))
    return rows, sequence, completion, (rows - 1) * prefix


def update_flops(
    model: ModelShape, prompt: int, completion: int, settings: RunSettings, shared: float = 0
) -> float:
    """FLOPs to train one turn of `prompt` + `completion` tokens: the decoder's forward (2 x
    params a token, plus causal attention), its backward to the inputs only (the base is frozen:
    the same again; LoRA's weight gradients are negligible), a second forward with checkpointing,
    one more without gradients for pi_old (importance sampling) and one for the reference (KL),
    and the vocabulary projection of the completion positions: forward, the chunk's recompute
    and its backward. `shared`: prompt tokens another row of the group already encodes
    (`grpo.shared_prefix`), which the decoder passes skip; the rest still attend to them."""
    tokens = prompt + completion
    layers = model.layers * model.layer_params()
    attention = 2 * model.layers * model.attention_width * tokens  # per token, causal: QK + PV
    forward = (tokens - shared) * (2 * layers + attention)
    passes = 2 + settings.gradient_checkpointing + (settings.importance_sampling != "none")
    passes += settings.beta > 0
    head = completion * 2 * model.vocab * model.hidden * 3
    return forward * passes + head


def update_seconds(
    model: ModelShape, profile: TokenProfile, settings: RunSettings, layout: Layout, gpu: Gpu
) -> float:
    """One update on one training GPU, in seconds: its share of the step's trainable turns, at
    `Gpu.update_efficiency` of the GPU's bf16 peak; with `grpo.shared_prefix` each turn's prompt
    less the profile's shared share of it (a group's rows encoded together, Prefix Grouper), at
    `PREFIX_GROUPER_THROUGHPUT` of that rate."""
    share = layout.trajectories_per_step / layout.trainers / max(profile.trajectories, 1)
    shared = profile.shared_prompt_share if settings.shared_prefix else 0.0
    flops = sum(update_flops(model, p, c, settings, p * shared) for p, c in profile.turns)
    efficiency = gpu.update_efficiency * (PREFIX_GROUPER_THROUGHPUT if shared else 1.0)
    return flops * share / (gpu.bf16_tflops * 1e12 * efficiency)


def rollout_seconds(
    model: ModelShape, profile: TokenProfile, settings: RunSettings, layout: Layout, gpu: Gpu
) -> float:
    """The step's sampling on one engine, in seconds (`rollout_parts`, summed)."""
    return sum(rollout_parts(model, profile, settings, layout, gpu).values())


def rollout_parts(
    model: ModelShape, profile: TokenProfile, settings: RunSettings, layout: Layout, gpu: Gpu
) -> dict[str, float]:
    """The step's sampling on one engine (a colocated one, or one server GPU), in seconds: the
    `prefill` of every prompt at `MATMUL_EFFICIENCY`, and `decode` bound by memory bandwidth:
    the turns of a trajectory come one after another, the trajectories in parallel, and each
    decoding step reads the weights and every sequence's KV cache once. vLLM's prefix cache may
    skip some of a group's shared prefill; not counted (identical prompts sent together are not
    guaranteed a hit)."""
    engines = layout.server_gpus if layout.backend == "vllm-server" else layout.trainers
    sequences = layout.trajectories_per_step / engines
    share = sequences / max(profile.trajectories, 1)
    prefill_flops = sum(p for p, _ in profile.turns) * share * 2 * model.params()
    prefill = prefill_flops / (gpu.bf16_tflops * 1e12 * MATMUL_EFFICIENCY)
    steps = decode_steps(profile)
    context = sum(p + c / 2 for p, c in profile.turns) / max(len(profile.turns), 1)
    step_bytes = model.params() * 2 + sequences * context * model.kv_bytes_per_token()
    decode = steps * step_bytes / (gpu.bandwidth_tbs * 1e12 * BANDWIDTH_EFFICIENCY)
    return {"prefill": prefill, "decode": decode}


def decode_steps(profile: TokenProfile) -> float:
    """Decoding steps one after another in a step: a trajectory's calls in turn, each its
    completion's tokens (the trajectories decode side by side)."""
    return profile.turns_per_trajectory * profile.completion_tokens / max(len(profile.turns), 1)


def adapter_sync_seconds(model: ModelShape, settings: RunSettings) -> float:
    """Handing the updated adapter to a vLLM engine, in seconds: the trainer writes its float32
    LoRA weights, the engine reads them back (`ADAPTER_DISK_BYTES_PER_S` each way), and switches
    to them (`ADAPTER_LOAD_S`); `lexrl.train.trainer.sync_adapter` does this after every update."""
    size = model.lora_params(settings.lora_rank, settings.lora_targets) * 4
    return 2 * size / ADAPTER_DISK_BYTES_PER_S + ADAPTER_LOAD_S


def step_seconds(rollout: float, update: float, other: float, overlap: bool) -> tuple[float, str]:
    """A step in seconds and how it adds up: rollout + update + `other` (sleep, wake, adapter
    sync) one after the other, or with `overlap` (`rollout.overlap`: the servers sample the next
    step while the trainers update) max(rollout, update) + `other`."""
    if overlap:
        return max(rollout, update) + other, "max(rollout, update) + the rest (rollout.overlap)"
    return rollout + update + other, "rollout + update + the rest"
