"""Options of the LEXam environment (Fan et al. 2025, "LEXam: Benchmarking Legal
Reasoning on 340 Law Exams", arXiv:2505.12864)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lexrl.options import AT_LEAST_0, AT_LEAST_1, HELD_OUT, SEED
from lexrl.registry import EnvConfig, register_env
from lexrl.rewards.judge_config import JudgeConfig

if TYPE_CHECKING:
    from lexrl.envs.base import Env


@register_env("lexam")
@dataclass
class LexamEnvConfig(EnvConfig):
    """LEXam law-exam questions: MCQ by answer marker, open ones by LLM judges."""

    source: str = "sample"
    """`sample` (the attributed English sample shipped with lexrl), a Hugging Face Hub dataset id
    (`LEXam-Benchmark/LEXam`), or a local file or folder (parquet, JSONL, CSV or the release's
    xlsx)."""
    config: str = "mcq_4_choices"
    """`mcq_4_choices`, `mcq_8_choices`, `mcq_16_choices`, `mcq_32_choices` or `open_question`."""
    hub_split: str = "test"
    """The Hub split read (LEXam publishes `test`, and `dev` for open questions)."""
    language: str = "en"
    """`en`, `de`, or empty for both."""
    eval_fraction: float = 0.3
    """Share of the questions held out for evaluation (LEXam has no training split; `split` says
    how it is carved out). At most 0.5 (`lexrl.envs.data.split_by_group`)."""
    split: str | None = None
    """How the held-out questions are chosen. `course`: whole courses (docs/sources.md: carve
    by course, never by question; `split_by_course`). `facts`: each course in proportion, whole
    groups of questions that share a statement or context at a time (`split_by_facts`). None:
    `facts` for the shipped MCQ sample, whose English questions are 130 of one course and 20
    of three others with a different answer shape (the shortest option right on 0.70 of them,
    on 0.25 of the 130), so no course split can be held out like the training questions;
    `course` for any other source, the shipped open questions (14 courses) included."""
    split_seed: int = 0
    """Seed of the split: the same seed gives the same held-out questions."""
    workflow: str = "single"
    """`single`: the paper's examinee answers. `draft_review`: the policy drafts an answer, then
    reviews its draft as the `reviewer` role and gives the final answer (two agents, one
    policy)."""
    prompt: str = "paper"
    """MCQ examinee prompt: `paper` (LEXam App. E.4: step-by-step legal reasoning ending in
    `Correct Answer: ###C###`) or `brief` (the marked label alone, after one worked example
    exchange; for a model too small to follow the paper's prompt, the CPU demo's way in)."""
    max_new_tokens: int | None = None
    """Tokens per answer; None: `rollout.max_new_tokens`."""
    teacher_max_words: int | None = None
    """The scripted teacher's open answers (warm-start): the reference answer's first this many
    words; None: all of it. A reference longer than the answer cap (`max_new_tokens`) teaches
    text the policy never gets to write, and the longest row sets the length of every padded
    warm-start batch it lands in."""
    format_weight: float = 0.0
    """Weight of the MCQ `format` reward component: the answer's chance-normalised accuracy (1
    right, -1/(k-1) wrong among k options), a reply without a `###X###` marker counted as wrong,
    never more than a marked wrong answer (`lexam.reward.mcq_reward`). 0 is the paper's reward, accuracy alone
    (docs/sources.md). A guess earns 0 from the component in expectation, so a constant letter
    cannot live on it: at weight 0.5 it earns 1/6 of the teacher's reward on balanced gold
    letters, where a flat credit for any marker paid it half (docs/benchmarks.md)."""
    chance_normalised: bool = False
    """MCQ `correct` as (acc - 1/k) / (1 - 1/k), k the number of options (docs/sources.md),
    so questions with different option counts weigh alike."""
    judges: list[JudgeConfig] = field(default_factory=list)
    """Open questions: the judge endpoints (paper: GPT-4o, DeepSeek-V3, Qwen3-32B). Empty: the
    policy judges as its `judge` role."""
    judge_aggregate: str = "min"
    """How the judges' scores combine per answer: `min` (the paper's ensemble) or `mean`."""
    judge_trainable: bool = False
    """With the policy as judge: whether its `judge` turns are trained (they get the episode's
    advantage, like every other role)."""
    judge_cache_dir: str = ".lexrl_cache/judge"
    """On-disk cache of judge replies keyed by model, messages and sampling: a re-evaluation
    or a resumed run pays for no judge call twice."""
    judge_max_parse_retries: int = 2
    """With the policy as judge: times an unparsable judgment is re-asked with the reason."""

    CHOICES = {
        "config": (
            "mcq_4_choices",
            "mcq_8_choices",
            "mcq_16_choices",
            "mcq_32_choices",
            "open_question",
        ),
        "language": ("en", "de", ""),
        "split": (None, "course", "facts"),
        "workflow": ("single", "draft_review"),
        "prompt": ("paper", "brief"),
        "judge_aggregate": ("min", "mean"),
    }
    BOUNDS = {
        "eval_fraction": HELD_OUT,
        "split_seed": SEED,
        "max_new_tokens": AT_LEAST_1,
        "teacher_max_words": AT_LEAST_1,
        "format_weight": AT_LEAST_0,
        "judge_max_parse_retries": AT_LEAST_0,
    }

    def build(self) -> Env:
        from lexrl.envs.lexam.env import LexamEnv

        return LexamEnv.from_config(self)
