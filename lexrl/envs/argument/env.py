"""Reflective multi-agent 3-ply legal arguments with abstention (Zhang and Ashley 2025,
"Mitigating Manipulation and Enhancing Persuasion", arXiv:2506.02992).

Three trade-secret cases given as CATO factors: c1 (undecided), c2 and c3 (precedents with their
outcomes). The agents write the plaintiff's argument, the defendant's counterargument and the
plaintiff's rebuttal, each as JSON stating its claims, `{"abstain", "analogies": [[factor, case,
case], ...], "distinctions": [[factor, case that has it, case that lacks it], ...], "argument"}`,
or abstain (`TERMINATE: why`) where the ply cannot be grounded. One policy plays every agent:

- `SA` / `SA-EP`: the `single` role writes the three plies in one call (SA-EP with explicit
  abstention and factor-use rules);
- `MA`: the `plaintiff` writes plies 1 and 3, the `defendant` ply 2, each seeing the earlier plies;
- `RMA`: per ply the arguer drafts; the `analyst` answers VALID_ARGUMENT, REQUIRES_CORRECTION or
  REQUIRES_ABSTENTION (which forces TERMINATE); the `polisher` reviews the draft and the
  analyst's report and says whether to revise; at most one revision.

A real task (arguable, Table 1): c1 = F4 Agreed-not-to-disclose (P), F5 Agreement-not-specific
(D), F23; c2 (won by the plaintiff) = F2, F4, F16; c3 (won by the defendant) = F2, F5, F12.

The scenario kind (the gold) never enters a prompt; the cases' factors and outcomes do. Reward:
`lexrl.envs.argument.reward` (abstention, hallucination, utilisation, format); each role also
gets its own reward (`Trajectory.role_rewards`): the arguers the score of the plies they wrote,
the analyst the share of its verdicts a correct analyst would give
(`teacher.correct_verdict`), the polisher the share of its revise decisions that agree with
that verdict. Departure from the paper: the analyst's factor list is not asked for, because the
ply's own claims already name their factors and cases.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from typing import Any

from lexrl.envs.argument.degenerate import argument_policies
from lexrl.envs.argument.factors import FACTORS, factor_number
from lexrl.envs.argument.grounding import argument_quality
from lexrl.envs.argument.metrics import (
    AUTHORS_METRICS,
    argument_table,
    markdown_table,
    score_triple,
)
from lexrl.envs.argument.options import PROMPTS, ArgumentEnvConfig, prompt_files
from lexrl.envs.argument.parsing import (
    ParsedPly,
    Verdict,
    parse_factor_lists,
    parse_ply,
    parse_review,
    parse_three_plies,
    parse_verdict,
)
from lexrl.envs.argument.reward import (
    COMPONENTS,
    has_every_distinction,
    ply_components,
    right_decision,
    task_score,
    triple_components,
    weighted,
)
from lexrl.envs.argument.scenarios import (
    CASES,
    KINDS,
    PLIES,
    SPLIT_SEEDS,
    Scenario,
    expected_abstentions,
    generate_scenarios,
    load_scenarios,
    split_seeds,
)
from lexrl.envs.argument.teacher import (
    CHECKLIST_INSTRUCTION,
    checklist,
    correct_verdict,
    teacher_plies,
    teacher_review,
    teacher_text,
    teacher_triple_text,
    teacher_verdict,
)
from lexrl.envs.base import Env, EnvReport, ReportRequest, prompt_text
from lexrl.envs.degenerate import TeacherFactory
from lexrl.errors import ConfigError
from lexrl.policy import Messages, Policy, Teacher
from lexrl.rewards.judge import JudgeCall, JudgeClient, JudgeParseError
from lexrl.types import Group, Task, Trajectory

PLY_TITLES = (
    "the plaintiff's argument",
    "the defendant's counterargument",
    "the plaintiff's rebuttal",
)
ARGUERS = ("plaintiff", "defendant", "plaintiff")
"""Who writes each ply in MA and RMA (the plaintiff also writes the rebuttal)."""
_PLY_MARKER = re.compile(r"Write ply (\d) of 3")
_DRAFT = re.compile(r"Draft of ply (\d) \([^)]*\):\n(.*?)(?:\n\nFactor analyst's report:|\Z)", re.S)
_SIDES = {"P": "the plaintiff", "D": "the defendant"}
_FAVOURS = {"P": "pro-plaintiff", "D": "pro-defendant"}
REVISION_REQUEST = "Rewrite the ply, taking this feedback into account. Answer with the JSON only."
FORCED_TERMINATION = "TERMINATE: the factor analyst found no grounded basis for this ply."
DECISION_METRICS = ("right_decision", *(f"right_decision_{kind}" for kind in KINDS))
"""Share of plies deciding rightly (`reward.right_decision`), overall and on each kind's triples
(a kind's key only on that kind's episodes): always abstaining scores 1 on mismatched and
non-arguable triples and 0 on arguable ones, so the kinds separate what the mean hides."""
ARGUE_METRICS = tuple(f"argues_{kind}" for kind in KINDS)
"""Share of plies that argue (do not abstain) on each kind's triples, right or not. The argue
rate on arguable triples minus that on non-arguable ones is the policy's separation (Youden's J:
0 for a policy that decides blind, 1 for one that reads whether a factor is shared); a policy can
raise both rates together, which moves its threshold and not its separation
(docs/envs/argument.md)."""
TEXT_VARIANTS = (
    "hallucination_accuracy",
    "utilisation_recall",
    "authors_hallucination_accuracy",
    "authors_factor_recall",
    "authors_successful_abstention",
)
"""The paper's metrics that read the cited factors, computed a second time (`<name>_text`) from
the factors the paper's distiller reads in each ply's prose (`extract_factors: llm`, sec. 4.4),
beside the ones from the claims. Without a distiller the prose is unscored and they are absent;
an episode with a ply the distiller failed on has none of them (`distiller_failed`)."""
DISTILLER_KEYS = ("Plaintiff's Argument", "Defendant's Counterargument", "Plaintiff's Rebuttal")
"""The keys of the 3-ply argument JSON the authors' Factor Distiller reads (Zhang and Ashley
2025, Appendix A), one per ply."""
METRICS = (
    "task_score",
    "task_score_with_distinctions",
    "argument_quality",
    *DECISION_METRICS,
    *ARGUE_METRICS,
    "hallucination_accuracy",
    "hallucination_accuracy_extracted",
    "utilisation_recall",
    "abstention_accuracy",
    "successful_abstention",
    "format_validity",
    *AUTHORS_METRICS,
    *(f"{name}_text" for name in TEXT_VARIANTS),
)


SPLITS = tuple(SPLIT_SEEDS)


def load_prompt(name: str) -> str:
    return prompt_text("lexrl.envs.argument", name)


def render_cases(
    inputs: dict[str, Any], names: bool = True, layout: str = "inline", ply: int | None = None
) -> str:
    """The three cases as the agents see them: factor id, name (unless `names` is false) and
    the side it favours (after each id, or heading the ids of its side: `layout`), and each
    precedent's outcome. `ply` (0, 1 or 2) is the ply whose arguer reads them, which orders the
    columns of `by_factor_arguer`."""

    def named(f: str) -> str:
        return f"{f}{' ' + FACTORS[f].name if names else ''}"

    def factors(ids: list[str]) -> str:
        if layout == "by_side":
            # In id order, as the teacher cites them.
            return "; ".join(
                f"{_FAVOURS[side]} "
                + (
                    ", ".join(
                        named(f)
                        for f in sorted(ids, key=factor_number)
                        if FACTORS[f].favors == side
                    )
                    or "none"
                )
                for side in _FAVOURS
            )
        return "; ".join(f"{named(f)} ({_FAVOURS[FACTORS[f].favors]})" for f in ids)

    if layout in ("by_factor", "by_factor_cases_first"):
        return by_factor(inputs, named, cases_first=layout == "by_factor_cases_first")
    if layout == "by_factor_arguer":
        return by_factor(inputs, named, arguer_columns(ply))
    return (
        f"c1 (current case, undecided): {factors(inputs['c1'])}\n"
        f"c2 (precedent, decided for {_SIDES[inputs['c2_outcome']]}): {factors(inputs['c2'])}\n"
        f"c3 (precedent, decided for {_SIDES[inputs['c3_outcome']]}): {factors(inputs['c3'])}"
    )


def arguer_columns(ply: int | None) -> tuple[str, ...]:
    """c1, the precedent ply `ply` argues from, the other precedent: the defendant (ply 1)
    reads c1 c3 c2, so that the rows it analogises on read "c1 c3" as the plaintiff's read
    "c1 c2"; (c1, c2, c3) when no ply is given."""
    return ("c1", "c3", "c2") if ply == 1 else CASES


def by_factor(
    inputs: dict[str, Any],
    named: Callable[[str], str],
    columns: tuple[str, ...] | None = None,
    cases_first: bool = False,
) -> str:
    """The cases transposed: each factor any case has, under its side in number order, then the
    cases that have it in fixed columns, "F4 c1 c2 -", so whether two cases share a factor is
    read from one row instead of looked up from one list in another. With `columns` the columns
    come in that order and each side's heading names it: "pro-defendant factors (c1 c3 c2):
    F5 c1 c3 -". With `cases_first` the cells come before the id: "c1 c2 - F4"."""
    order = columns or CASES

    def row(f: str) -> str:
        cells = " ".join(case if f in inputs[case] else "-" for case in order)
        return f"{cells} {named(f)}" if cases_first else f"{named(f)} {cells}"

    rows = {
        side: [
            row(f)
            for f in sorted(set().union(*(inputs[case] for case in CASES)), key=factor_number)
            if FACTORS[f].favors == side
        ]
        for side in _FAVOURS
    }
    heading = f" ({' '.join(order)})" if columns else ""
    return (
        f"c1 (current case) is undecided; c2 (precedent) was decided for "
        f"{_SIDES[inputs['c2_outcome']]}; c3 (precedent) was decided for "
        f"{_SIDES[inputs['c3_outcome']]}.\n"
        + "\n".join(
            f"{_FAVOURS[side]} factors{heading}: {'; '.join(rows[side]) or 'none'}" for side in rows
        )
    )


