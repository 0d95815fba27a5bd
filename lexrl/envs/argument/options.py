"""Options of the 3-ply argument environment (Zhang and Ashley 2025, "Mitigating
Manipulation and Enhancing Persuasion", arXiv:2506.02992: reflective multi-agent legal arguments with abstention)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lexrl.env_options import JudgeCache, TurnSampling
from lexrl.errors import ConfigError
from lexrl.options import AT_LEAST_0, AT_LEAST_1
from lexrl.registry import EnvConfig, register_env
from lexrl.rewards.judge_config import JudgeConfig

if TYPE_CHECKING:
    from lexrl.envs.base import Env

WORKFLOWS = ("SA", "SA-EP", "MA", "RMA")
KINDS = ("arguable", "mismatched", "non_arguable")
"""The scenario kinds of a triple (Zhang and Ashley 2025, sec. 4.2)."""
FACTOR_LAYOUTS = ("inline", "by_side", "by_factor", "by_factor_arguer", "by_factor_cases_first")
REASONING = ("none", "checklist")
GENERATORS = ("authors", "anchored")
"""How generated triples are drawn (`lexrl.envs.argument.scenarios`): the authors' generator
(precedents built from the current case's factors, docs/sources.md) or lexrl's first one
(one shared factor anchored per precedent, the rest at random)."""
PROMPTS = ("single", "single_ep", "plaintiff", "defendant", "analyst", "polisher", "extractor")
"""The env's prompt files (`lexrl/envs/argument/prompts/<name>.txt`), one per role or workflow."""
MISMATCHED_MODES = ("flip_outcomes", "swap_precedents")
"""How a mismatched triple is made from the arguable one of the same seed: its outcomes flipped
(lexrl's default), or its precedents swapped with their outcomes (the authors' generator)."""


@dataclass
class ArgumentAblation:
    """Switches of the CPU demo's experiments (docs/benchmarks.md, docs/history.md): how the
    triples are drawn, how the cases are shown to a small model, what it writes before its
    JSON and what it is warm-started on. The defaults are the paper's and the authors' code's;
    `configs/argument_cpu.yaml` sets the demo's."""

    generator: str = "authors"
    """`authors`: the distribution of the authors' `scenario_generator.py` (docs/sources.md):
    each precedent takes 1-3 of the current case's factors of its winner's side, with
    probability 0.7 1-3 more of its other factors, then random ones, so precedents share about
    2.3 factors with the current case at complexity 3 and often equal it (the authors' 2.2:
    lexrl keeps only the draws whose current case has both sides' factors). `anchored`: lexrl's
    first generator (one shared factor per precedent, the rest drawn from all 26: 1.2 shared at
    complexity 3, almost never equal), kept to reproduce older runs."""
    mismatched: str = "swap_precedents"
    """How a generated mismatched triple is made from the arguable one of the same seed:
    `swap_precedents` (c2 and c3 swapped whole, factors with outcomes: the authors'
    `scenario_generator.py`, docs/sources.md) or `flip_outcomes` (c2 won by the defendant, c3 by
    the plaintiff, the overlaps kept). Every ply must abstain in both."""
    factor_names: bool = True
    """Render each factor in the prompt with its CATO name, "F4 Agreed-not-to-disclose
    (pro-plaintiff)" (the paper's prompt, Zhang and Ashley 2025, Table 1), or by id and side alone, "F4
    (pro-plaintiff)": a prompt a third as long, in which a small model can find the factors two
    cases share (the CPU demo's 2-layer model does not learn it through the names)."""
    factor_layout: str = "inline"
    """How a case's factors are listed: `inline`, each id followed by its side, "F4
    (pro-plaintiff); F11 (pro-defendant)" (the paper's order, Zhang and Ashley 2025, Table 1), or `by_side`,
    the ids under their side in number order, "pro-plaintiff F4, F6; pro-defendant F11" (the
    same facts, in the order the teacher cites them). In a causal model an id listed inline
    cannot see its side, which comes after it; grouped, every id follows its side (the CPU
    demo's 2-layer model learned the choice of factors from `by_side`, not from `inline`).
    `by_factor`: the same facts transposed, each factor under its side with the cases that have
    it in fixed columns, "pro-plaintiff factors: F4 c1 c2 -; F6 c1 - -", so that two cases
    share a factor where one row names both (whether a ply can be grounded is otherwise a
    lookup of one case's ids in another's list, which the 2-layer model learns only slowly;
    transposed, the CPU demo's warm-start learns the decision, docs/benchmarks.md).
    `by_factor_arguer`: as `by_factor`, the columns in the order of the ply's arguer, c1 then
    its own precedent, named in each side's heading: the defendant reads "pro-defendant factors
    (c1 c3 c2): F5 c1 c3 -", so the factors it analogises on are two adjacent cells, as the
    plaintiff's are in "F4 c1 c2 -".
    `by_factor_cases_first`: as `by_factor`, each row's cases before its id, "pro-plaintiff
    factors: c1 c2 - F4; c1 - - F6": in a causal model the id then follows the cells that say
    which cases have it, so a claim's factor is found where the row's cases match (after the
    id, the cells are out of the id's sight; docs/benchmarks.md compares the two on the
    demo)."""
    reasoning: str = "none"
    """What an arguer writes before its JSON: `none`, or `checklist`, a `<think>` block that
    checks each of c1's factors on its side against its precedent, one at a time, before it
    decides: "<think>c2 won by the plaintiff. F4: yes. F6: no.</think>".
    The prompt asks for it and the teacher writes it; the parser drops everything up to
    `</think>`, so nothing in it is scored. Whether a ply can be grounded is whether two lists
    share an id, which a small model does not compute in one forward pass (the CPU demo's
    2-layer model never does from the decision alone, docs/benchmarks.md); listed one id at a
    time, each step looks up one id in one list."""
    warmstart_kinds: list[str] = field(
        default_factory=lambda: ["arguable", "mismatched", "non_arguable"]
    )
    """Kinds of the training triples the scripted teacher plays for the supervised warm-start
    (`warmstart.enabled`). Leaving out `mismatched`, so that abstaining where the precedents'
    outcomes do not fit must come from the reward, made the CPU demo's small model collapse to
    always abstaining: those triples were GRPO's only steady signal (docs/benchmarks.md)."""

    CHOICES = {
        "generator": GENERATORS,
        "mismatched": MISMATCHED_MODES,
        "factor_layout": FACTOR_LAYOUTS,
        "reasoning": REASONING,
    }

    def check(self, path: str, config: object) -> None:
        check_kinds(self.warmstart_kinds, f"{path}.warmstart_kinds")


def check_kinds(kinds: list[str], key: str) -> None:
    """Refuse an empty list of scenario kinds, or one with a kind that is none of `KINDS`."""
    unknown = set(kinds) - set(KINDS)
    if unknown or not kinds:
        raise ConfigError(f"`{key}` has {sorted(unknown)}; expected some of {', '.join(KINDS)}")


@register_env("argument")
@dataclass
class ArgumentEnvConfig(EnvConfig, JudgeCache, TurnSampling):
    """3-ply legal arguments over CATO factors that must abstain when they cannot be grounded.

    Shares `TurnSampling` (`temperature` of every agent: the paper's sec. 4.1 gives none for
    training, and evaluation samples greedily with `eval.greedy`; `max_new_tokens` per ply,
    verdict and review, SA's one call getting three times as many) and `JudgeCache`
    (`judge_cache_dir`) of `lexrl.env_options`. The CPU demo's experiment switches are in
    `ablation` (`ArgumentAblation`)."""

    workflow: str = "RMA"
    """`SA`: one call writes all three plies (Zhang and Ashley 2025, sec. 3.4.1). `SA-EP`: the same with
    explicit abstention and factor-use instructions (sec. 3.4.2). `MA`: the plaintiff and
    defendant agents write their plies in turn (sec. 3.4.3). `RMA`: per ply the arguer drafts,
    the factor analyst checks it, the argument polisher reviews it, at most one revision, and
    the analyst can force TERMINATE (sec. 3.1-3.3). Every agent is the one policy."""
    scenarios: str = "generated"
    """`generated`: seeded triples from lexrl's generator (train and test from disjoint seed
    ranges). Otherwise a JSONL file of your own triples, one `{"id", "kind", "c1", "c2", "c3",
    "c2_outcome", "c3_outcome"}` a line, all of them the test split."""
    kinds: list[str] = field(default_factory=lambda: ["arguable", "mismatched", "non_arguable"])
    """Scenario kinds generated (Zhang and Ashley 2025, sec. 4.2)."""
    ablation: ArgumentAblation = field(default_factory=ArgumentAblation)
    """The CPU demo's experiment switches: the scenario generator, how the cases are rendered,
    reasoning before the JSON, the warm-start's kinds."""
    complexity: int = 5
    """Factors per case: complexity-1 to complexity+1 (Zhang and Ashley 2025, sec. 4.2: complexity 5 = 4-6)."""
    train_per_kind: int = 2000
    """Generated training triples per kind."""
    test_per_kind: int = 90
    """Generated held-out triples per kind (Zhang and Ashley 2025, sec. 4.2: 90 per scenario)."""
    prompts_dir: str | None = None
    """A folder of prompt files read in place of the built-in ones, named as they are
    (`plaintiff.txt`, `defendant.txt`, `analyst.txt`, `polisher.txt`, `single.txt`,
    `single_ep.txt`, `extractor.txt`); a prompt without a file there stays the built-in one.
    For ablating the instructions, or for a model trained from random weights, which cannot
    read them and for which they are most of each prompt's tokens (docs/benchmarks.md has
    what they cost the CPU demo). A changed prompt changes the warm-start's tokens, so its cache
    entry is built anew; a report's provenance records each file's sha256."""
    analyst: str = "policy"
    """Who plays RMA's factor analyst and argument polisher: `policy` (trainable roles) or
    `judge` (the fixed external model of `judges[0]`, through the judge client; its replies are
    kept as non-trainable turns)."""
    judges: list[JudgeConfig] = field(default_factory=list)
    """External models: the analyst and polisher with `analyst: judge`, and the factor extractor
    of `extract_factors: llm`."""
    extract_factors: str = "json"
    """Who reads each ply's prose (its `argument`): `json`, no one: the metrics and the reward
    read the ply's claims, and the prose is unscored (a CPU run has no judge). `llm`: the
    paper's Factor Distiller (Zhang and Ashley 2025, sec. 4.4 and Appendix A, its prompt
    `prompts/extractor.txt`) run by the external model of `judges[0]` lists the factors each
    ply's prose mentions per case, and the paper's metrics are computed a second time from them
    (`<metric>_text`, beside the ones from the claims): the prose is scored as in the paper. Each
    ply is sent alone, as the authors' argument JSON with one key ("Plaintiff's Argument", ...);
    a ply without prose cites nothing and costs no call. A ply the distiller fails on (no
    reply, or none parsable after the judge's re-asks) is counted in `distiller_failed` and its
    episode has no `_text` metrics; its claims' metrics and reward stay."""
    reward_source: str = "claims"
    """What the reward (and each role's reward) scores: `claims`, the plies' analogies and
    distinctions, checked exactly against the cases; or `distiller`, the factor lists the
    paper's distiller reads from the prose (needs `extract_factors: llm`), scored by their
    citations (`grounding.citation_quality`), for runs whose judge is capable enough to be
    trusted with the reward. With `distiller` an episode with a ply the distiller fails on has
    no reward: it is failed, and left out of training and metrics (`judge/failed`) like an
    episode whose judge failed. The metrics stay the claims' (`task_score`, ...), the
    distiller's reading being the `_text` ones. On CPU, without a judge, only `claims` is
    possible."""
    abstention_weight: float = 2.0
    """Reward weight of the share of plies that must abstain and do, claiming nothing false (0
    on an arguable triple): a triple whose plies must all abstain is worth one part of an argued
    one (`utilisation_weight`), so a policy that decides every ply rightly but argues nothing
    relevant earns about a third of the teacher's reward on the paper's held-out triples, two
    thirds of which must abstain (Zhang and Ashley 2025, sec. 1 and 4.2). Every other component
    of a ply is gated on its decision (`lexrl.envs.argument.reward`)."""
    hallucination_weight: float = 0.25
    """Reward weight of hallucination accuracy, max(0, 1 - N_h / N_gt) (Zhang and Ashley 2025, eq. 1-2), over
    the plies that argue rightly only: an abstention claims nothing, so it earns no credit for
    fabricating nothing. Small for the same reason: citing only listed factors is free to a
    rule, and `utilisation` already counts a fabricated citation against the ply."""
    utilisation_weight: float = 2.0
    """Reward weight, per part of the triple's argument, of the argument's quality: the least
    `grounding.argument_quality` over the plies that can be argued (each ply's worst part,
    analogy or distinction, minus its claims outside the CATO argument: the side-aware form of
    Rec_U, Zhang and Ashley 2025, eq. 3-4 with the analogies and distinctions of sec. 3.1 and
    4.1) times the number of parts (3 to 5). A 3-ply argument is one argument: a rule that
    makes only the analogies, skips one ply's distinction or abstains on the rebuttal leaves it
    unfinished, and loses most on the triples with the most to argue (`lexrl audit`,
    docs/envs/argument.md)."""
    format_weight: float = 0.05
    """Reward weight of format validity: the share of plies that are the JSON asked for and
    decided rightly (valid JSON with the wrong decision earns nothing)."""
    over_abstention_penalty: float = 0.0
    """Reward taken per share of plies that abstain where an argument can be grounded (an
    over-cautious ply: Rec_U 0, Zhang and Ashley 2025, eq. 3-4, sec. 1's persuasion goal). 0, the paper's
    scoring, makes abstaining there earn what an ungrounded argument earns, nothing; then a GRPO
    group of an arguable triple in which no sample argues rightly has no advantage, while every
    group of a triple that must abstain pushes towards abstaining, and a small policy that cannot
    yet tell the kinds apart drifts to abstaining everywhere (docs/benchmarks.md). Above 0,
    arguing (even wrongly) beats abstaining on an arguable ply. The teacher and every rule that
    decides rightly never pay it. Under `grpo.scale_rewards: group` its size matters little (each
    group's advantages are divided by its own spread); `configs/argument_cpu.yaml` sets 0.5."""
    failed_abstention_penalty: float = 2.0
    """Reward taken per share of plies that do not abstain where they must: the manipulation of
    Zhang and Ashley 2025, sec. 1, an argument where none can be grounded (the failures its
    "successful abstention" counts, sec. 4.4). Equal to `abstention_weight`, so arguing every
    ply of a triple that must abstain loses the triple's credit and as much again. On the CPU
    demo's held-out triples the rule that argues as CATO does and never abstains earns 36% of
    the teacher's reward (always abstaining: 28%); within a GRPO group, where every episode
    plays one triple, the penalty's size against the abstention credit is what counts. The
    counterpart of `over_abstention_penalty`; the teacher and every rule that decides rightly
    never pay it."""

    MOVED = {
        key: f"ablation.{key}"
        for key in (
            "generator",
            "mismatched",
            "factor_names",
            "factor_layout",
            "reasoning",
            "warmstart_kinds",
        )
    }
    CHOICES = {
        "workflow": WORKFLOWS,
        "analyst": ("policy", "judge"),
        "extract_factors": ("json", "llm"),
        "reward_source": ("claims", "distiller"),
    }
    BOUNDS = {
        "complexity": AT_LEAST_1,
        "train_per_kind": AT_LEAST_1,
        "test_per_kind": AT_LEAST_1,
        "abstention_weight": AT_LEAST_0,
        "over_abstention_penalty": AT_LEAST_0,
        "failed_abstention_penalty": AT_LEAST_0,
        "hallucination_weight": AT_LEAST_0,
        "utilisation_weight": AT_LEAST_0,
        "format_weight": AT_LEAST_0,
    }

    def check(self, path: str, config: object) -> None:
        external = (self.workflow == "RMA" and self.analyst == "judge") or (
            self.extract_factors == "llm"
        )
        if external and not self.judges:
            raise ConfigError(
                f"`{path}`: `analyst: judge` and `extract_factors: llm` need `judges`"
            )
        if self.reward_source == "distiller" and self.extract_factors != "llm":
            raise ConfigError(f"`{path}.reward_source`: `distiller` needs `extract_factors: llm`")
        check_kinds(self.kinds, f"{path}.kinds")

        if self.prompts_dir is not None:
            prompt_files(self.prompts_dir, f"{path}.prompts_dir")

    # The env reads the switches where they were (`config.factor_layout`).
    generator = property(lambda self: self.ablation.generator)
    mismatched = property(lambda self: self.ablation.mismatched)
    factor_names = property(lambda self: self.ablation.factor_names)
    factor_layout = property(lambda self: self.ablation.factor_layout)
    reasoning = property(lambda self: self.ablation.reasoning)
    warmstart_kinds = property(lambda self: self.ablation.warmstart_kinds)

    def build(self) -> Env:
        from lexrl.envs.argument.env import ArgumentEnv

        return ArgumentEnv.from_config(self)


def prompt_files(folder: str, key: str) -> dict[str, str]:
    """The prompts a `prompts_dir` folder replaces, by name; a missing folder, a file that is no
    prompt of this env (hidden files aside), or one that is empty or not UTF-8 is a config error
    naming it."""
    root = Path(folder)
    if not root.is_dir():
        where = "" if root.is_absolute() else f" (a relative path is read from {Path.cwd()})"
        raise ConfigError(f"`{key}`: {folder} is not a folder{where}")
    texts = {}
    for file in sorted(root.iterdir()):
        if file.name.startswith("."):  # an editor's or a file manager's, not a prompt
            continue
        if file.stem not in PROMPTS or file.suffix != ".txt":
            raise ConfigError(
                f"`{key}`: {file} is not a prompt of this env; expected some of "
                + ", ".join(f"{name}.txt" for name in PROMPTS)
            )
        try:
            texts[file.stem] = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigError(f"`{key}`: cannot read {file}: {error}") from error
        if not texts[file.stem].strip():
            raise ConfigError(f"`{key}`: {file} is empty")
    return texts
