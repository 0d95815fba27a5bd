"""Options of the statute env (LegalMALR: Li et al. 2026, arXiv:2601.17692;
STARD and CSAID)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lexrl.env_options import ChatEndpoint, with_defaults
from lexrl.errors import ConfigError
from lexrl.options import AT_LEAST_0, AT_LEAST_1
from lexrl.registry import EnvConfig, register_env
from lexrl.retrieval.options import RetrievalConfig

if TYPE_CHECKING:
    from lexrl.envs.base import Env

STATUTE_BASELINES = ("bm25", "bm25-stard", "dense", "dense+reranker")
"""Raw-query retrieval baselines `lexrl eval` can score beside the policy."""


@dataclass
@with_defaults(base_url="", api_key_env="OPENAI_API_KEY", max_tokens=256, timeout_s=120.0)
class FinalRerankerConfig(ChatEndpoint):
    """The zero-shot listwise reranker (`ChatEndpoint`: `base_url` as DashScope's
    `https://dashscope.aliyuncs.com/compatible-mode/v1` for Qwen-Max; its reply is a short JSON
    list with no chain of thought, hence 256 `max_tokens`)."""

    model: str = ""
    """Chat model of the zero-shot listwise reranker applied to the pool at evaluation (LegalMALR
    sec. 3.4 uses Qwen-Max); empty: the pool order is the final ranking."""
    max_retries: int = 2
    """Transport retries by the openai client (connection errors, timeouts, 408/409/429/5xx)
    and, separately, re-asks after an unparsable reply; then the pool order is kept and the
    query is recorded as failed."""
    top_k: int = 10
    """Candidates the model selects (LegalMALR: the end-to-end top-10)."""
    max_candidates: int = 30
    """Pool candidates shown, best first by pool order."""
    max_chars: int = 300
    """Characters of each candidate article shown."""

    BOUNDS = {"top_k": AT_LEAST_1, "max_candidates": AT_LEAST_1, "max_chars": AT_LEAST_1}

    def check(self, path: str, config: object) -> None:
        if self.model and not self.base_url:
            raise ConfigError(f"`{path}.model` is set but `base_url` is empty")


@dataclass
class StatuteEvalConfig:
    ks: list[int] = field(default_factory=lambda: [10])
    """End-to-end cut-offs of Recall/MRR/nDCG/Hit@K (LegalMALR reports K = 10)."""
    baselines: list[str] = field(default_factory=list)
    """Retrieval baselines scored on the raw query in the same run: `bm25` (the Lucene variant),
    `bm25-stard` (the STARD authors' scorer), `dense`, `dense+reranker` (the last two use
    `env.retrieval`'s models)."""
    final_reranker: FinalRerankerConfig = field(default_factory=FinalRerankerConfig)
    """The LLM reranker that turns the pool into the end-to-end ranking."""

    BOUNDS = {"ks[]": AT_LEAST_1}

    def check(self, path: str, config: object) -> None:
        for name in self.baselines:
            if name not in STATUTE_BASELINES:
                raise ConfigError(
                    f"`{path}.baselines` has {name!r}; expected some of "
                    f"{', '.join(STATUTE_BASELINES)}"
                )


@register_env("statute")
@dataclass
class StatuteEnvConfig(EnvConfig):
    """LegalMALR multi-agent statute retrieval: a planner and six rewrite agents."""

    dataset: str = "demo"
    """`demo` (the built-in synthetic statute world), `stard`, `csaid` or `jsonl` (files below)."""
    queries_path: str = ""
    """`stard`: the release's `queries.json`. `csaid`: the JSON dict of `{"query", "label",
    "label_length"}` keyed by query id (test split only). `jsonl`: a questions file with `{split}` in its name,
    one `{"id", "query", "gold": [article ids]}` a line."""
    split_path: str = ""
    """`stard`: `{"train": [query_id], "test": [...]}`; empty: the 1,234/309 split of later work,
    shipped with lexrl (the split of the LeCoQA release of STARD)."""
    corpus_path: str = ""
    """Corpus file: one `{"id", "name", "content"}` article a line (STARD's `corpus.jsonl`, and
    `jsonl`), or for `csaid` a JSON list of article strings. For `stard` and `csaid` it may be
    empty: the gold articles of the queries file are then the corpus, and reports say so."""
    allow_unmatched_gold: bool = False
    """`csaid`: continue when some gold labels match no corpus article (they are dropped, counted
    and reported); false stops with the count and examples."""
    stopwords_path: str = ""
    """Chinese BM25 stopwords, one a line; empty = STARD's list shipped with lexrl."""
    language: str = "en"
    """Prompt language: `en` or `zh`."""
    max_iterations: int = 4
    """Reformulation iterations before a forced exit (LegalMALR sec. 3.2: at most 4)."""
    first_stage_k: int = 30
    """Candidates fetched per emitted query (LegalMALR: dense top-30)."""
    final_k: int = 10
    """Candidates kept per query after the light reranker (LegalMALR: top-10)."""
    alpha: float = 0.1
    """Coverage-gain shaping coefficient (LegalMALR eq. 3; unspecified there, ours)."""
    step_penalty: float = 0.05
    """Penalty per planner step (LegalMALR eq. 4: -0.05 T)."""
    early_exit_penalty: float = 5.0
    """Penalty when the planner exits before any retrieval (LegalMALR eq. 4: -5)."""
    planner_temperature: float = 0.6
    """Planner sampling temperature (LegalMALR sec. 4.1)."""
    rewriter_temperature: float = 0.8
    """Rewrite-agent sampling temperature (LegalMALR sec. 4.1)."""
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    """First stage and light reranker behind every emitted query."""
    mas_k: int = 14
    """MAS-stage cut-off: the pool is truncated to this many candidates (LegalMALR Table 7)."""
    eval: StatuteEvalConfig = field(default_factory=StatuteEvalConfig)
    """What `lexrl eval` reports besides the policy's MAS stage: end-to-end cut-offs, raw-query
    baselines, the final LLM reranker."""
    reward_recall_k: int | None = None
    """Recall in the reward counts the first k pooled candidates; None = the whole pool (eq. 2).
    Setting it to `mas_k` rewards exactly what the MAS-stage evaluation measures."""

    RESUME_MAY_CHANGE = ("eval",)  # the evaluation's cut-offs, baselines and reranker
    CHOICES = {"language": ("en", "zh"), "dataset": ("demo", "stard", "csaid", "jsonl")}
    BOUNDS = {
        "max_iterations": AT_LEAST_1,
        "first_stage_k": AT_LEAST_1,
        "final_k": AT_LEAST_1,
        "alpha": AT_LEAST_0,
        "step_penalty": AT_LEAST_0,
        "early_exit_penalty": AT_LEAST_0,
        "planner_temperature": AT_LEAST_0,
        "rewriter_temperature": AT_LEAST_0,
        "mas_k": AT_LEAST_1,
        "reward_recall_k": AT_LEAST_1,
    }

    def check(self, path: str, config: object) -> None:
        if self.dataset == "jsonl":
            check_queries_path(self.queries_path, f"{path}.queries_path")

    def build(self) -> Env:
        from lexrl.envs.statute.env import StatuteEnv

        return StatuteEnv.from_config(self)


def check_queries_path(path: str, key: str) -> None:
    """Refuse a `jsonl` statute query path that `str.format(split=...)` cannot fill: a `{`
    other than `{split}` (the loader would fail on it with a KeyError, far from the config)."""
    try:
        path.format(split="train")
    except (KeyError, IndexError, ValueError, AttributeError, TypeError) as error:
        raise ConfigError(
            f"`{key}` {path!r}: `{{split}}` is the only field it may hold "
            f"({type(error).__name__}: {error}); write a literal brace as `{{{{` or `}}}}`"
        ) from None
