"""Options of the multi-agent debate environment (the MAD_legal technical report,
"Multi-Agent Debate for Brazilian Legal Reasoning", 2024)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lexrl.env_options import HeldOutSplit, JudgeEnsemble, with_defaults
from lexrl.errors import ConfigError
from lexrl.options import AT_LEAST_0, AT_LEAST_1
from lexrl.registry import EnvConfig, register_env
from lexrl.rewards.judge_config import JudgeConfig

if TYPE_CHECKING:
    from lexrl.envs.base import Env

DATASETS = ("lexam", "barexam", "oab")
FAMILIES = ("irac", "vanilla")
SYSTEMS = ("single", *FAMILIES)
REWARD_MODES = ("cooperative", "adversarial")
JUDGES = ("policy", "external")


@register_env("debate")
@dataclass
@with_defaults(judge_aggregate="mean")
class DebateEnvConfig(EnvConfig, JudgeEnsemble, HeldOutSplit):
    """Debaters X and Y and a judge: bar-exam MCQ (letters) or OAB open questions (rubric,
    citation F1).

    Shares `HeldOutSplit` (`eval_fraction`, `split_seed`: held out where the data has no test
    split; LEXam: see `lexam_split`; a single barexam file: whole fact patterns; OAB: whole
    questions) and `JudgeEnsemble` (`judge_aggregate` of the rubric judges, `judge_cache_dir`)
    of `lexrl.env_options`."""

    dataset: str = "lexam"
    """`lexam`: a LEXam MCQ config (`lexam_config`), read by the LEXam env's loader; `barexam`:
    US bar-exam MCQs in the `reglab/barexam_qa` schema (`prompt`, `question`, `choice_a` ..
    `choice_d`, `answer`, `subject`); `oab`: Brazilian OAB open-ended questions in the
    `ricardorudicz/oab_exams_guidelines` schema (the report's sec. 3.2)."""
    source: str = "sample"
    """Where the dataset is read from: a Hub id, a local file or folder, or (`lexam`) `sample`,
    the attributed English LEXam sample shipped with lexrl."""
    hub_config: str = "qa"
    """`dataset: barexam` from the Hub: the dataset config read (`reglab/barexam_qa` has `qa`
    and `passages`). If your `datasets` cannot run that repository's loading script, download
    its files and set `source` to the folder."""
    lexam_config: str = "mcq_4_choices"
    """`dataset: lexam`: which MCQ config: `mcq_4_choices`, `mcq_8_choices` or `mcq_16_choices`
    (options are labelled with letters; `mcq_32_choices` would need numbers)."""
    language: str = "en"
    """`dataset: lexam`: `en`, `de`, or empty for both."""
    lexam_split: str | None = None
    """`dataset: lexam`: how the held-out questions are chosen, as the LEXam env's `split`.
    `course`: whole courses (`split_by_course`). `facts`: each course in proportion, whole groups
    of questions sharing a statement or context at a time (`split_by_facts`). None: `facts` for
    the shipped sample, `course` for any other source. The sample's English MCQs are 130 Swiss
    Law questions and 20 of three small courses, its only course split; on those 20 the gold is
    the first shortest option 14 times (on 32 of the 130: chance), so `lexrl audit` found the
    content-free `shortest_option` policy earning 75% of the scripted teacher's reward there, a
    shortcut training never rewards. Under `facts` it is right on 40 of 125 training and 6 of
    25 test questions (`eval_fraction` 0.15, seed 0)."""
    protocol: str = "irac"
    """The system played in training: `irac` (debaters and judge spell out Issue, Rule,
    Application, Conclusion), `vanilla` (plain adversarial debate), or `single` (the judge
    alone answers, no debate)."""
    eval_systems: list[str] = field(default_factory=lambda: ["single", "vanilla", "irac"])
    """Systems scored on every held-out question in one evaluation: each test question becomes
    one task per system (`single`: the judge alone, the paper's single-agent baseline)."""
    reward_mode: str = "cooperative"
    """`cooperative`: every role is rewarded with the judge's final correctness (the paper's
    objective). `adversarial` (MCQ only): debater X and the judge are rewarded for a correct
    final answer, debater Y for the judge adopting Y's letter; self-play in which the policy
    learns to argue and to resist persuasion. Needs `grpo.advantages: role` (with trajectory
    advantages every role would train on the shared reward)."""
    judge: str = "policy"
    """`policy`: the policy plays the judge (trained, `judge_trainable`). `external`: the first
    endpoint of `judges` answers as judge through the judge client; its turns are recorded,
    never trained."""
    judges: list[JudgeConfig] = field(default_factory=list)
    """`judge: external`: the endpoint whose model judges the debate (the first one)."""
    rubric_judges: list[JudgeConfig] = field(default_factory=list)
    """Open-ended questions: the rubric judges scoring the final answer (the report's sec. 5.2.3:
    GPT-4o-mini; correctness 0-4 + reasoning 0-3 + citations 0-4, over 11). Needed unless
    `rubric_weight` is 0."""
    judge_trainable: bool = True
    """With `judge: policy`: whether the judge's turns are trained."""
    debater_temperature: float = 0.7
    """Sampling temperature of the debaters (the report's sec. 4: 0.7)."""
    judge_temperature: float = 0.1
    """Sampling temperature of the policy as judge (the report's sec. 4: 0.1). An external judge
    samples as its entry in `judges` says (set `temperature: 0.1`, `max_tokens: 500` there for
    the paper's)."""
    debater_max_new_tokens: int = 2000
    """Tokens per debater turn (the report's sec. 4: 2,000)."""
    judge_max_new_tokens: int = 500
    """Tokens of the policy's judgment (the report's sec. 4: 500)."""
    invalid_penalty: float = 0.5
    """Subtracted once when debater Y, re-asked once, still names no option other than X's
    (an invalid action): from Y's reward in `adversarial` mode, from the episode's otherwise.
    The refused first opening is kept as an untrained turn, so a Y that wins after its re-ask
    is not rewarded for the opening it had to take back."""
    format_weight: float = 0.0
    """Weight of the `format` component: the share of the policy's debate turns whose option
    letter parses (MCQ). 0 is the paper's reward; a small model is helped by a little. A flat
    credit any letter earns: at 0.2 (the CPU demo) it is 1/6 of the scripted teacher's reward,
    and `lexrl audit` finds no content-free policy above 47% of it (a constant letter, whose Y
    repeats X's option, pays `invalid_penalty` and keeps under 20%)."""
    rubric_weight: float = 1.0
    """Open-ended: weight of the rubric judge's score, (correctness + reasoning + citations)/11."""
    citation_weight: float = 1.0
    """Open-ended: weight of the citation F1 between the judge's answer and the reference."""
    bertscore_model: str = ""
    """Open-ended reports: BERTScore F1 of the answer against the reference with this model (a
    Hub id or local folder; the paper: `neuralmind/bert-base-portuguese-cased`). Empty: none."""
    bertscore_layers: int | None = None
    """Hidden layer BERTScore reads (None: the `bert-score` package's tuned layer for models it
    knows, else the last layer; it has none for BERTimbau and the report names none)."""

    CHOICES = {
        "dataset": DATASETS,
        "protocol": SYSTEMS,
        "reward_mode": REWARD_MODES,
        "judge": JUDGES,
        "lexam_config": ("mcq_4_choices", "mcq_8_choices", "mcq_16_choices"),
        "lexam_split": (None, "course", "facts"),
    }
    BOUNDS = {
        "debater_temperature": AT_LEAST_0,
        "judge_temperature": AT_LEAST_0,
        "debater_max_new_tokens": AT_LEAST_1,
        "judge_max_new_tokens": AT_LEAST_1,
        "invalid_penalty": AT_LEAST_0,
        "format_weight": AT_LEAST_0,
        "rubric_weight": AT_LEAST_0,
        "citation_weight": AT_LEAST_0,
        "bertscore_layers": AT_LEAST_0,
    }

    def check(self, path: str, config: Any) -> None:
        for name in self.eval_systems:
            if name not in SYSTEMS:
                raise ConfigError(
                    f"`{path}.eval_systems` has {name!r}; expected some of {', '.join(SYSTEMS)}"
                )
        open_ended = self.dataset == "oab"
        if open_ended and self.reward_mode == "adversarial":
            raise ConfigError(
                f"`{path}.reward_mode: adversarial` needs options to adopt (multiple choice); "
                "open-ended OAB questions are cooperative"
            )
        if open_ended and self.rubric_weight and not self.rubric_judges:
            raise ConfigError(
                f"`{path}.rubric_judges` is empty: open-ended answers are scored by the rubric "
                f"judges (or set `{path}.rubric_weight: 0` to reward citation F1 alone)"
            )
        if self.judge == "external" and not self.judges:
            raise ConfigError(f"`{path}.judge: external` needs an endpoint in `{path}.judges`")
        if (
            self.reward_mode == "adversarial"
            and config is not None
            and config.grpo.advantages != "role"
        ):
            raise ConfigError(
                f"`{path}.reward_mode: adversarial` needs `grpo.advantages: role`: with "
                "trajectory advantages every debater would train on the shared reward"
            )

    def build(self) -> Env:
        from lexrl.envs.debate.env import DebateEnv

        return DebateEnv.from_config(self)