def to_task(scenario: Scenario) -> Task:
    inputs = {
        "c1": list(scenario.c1),
        "c2": list(scenario.c2),
        "c3": list(scenario.c3),
        "c2_outcome": scenario.c2_outcome,
        "c3_outcome": scenario.c3_outcome,
    }
    gold = {"kind": scenario.kind, "abstain": list(expected_abstentions(scenario))}
    return Task(scenario.id, inputs, gold, meta={"complexity": scenario.complexity})


def strict_verdict(text: str) -> str:
    """The analyst's label, for the judge client (which re-asks on JudgeParseError)."""
    verdict = parse_verdict(text)
    if verdict.label is None:
        raise JudgeParseError(verdict.error or "no verdict label")
    return verdict.label


def strict_review(text: str) -> bool:
    review = parse_review(text)
    if review.error is not None:
        raise JudgeParseError(review.error)
    return review.revise


def strict_factor_lists(text: str) -> dict[str, list[str]]:
    """The distiller's `{"c1": [...], "c2": [...], "c3": [...]}` (or the authors' "Input Case",
    "TSC1", "TSC2"; entries "F4 Agreed-not-to-disclose (P)" or "F4"), ids normalised."""
    factors, error = parse_factor_lists(text)
    if error is not None:
        raise JudgeParseError(f'expected {{"c1": [...], "c2": [...], "c3": [...]}} ({error})')
    return {case: list(factors[case]) for case in CASES}


