"""Options of the LEXam environment (Fan et al. 2025, "LEXam: Benchmarking Legal
Reasoning on 340 Law Exams", arXiv:2505.12864)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lexrl.env_options import HeldOutSplit, JudgeEnsemble, TurnTokens
from lexrl.options import AT_LEAST_0, AT_LEAST_1
from lexrl.registry import EnvConfig, register_env
from lexrl.rewards.judge_config import JudgeConfig

if TYPE_CHECKING:
    from lexrl.envs.base import Env


@register_env("lexam")
@dataclass
class LexamEnvConfig(EnvConfig, JudgeEnsemble, TurnTokens, HeldOutSplit):
    """LEXam law-exam questions: MCQ by answer marker, open ones by LLM judges.

    Shares `HeldOutSplit` (`eval_fraction`, `split_seed`: LEXam has no training split, `split`
    says how the held-out questions are carved out), `TurnTokens` (`max_new_tokens` per answer)
    and `JudgeEnsemble` (`judge_aggregate`, `judge_cache_dir`) of `lexrl.env_options`."""

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
    split: str | None = None
    """How the held-out questions are chosen. `course`: whole courses (docs/sources.md: carve
    by course, never by question; `split_by_course`). `facts`: each course in proportion, whole
    groups of questions that share a statement or context at a time (`split_by_facts`). None:
    `facts` for the shipped MCQ sample, whose English questions are 130 of one course and 20
    of three others with a different answer shape (the shortest option right on 0.70 of them,
    on 0.25 of the 130), so no course split can be held out like the training questions;
    `course` for any other source, the shipped open questions (14 courses) included."""
    workflow: str = "single"
    """`single`: the paper's examinee answers. `draft_review`: the policy drafts an answer, then
    reviews its draft as the `reviewer` role and gives the final answer (two agents, one
    policy)."""
    prompt: str = "paper"
    """MCQ examinee prompt: `paper` (LEXam App. E.4: step-by-step legal reasoning ending in
    `Correct Answer: ###C###`) or `brief` (the marked label alone, after one worked example
    exchange; for a model too small to follow the paper's prompt, the CPU demo's way in)."""
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
    judge_trainable: bool = False
    """With the policy as judge: whether its `judge` turns are trained (they get the episode's
    advantage, like every other role)."""
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
    }
    BOUNDS = {
        "teacher_max_words": AT_LEAST_1,
        "format_weight": AT_LEAST_0,
        "judge_max_parse_retries": AT_LEAST_0,
    }

    def build(self) -> Env:
        from lexrl.envs.lexam.env import LexamEnv

        return LexamEnv.from_config(self)