@dataclass
class PlyRecord:
    """One ply's way through the workflow, kept in the trajectory's steps."""

    index: int
    draft: str
    final: ParsedPly
    verdict: str | None = None
    correct_verdict: str | None = None
    revise: bool | None = None
    revision: str | None = None
    terminated: bool = False
    notes: list[str] = field(default_factory=list)


class ArgumentEnv(Env):
    name = "argument"
    headline_metric = "task_score"
    """The mean `reward.task_score` over every triple: 1 for a triple argued in full or
    abstained on in full, so a policy that never abstains scores at most the share of arguable
    triples (a third of the test split), one that always abstains the rest, and one that skips
    the distinctions little more. `argument_quality` (arguable triples only) and the
    right-decision rate per kind stand beside it. The paper's Acc_H is 1.0 for every policy that
    cites nothing, empty replies included, so it cannot show progress."""

    def __init__(self, config: ArgumentEnvConfig):
        self.config = config
        self.weights = {
            "abstention": config.abstention_weight,
            "hallucination": config.hallucination_weight,
            "utilisation": config.utilisation_weight,
            "format": config.format_weight,
            "over_abstention": -config.over_abstention_penalty,
            "failed_abstention": -config.failed_abstention_penalty,
        }
        self.prompts = {name: load_prompt(name) for name in PROMPTS}
        if config.prompts_dir is not None:
            self.prompts.update(prompt_files(config.prompts_dir, "env.prompts_dir"))
        if config.reasoning == "checklist":
            for arguer in ("plaintiff", "defendant"):
                self.prompts[arguer] = f"{self.prompts[arguer].rstrip()}\n{CHECKLIST_INSTRUCTION}"
        roles = {"SA": ("single",), "SA-EP": ("single",), "MA": ("plaintiff", "defendant")}
        self.roles = roles.get(config.workflow, ("plaintiff", "defendant"))
        if config.workflow == "RMA" and config.analyst == "policy":
            self.roles += ("analyst", "polisher")
        self.reward_components = COMPONENTS
        self.episode_metrics = METRICS
        if config.workflow == "RMA":
            self.episode_metrics += ("revisions", "analyst_terminations", "verdict_accuracy")
        if config.extract_factors == "llm":
            self.episode_metrics += ("distiller_failed",)
        self._scenarios: dict[str, Scenario] = {}
        # Each split is generated on its first use: 12,000 training triples take seconds that
        # `lexrl eval`, `audit` and `serve-env` (test split only) need not spend.
        self._tasks: dict[str, list[Task]] = {}

    @classmethod
    def from_config(cls, config: ArgumentEnvConfig) -> ArgumentEnv:
        return cls(config)

    def _per_kind(self, split: str) -> int:
        return self.config.train_per_kind if split == "train" else self.config.test_per_kind

    def _load(self, split: str) -> list[Task]:
        count = self._per_kind(split)
        if split == "test" and self.config.scenarios != "generated":
            scenarios = load_scenarios(self.config.scenarios)
        else:
            scenarios = generate_scenarios(
                self.config.kinds,
                self.config.complexity,
                split_seeds(split, count),
                self.config.mismatched,
                self.config.generator,
            )
            scenarios = _interleave(scenarios, len(self.config.kinds))
        self._scenarios.update({s.id: s for s in scenarios})
        return [to_task(s) for s in scenarios]

    @cached_property
    def judge_client(self) -> JudgeClient:
        """The external analyst / polisher / extractor, connected on first use."""
        return JudgeClient(self.config.judges, self.config.judge_cache_dir)

    def tasks(self, split: str) -> list[Task]:
        if split not in SPLITS:
            raise ConfigError(f"the argument env has splits train and test, not {split!r}")
        if split not in self._tasks:
            self._tasks[split] = self._load(split)
        return self._tasks[split]

    def warmstart_tasks(self) -> list[Task]:
        kinds = set(self.config.warmstart_kinds)
        return [task for task in self.tasks("train") if task.gold["kind"] in kinds]

    def scenario(self, task: Task) -> Scenario:
        # A task built elsewhere (another process, a saved episode) may name a split not yet
        # generated here: generate the smaller split first, and no more than it takes.
        for split in sorted(SPLITS, key=self._per_kind):
            if task.id in self._scenarios:
                break
            self.tasks(split)
        return self._scenarios[task.id]

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {"workflow": self.config.workflow, "source": self.config.scenarios}
        for split in SPLITS:
            tasks = self.tasks(split)
            kinds: dict[str, int] = {}
            for task in tasks:
                kinds[task.gold["kind"]] = kinds.get(task.gold["kind"], 0) + 1
            out[split] = {"triples": len(tasks), "by_kind": kinds}
        return out

    def text_corpus(self) -> list[str]:
        texts = list(self.prompts.values())
        for task in self.tasks("train")[:300]:
            scenario = self.scenario(task)
            texts += dict.fromkeys(
                render_cases(task.inputs, self.config.factor_names, self.config.factor_layout, ply)
                for ply in range(len(ARGUERS))
            )
            texts += [teacher_text(ply) for ply in teacher_plies(scenario)]
            if self.config.reasoning == "checklist":
                texts += [checklist(scenario, index) for index in range(len(ARGUERS))]
        return texts

    # -- the workflows -------------------------------------------------------------------

    @property
    def _cap(self) -> int | None:
        return self.config.max_new_tokens

    def ply_message(self, task: Task, index: int, earlier: list[PlyRecord]) -> str:
        """The user message of ply `index`: the cases, the earlier plies' texts, the request."""
        parts = [
            render_cases(task.inputs, self.config.factor_names, self.config.factor_layout, index)
        ]
        for record in earlier:
            parts.append(f"Ply {record.index + 1} ({PLY_TITLES[record.index]}): {_text(record)}")
        parts.append(f"Write ply {index + 1} of 3: {PLY_TITLES[index]}.")
        return "\n\n".join(parts)

    async def run_episode(self, task: Task, policy: Policy) -> Trajectory:
        if self.config.workflow in ("SA", "SA-EP"):
            records = await self._single(task, policy)
        else:
            records = []
            for index in range(len(PLIES)):
                record = await self._ply(task, policy, index, records)
                if record is None:
                    return self._failed(task, policy, records)
                records.append(record)
        return await self._finish(task, policy, records)

    async def _single(self, task: Task, policy: Policy) -> list[PlyRecord]:
        prompt = self.prompts["single" if self.config.workflow == "SA" else "single_ep"]
        text = await policy.chat(
            "single",
            prompt,
            render_cases(task.inputs, self.config.factor_names, self.config.factor_layout),
            temperature=self.config.temperature,
            max_new_tokens=3 * (self._cap or policy.max_new_tokens),
        )
        return [PlyRecord(i, text, ply) for i, ply in enumerate(parse_three_plies(text))]

    async def _ply(
        self, task: Task, policy: Policy, index: int, earlier: list[PlyRecord]
    ) -> PlyRecord | None:
        """One ply of MA or RMA; None when an external analyst or polisher failed."""
        role = ARGUERS[index]
        conversation = [{"role": "user", "content": self.ply_message(task, index, earlier)}]
        draft = await policy.chat(
            role,
            self.prompts[role],
            conversation,
            temperature=self.config.temperature,
            max_new_tokens=self._cap,
        )
        record = PlyRecord(index, draft, parse_ply(draft))
        if self.config.workflow == "MA":
            return record
        scenario = self.scenario(task)
        record.correct_verdict = correct_verdict(scenario, index, record.final)[0]
        review_message = (
            f"{render_cases(task.inputs, self.config.factor_names, self.config.factor_layout)}\n\n"
            f"Draft of ply {index + 1} ({PLY_TITLES[index]}):\n{draft}"
        )
        verdict = await self._review(policy, "analyst", review_message, strict_verdict)
        if verdict is None:
            return None
        record.verdict = verdict.label
        if verdict.label == "REQUIRES_ABSTENTION":
            record.terminated = True
            record.final = ParsedPly(FORCED_TERMINATION, True, valid=True)
            return record
        polish_message = f"{review_message}\n\nFactor analyst's report:\n{verdict.feedback}"
        review = await self._review(policy, "polisher", polish_message, strict_review)
        if review is None:
            return None
        record.revise = review.label == "yes"
        if verdict.label == "REQUIRES_CORRECTION" or record.revise:
            conversation += [
                {"role": "assistant", "content": draft},
                {
                    "role": "user",
                    "content": f"Factor analyst: {verdict.feedback}\nPolisher: {review.feedback}"
                    f"\n{REVISION_REQUEST}",
                },
            ]
            record.revision = await policy.chat(
                role,
                self.prompts[role],
                conversation,
                temperature=self.config.temperature,
                max_new_tokens=self._cap,
            )
            record.final = parse_ply(record.revision)
        return record

    async def _review(self, policy: Policy, role: str, message: str, parser: Any) -> Verdict | None:
        """The analyst's verdict or the polisher's review (as a Verdict whose label is `yes` /
        `no` for the polisher), from the policy or the external judge; None when the judge
        failed after its retries."""
        prompt = self.prompts[role]
        if self.config.analyst == "policy":
            reply = await policy.chat(
                role, prompt, message, temperature=self.config.temperature, max_new_tokens=self._cap
            )
        else:
            messages = [{"role": "system", "content": prompt}, {"role": "user", "content": message}]
            call = await self.judge_client.ask(
                messages, parser, "End with the label on its own line."
            )
            if call.reply is not None:
                policy.record(role, prompt, call.messages[1:], call.reply)
            if call.score is None:
                policy.trajectory.steps.append({role: asdict(call)})
                return None
            reply = call.reply or ""
        if role == "analyst":
            return parse_verdict(reply)
        review = parse_review(reply)
        return Verdict("yes" if review.revise else "no", review.feedback, review.error)

    def _failed(self, task: Task, policy: Policy, records: list[PlyRecord]) -> Trajectory:
        steps = [{"ply": asdict(r)} for r in records] + policy.trajectory.steps
        trajectory = policy.finish({"plies": [asdict(r.final) for r in records]}, {}, steps)
        errors = [s for s in steps if "ply" not in s]
        trajectory.failed = f"external analyst failed: {errors[-1] if errors else 'no reply'}"
        return trajectory

    async def _finish(self, task: Task, policy: Policy, records: list[PlyRecord]) -> Trajectory:
        scenario = self.scenario(task)
        plies = [r.final for r in records]
        metrics = {k: v for k, v in asdict(score_triple(scenario, plies)).items() if k in METRICS}
        metrics.update(decision_metrics(scenario, plies))
        if self.config.workflow == "RMA":
            metrics["revisions"] = float(sum(r.revision is not None for r in records))
            metrics["analyst_terminations"] = float(sum(r.terminated for r in records))
            metrics["verdict_accuracy"] = sum(
                r.verdict == r.correct_verdict for r in records
            ) / len(records)
        outcome = {"kind": task.gold["kind"], "plies": [asdict(p) for p in plies]}
        steps = [{"ply": asdict(r)} for r in records]
        scored = plies
        if self.config.extract_factors == "llm":
            distilled, failures = await self._extracted(policy, plies)
            steps += [{"extractor": call} for call in failures]
            metrics.update(distiller_metrics(scenario, distilled))
            outcome["distilled"] = [None if p is None else p.factors for p in distilled]
            if self.config.reward_source == "distiller":
                if failures:
                    trajectory = policy.finish(outcome, {}, steps)
                    trajectory.failed = f"factor distiller failed: {failures[0]['error']}"
                    return trajectory
                scored = distilled
        components = weighted(triple_components(scenario, scored), self.weights)
        trajectory = policy.finish(outcome, components, steps, metrics)
        trajectory.role_rewards = self.role_rewards(
            scenario, [replace(r, final=p) for r, p in zip(records, scored, strict=True)]
        )
        return trajectory

    def role_rewards(self, scenario: Scenario, records: list[PlyRecord]) -> dict[str, float]:
        """Each agent's own reward: the arguers the weighted score of the plies they wrote
        (their final versions), the analyst the share of its verdicts that a correct analyst
        would give, the polisher the share of its revise decisions that agree with that verdict
        (revise exactly when the draft is not a valid argument)."""
        if self.config.workflow in ("SA", "SA-EP"):
            return {}
        scores: dict[str, list[float]] = {}
        for record in records:
            ply = weighted(ply_components(scenario, record.index, record.final), self.weights)
            scores.setdefault(ARGUERS[record.index], []).append(sum(ply.values()))
            if self.config.workflow == "RMA" and self.config.analyst == "policy":
                scores.setdefault("analyst", []).append(
                    float(record.verdict == record.correct_verdict)
                )
                if record.revise is not None:
                    wanted = record.correct_verdict != "VALID_ARGUMENT"
                    scores.setdefault("polisher", []).append(float(record.revise == wanted))
        return {role: sum(values) / len(values) for role, values in scores.items()}

    async def _extracted(
        self, policy: Policy, plies: list[ParsedPly]
    ) -> tuple[list[ParsedPly | None], list[dict]]:
        """Each ply as the paper's distiller reads its prose (sec. 4.4): `claims` None, `factors`
        the lists it returned; None for a ply it failed on. Also the failed calls (`JudgeCall`
        as a dict, its `error` naming the endpoint). The plies are read concurrently, each
        reply kept as a non-trainable `extractor` turn."""
        prompt = self.prompts["extractor"]
        calls = await asyncio.gather(*(self._distil(i, ply) for i, ply in enumerate(plies)))
        read: list[ParsedPly | None] = []
        failures = []
        for ply, call in zip(plies, calls, strict=True):
            if call is None:  # no prose: nothing cited, nothing to ask
                read.append(replace(ply, factors={case: () for case in CASES}, claims=None))
                continue
            if call.reply is not None:
                policy.record("extractor", prompt, call.messages[1:], call.reply)
            if call.score is None:
                failures.append(asdict(call))
                read.append(None)
                continue
            factors = {case: tuple(call.score[case]) for case in CASES}
            read.append(replace(ply, factors=factors, claims=None))
        return read, failures

    async def _distil(self, index: int, ply: ParsedPly) -> JudgeCall | None:
        """The distiller's call on ply `index` alone, in the authors' input form (a JSON object
        of the argument's plies, here the one: `DISTILLER_KEYS`), so that each ply gets its own
        factor lists; None for a ply without prose."""
        if not ply.argument.strip():
            return None
        argument = json.dumps({DISTILLER_KEYS[index]: ply.argument}, ensure_ascii=False)
        messages = [
            {"role": "system", "content": self.prompts["extractor"]},
            {"role": "user", "content": argument},
        ]
        return await self.judge_client.ask(
            messages, strict_factor_lists, 'Answer with {"c1": [...], "c2": [...], "c3": [...]}.'
        )

    # -- teacher and report ----------------------------------------------------------------

    def teacher(self, task: Task, rng: random.Random) -> Teacher:
        """A correct agent for every role: the teacher's plies, the verdict and review a correct
        analyst and polisher give on the draft in the message."""
        scenario = self.scenario(task)
        plies = teacher_plies(scenario)

        def thinking(index: int) -> str:
            return checklist(scenario, index) if self.config.reasoning == "checklist" else ""

        def respond(role: str, messages: Messages) -> str:
            first = messages if isinstance(messages, str) else messages[0]["content"]
            if role == "single":
                return teacher_triple_text(plies)
            if role in ARGUERS:  # a draft or a revision: the first message names the ply
                index = int(_PLY_MARKER.search(first).group(1)) - 1
                return thinking(index) + teacher_text(plies[index])
            under_review = _DRAFT.search(first)
            index, draft = int(under_review.group(1)) - 1, parse_ply(under_review.group(2))
            if role == "analyst":
                return teacher_verdict(scenario, index, draft)
            return teacher_review(scenario, index, draft)

        return respond

    def degenerate_policies(self) -> dict[str, TeacherFactory]:
        return argument_policies()

    def report(
        self, tasks: list[Task], groups: list[Group] | None, request: ReportRequest
    ) -> EnvReport:
        """The paper's tables (Zhang and Ashley 2025, Tables 2-4): successful abstention on
        mismatched and non-arguable triples, Acc_H and Rec_U on arguable ones, with intervals, for
        the policy's workflow and, as the baseline, the scripted teacher (the upper bound: 100 on
        every column) on the same triples. One record per episode: with `eval.samples_per_task`
        above 1 the policy's `n` counts episodes and its intervals resample episodes (the teacher's,
        one per triple)."""
        records = []
        for task in tasks if request.baselines else []:
            scenario = self.scenario(task)
            plies = [parse_ply(teacher_text(p)) for p in teacher_plies(scenario)]
            score = asdict(score_triple(scenario, plies))
            records.append({"kind": scenario.kind, "workflow": "teacher", **score})
        for group in groups or []:
            for trajectory in group.trajectories:
                if trajectory.failed:
                    continue
                records.append(
                    {
                        "kind": group.task.gold["kind"],
                        "workflow": f"{self.config.workflow} ({request.system})",
                        **trajectory.metrics,
                    }
                )
        table = argument_table(records, seed=request.seed)
        ordered = {name: table[name] for name in sorted(table, key=lambda n: n == "teacher")}
        return EnvReport(ordered, markdown_table(ordered))


def decision_metrics(scenario: Scenario, plies: list[ParsedPly]) -> dict[str, float]:
    """`task_score`, `right_decision`, `right_decision_<kind>`, `argues_<kind>`; where a ply can
    be argued, `argument_quality` (the mean over those plies); and on a triple whose defendant
    and rebuttal each have a distinction to make, `task_score_with_distinctions` (its
    `task_score` again: the mean over those triples separates the teacher from a policy that
    skips one ply's distinction, which the overall mean dilutes with the triples that have
    none)."""
    right = sum(right_decision(scenario, i, ply) for i, ply in enumerate(plies)) / len(plies)
    metrics = {
        "task_score": task_score(scenario, plies),
        "right_decision": right,
        f"right_decision_{scenario.kind}": right,
        f"argues_{scenario.kind}": sum(not ply.abstain for ply in plies) / len(plies),
    }
    if has_every_distinction(scenario):
        metrics["task_score_with_distinctions"] = metrics["task_score"]
    arguable = [i for i, owed in enumerate(expected_abstentions(scenario)) if not owed]
    if arguable:
        metrics["argument_quality"] = sum(
            argument_quality(scenario, i, plies[i])
            if right_decision(scenario, i, plies[i])
            else 0.0
            for i in arguable
        ) / len(arguable)
    return metrics


def distiller_metrics(scenario: Scenario, distilled: list[ParsedPly | None]) -> dict[str, float]:
    """`distiller_failed` (1.0 when the distiller failed on any ply, else 0.0) and, when it read
    every ply, the `<name>_text` metrics (`TEXT_VARIANTS`) of what it read: an episode it failed
    on is left out of their means, which average over the episodes that report them."""
    if any(ply is None for ply in distilled):
        return {"distiller_failed": 1.0}
    said = asdict(score_triple(scenario, distilled))
    return {"distiller_failed": 0.0, **{f"{name}_text": said[name] for name in TEXT_VARIANTS}}


def _text(record: PlyRecord) -> str:
    """A finished ply as the later agents read it: its prose (shown its claims as JSON instead,
    the demo's 2-layer defendant copied the plaintiff's analogies: docs/benchmarks.md)."""
    return record.final.argument or record.revision or record.draft


def _interleave(scenarios: list[Scenario], kinds: int) -> list[Scenario]:
    """Generated triples come grouped by kind; interleave them so that a prefix of a split
    (`eval.max_tasks`, the first training steps) holds every kind."""
    per_kind = len(scenarios) // kinds
    return [scenarios[k * per_kind + i] for i in range(per_kind) for k in range(kinds)]
