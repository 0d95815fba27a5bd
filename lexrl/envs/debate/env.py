"""Multi-agent legal debate (the MAD_legal technical report, "Multi-Agent Debate for Brazilian
Legal Reasoning" (2024)): debater X, debater Y and a judge, every one of them the policy (or the
judge an external model).

Protocol (the report's sec. 2.3): X opens (neutral); Y opens after reading X; X rebuts Y; Y rebuts
X; the judge reads the question and both rebuttals and gives the final answer. Multiple choice:
X begins with the option it argues (`###B###`), Y must argue a DIFFERENT option (a Y that names
X's option or none is told why and re-asked once; still invalid, it is penalised), the judge may
pick any option (its last named option counts; `parsing` reads the marker or, failing it, a
stated "the answer is B"). Open-ended (OAB): the judge writes the answer with its
citations and rationale, scored by the rubric judges and the citation F1.

Systems: `irac` and `vanilla` (the two prompt families, a prompt file per role) and `single`
(the judge alone, no debate: the single-agent baseline). Training plays `protocol`; the test
split holds every held-out question once per system of `eval_systems`, so one evaluation scores
them all on the same questions and the report puts them side by side.
"""

from __future__ import annotations

import dataclasses
import random
from functools import cached_property
from typing import Any

from lexrl.envs.base import Env, EnvReport, ReportRequest, prompt_text
from lexrl.envs.debate.citations import citation_scores, extract_citations
from lexrl.envs.debate.data import barexam_tasks, lexam_tasks, oab_tasks
from lexrl.envs.debate.degenerate import debate_policies
from lexrl.envs.debate.metrics import markdown_table, mcq_system_metrics, open_system_metrics
from lexrl.envs.debate.options import (
    FAMILIES,
    SYSTEMS,
    DebateEnvConfig,
)
from lexrl.envs.debate.parsing import decision, position, stated_options
from lexrl.envs.debate.reward import (
    McqOutcome,
    adversarial_role_rewards,
    debate_metrics,
    mcq_components,
)
from lexrl.envs.debate.rubric import RUBRIC_FORMAT, parse_rubric, rubric_messages
from lexrl.envs.debate.teacher import mcq_teacher, open_teacher
from lexrl.envs.degenerate import TeacherFactory
from lexrl.envs.lexam.data import default_sample
from lexrl.envs.mcq import format_choices, option_label
from lexrl.errors import ConfigError, DatasetError
from lexrl.policy import Messages, Policy, Teacher
from lexrl.rewards.judge import JudgeClient, JudgeParseError, strip_thinking
from lexrl.types import Group, Task, Trajectory

ROLES = ("debater_x", "debater_y", "judge")


def load_prompt(name: str) -> str:
    return prompt_text("lexrl.envs.debate", name)


def rubric_score(reply: str) -> float:
    """The rubric judge's score in [0, 1] (module-level: its name is part of the cache key)."""
    return parse_rubric(reply).score


class DebateEnv(Env):
    name = "debate"

    def __init__(self, config: DebateEnvConfig):
        self.config = config
        self.open = config.dataset == "oab"
        self.lexam_split = config.lexam_split or (
            "facts" if config.source == "sample" else "course"
        )
        self._tasks = self._load()
        roles = ["debater_x", "debater_y"]
        if config.judge == "policy":
            roles.append("judge")
        self.roles = tuple(roles)
        if self.open:
            self.reward_components = ("rubric", "citation_f1")
            self.episode_metrics = ("citation_precision", "citation_recall", "citation_f1")
            self.headline_metric = "citation_f1"
            if config.rubric_weight:
                self.episode_metrics = ("rubric", *self.episode_metrics)
        else:
            self.reward_components = ("correct", "format", "invalid")
            self.episode_metrics = ("accuracy", "parsed")
            self.headline_metric = "accuracy"
            if config.protocol != "single":
                self.episode_metrics += (
                    "x_accuracy",
                    "y_valid",
                    "judge_follows_x",
                    "judge_follows_y",
                )
        kind = "open" if self.open else "mcq"
        self.prompts = {
            f"{family}_{role}": load_prompt(f"{family}_{role}").format(
                answer_format=load_prompt(
                    f"format_{kind}_{'judge' if role == 'judge' else 'debater'}"
                ).strip()
            )
            for family in FAMILIES
            for role in ROLES
        }
        self.prompts["single_judge"] = load_prompt("single_judge").format(
            answer_format=load_prompt(f"format_{kind}_judge").strip()
        )

    @classmethod
    def from_config(cls, config: DebateEnvConfig) -> DebateEnv:
        return cls(config)

    def _load(self) -> dict[str, list[Task]]:
        config = self.config
        if config.dataset == "lexam":
            source = (
                str(default_sample(config.lexam_config))
                if config.source == "sample"
                else config.source
            )
            tasks = lexam_tasks(
                source,
                config.lexam_config,
                config.language or None,
                config.eval_fraction,
                config.split_seed,
                self.lexam_split,
            )
        elif config.source == "sample":
            raise DatasetError(
                f"env.source: lexrl ships no {config.dataset} sample; give a Hub id or a local file"
            )
        elif config.dataset == "barexam":
            tasks = barexam_tasks(
                config.source, config.eval_fraction, config.split_seed, config.hub_config
            )
        else:
            tasks = oab_tasks(config.source, config.eval_fraction, config.split_seed)
        for part in tasks.values():
            for task in part:
                if task.meta.get("n_options", 0) > 26:
                    raise DatasetError(
                        f"{task.id}: {task.meta['n_options']} options; debates use letter "
                        "labels, up to 26 options"
                    )
        return tasks

    @cached_property
    def judge_client(self) -> JudgeClient:
        """The external debate judge, connected on first use."""
        return JudgeClient(self.config.judges, self.config.judge_cache_dir)

    @cached_property
    def rubric_client(self) -> JudgeClient:
        """The rubric judges of open-ended answers, connected on first use."""
        return JudgeClient(
            self.config.rubric_judges, self.config.judge_cache_dir, self.config.judge_aggregate
        )

    def tasks(self, split: str) -> list[Task]:
        """`train`: each training question under `protocol`. Any other split: each question once
        per system of `eval_systems`, the systems of one question next to each other (so a
        prefix, `eval.max_tasks`, compares the systems on the same questions)."""
        if split not in self._tasks:
            raise ConfigError(f"the debate env has splits {', '.join(self._tasks)}, not {split!r}")
        systems = [self.config.protocol] if split == "train" else self.config.eval_systems
        return [
            _for_system(task, system, tagged=split != "train")
            for task in self._tasks[split]
            for system in systems
        ]

    def questions(self, split: str) -> list[Task]:
        """The split's questions, once each."""
        return self._tasks[split]

    def stats(self) -> dict[str, Any]:
        return {
            "dataset": self.config.dataset,
            "source": self.config.source,
            **({"lexam_split": self.lexam_split} if self.config.dataset == "lexam" else {}),
            **{split: {"questions": len(tasks)} for split, tasks in self._tasks.items()},
        }

    def text_corpus(self) -> list[str]:
        texts = list(self.prompts.values())
        texts += [self.question_text(task) for task in self._tasks.get("train", [])]
        return texts

    def question_text(self, task: Task) -> str:
        if self.open:
            category = task.inputs["category"]
            return f"Question{f' ({category})' if category else ''}: {task.inputs['statement']}"
        return f"Question: {task.inputs['question']}{format_choices(task.inputs['choices'])}"

    def teacher(self, task: Task, rng: random.Random) -> Teacher:
        """The scripted debate (`teacher.py`): X argues the gold, Y another option, the judge
        decides the gold; open-ended, the reference answer. An external judge answers for
        itself, so the teacher plays only the roles the policy plays."""
        return open_teacher(task) if self.open else mcq_teacher(task, rng)

    def degenerate_policies(self) -> dict[str, TeacherFactory]:
        return debate_policies(self.open)

    # -- the episode -------------------------------------------------------------------------

    async def run_episode(self, task: Task, policy: Policy) -> Trajectory:
        system = task.meta["system"]
        question = self.question_text(task)
        if system == "single":
            answer = await self._judge(
                task, policy, self.prompts["single_judge"], f"{question}\n\nYour answer:"
            )
            return await self._finish(task, policy, answer, None)
        debate = await self._debate(task, policy, system, question)
        message = (
            f"{question}\n\n{self._side('X', debate['x'])} rebuttal:\n{debate['x_rebuttal']}\n\n"
            f"{self._side('Y', debate['y'])} rebuttal:\n{debate['y_rebuttal']}\n\nYour decision:"
        )
        answer = await self._judge(task, policy, self.prompts[f"{system}_judge"], message)
        return await self._finish(task, policy, answer, debate)

    def _side(self, name: str, position: int | None) -> str:
        if self.open or position is None:
            return f"Debater {name}'s"
        return f"Debater {name}'s (for option {option_label(position, 26)})"

    def _position(self, task: Task, text: str) -> int | None:
        return position(text, task.meta["n_options"])

    async def _debate(
        self, task: Task, policy: Policy, family: str, question: str
    ) -> dict[str, Any]:
        x_opening = await self._debater(
            policy, "debater_x", family, f"{question}\n\nYour opening statement:"
        )
        x = None if self.open else self._position(task, x_opening)
        y_request = (
            f"{question}\n\n{self._side('X', x)} opening:\n{x_opening}\n\n"
            f"Your opening statement{self._other_options(task, x)}:"
        )
        conversation: list[dict[str, str]] = [{"role": "user", "content": y_request}]
        y_opening = await self._debater(policy, "debater_y", family, conversation)
        y, reasks = None, 0
        if not self.open:
            y = self._position(task, y_opening)
            if y is None or y == x:
                reasks = 1
                policy.trajectory.turns[-1].trainable = False
                conversation += [
                    {"role": "assistant", "content": y_opening},
                    {"role": "user", "content": self._invalid_reason(task, x, y)},
                ]
                y_opening = await self._debater(policy, "debater_y", family, conversation)
                y = self._position(task, y_opening)
        y_invalid = not self.open and (y is None or y == x)
        if y_invalid:
            y = None
        x_rebuttal = await self._debater(
            policy,
            "debater_x",
            family,
            f"{question}\n\nYour opening:\n{x_opening}\n\n{self._side('Y', y)} opening:\n"
            f"{y_opening}\n\nYour rebuttal:",
        )
        y_rebuttal = await self._debater(
            policy,
            "debater_y",
            family,
            f"{question}\n\nYour opening:\n{y_opening}\n\n{self._side('X', x)} rebuttal:\n"
            f"{x_rebuttal}\n\nYour rebuttal:",
        )
        return {
            "x_opening": x_opening,
            "y_opening": y_opening,
            "x_rebuttal": x_rebuttal,
            "y_rebuttal": y_rebuttal,
            "x": x,
            "y": y,
            "y_invalid": y_invalid,
            "y_reasks": reasks,
        }

    def _other_options(self, task: Task, x: int | None) -> str:
        if self.open:
            return ""
        n = task.meta["n_options"]
        others = [option_label(i, n) for i in range(n) if i != x]
        return f", arguing for one of {', '.join(others)}" if x is not None else ""

    def _invalid_reason(self, task: Task, x: int | None, y: int | None) -> str:
        n = task.meta["n_options"]
        others = ", ".join(option_label(i, n) for i in range(n) if i != x)
        said = (
            "you named no option"
            if y is None
            else f"you argued for option {option_label(y, n)}, Debater X's option"
        )
        return (
            f"Invalid: {said}. Debater Y must argue for a different option: one of {others}. "
            "Begin with it between three hash signs, for example ###"
            f"{option_label(0 if x != 0 else 1, n)}###."
        )

    async def _debater(self, policy: Policy, role: str, family: str, messages: Messages) -> str:
        return await policy.chat(
            role,
            self.prompts[f"{family}_{role}"],
            messages,
            temperature=self.config.debater_temperature,
            max_new_tokens=self.config.debater_max_new_tokens,
        )

    async def _judge(self, task: Task, policy: Policy, system: str, message: str) -> str | None:
        """The judge's reply: the policy's, or the external judge's through the judge client
        (recorded as an untrainable turn; None when it failed, the reason in the steps)."""
        if self.config.judge == "policy":
            return await policy.chat(
                "judge",
                system,
                message,
                temperature=self.config.judge_temperature,
                trainable=self.config.judge_trainable,
                max_new_tokens=self.config.judge_max_new_tokens,
            )
        messages = [{"role": "system", "content": system}, {"role": "user", "content": message}]
        n = task.meta.get("n_options", 0)

        def judged_letter(reply: str) -> str:
            if not stated_options(reply, n):
                raise JudgeParseError("no option named (###X###)")
            return reply

        def judged_text(reply: str) -> str:
            if not strip_thinking(reply).strip():
                raise JudgeParseError("the answer is empty")
            return reply

        call = await self.judge_client.ask(
            messages,
            judged_text if self.open else judged_letter,
            "Write your answer." if self.open else "End with the correct option as ###X###.",
        )
        if call.reply is not None:
            policy.record("judge", system, [{"role": "user", "content": message}], call.reply)
        policy.trajectory.steps.append({"external_judge": dataclasses.asdict(call)})
        return None if call.score is None else call.reply

    # -- rewards -----------------------------------------------------------------------------

    async def _finish(
        self, task: Task, policy: Policy, answer: str | None, debate: dict[str, Any] | None
    ) -> Trajectory:
        steps = list(policy.trajectory.steps)
        system = task.meta["system"]
        if answer is None:
            trajectory = policy.finish({"system": system, "debate": debate}, {}, steps)
            trajectory.failed = "external judge failed: " + str(
                steps[-1]["external_judge"]["error"]
            )
            return trajectory
        if self.open:
            return await self._scored_open(task, policy, answer, debate, steps)
        n = task.meta["n_options"]
        outcome = McqOutcome(
            gold=task.gold,
            judge=decision(answer, n),
            x=debate["x"] if debate else None,
            y=debate["y"] if debate else None,
            y_invalid=bool(debate and debate["y_invalid"]),
        )
        parsed = self._parsed(task, debate, outcome)
        components = mcq_components(
            outcome, list(parsed.values()), self.config.format_weight, self.config.invalid_penalty
        )
        metrics = debate_metrics(outcome)
        if debate is None:
            metrics = {k: metrics[k] for k in ("accuracy", "parsed")}
        record = {"system": system, **dataclasses.asdict(outcome)}
        if debate is not None:
            record["y_reasks"] = debate["y_reasks"]
        trajectory = policy.finish(record, components, steps, metrics)
        if self.config.reward_mode == "adversarial" and debate is not None:
            trajectory.role_rewards = adversarial_role_rewards(
                outcome, parsed, self.config.format_weight, self.config.invalid_penalty
            )
        return trajectory

    def _parsed(
        self, task: Task, debate: dict[str, Any] | None, outcome: McqOutcome
    ) -> dict[str, bool]:
        """Per role the policy played with a letter to give, whether it gave one: the
        openings' positions (Y's after its re-ask, whatever its validity) and the judgment."""
        parsed: dict[str, bool] = {}
        if debate is not None:
            parsed["debater_x"] = debate["x"] is not None
            parsed["debater_y"] = self._position(task, debate["y_opening"]) is not None
        if self.config.judge == "policy":
            parsed["judge"] = outcome.judge is not None
        return parsed

    async def _scored_open(
        self,
        task: Task,
        policy: Policy,
        answer: str,
        debate: dict[str, Any] | None,
        steps: list[dict[str, Any]],
    ) -> Trajectory:
        cited = extract_citations(strip_thinking(answer))
        scores = citation_scores(cited, task.gold["citations"])
        outcome = {
            "system": task.meta["system"],
            "answer": answer,
            "citations": cited,
            "debate": debate,
        }
        metrics = {f"citation_{k}": v for k, v in scores.items()}
        rubric = None
        if self.config.rubric_weight:
            messages = rubric_messages(
                task.inputs["statement"], task.gold["reference"], strip_thinking(answer)
            )
            result = await self.rubric_client.score(messages, rubric_score, RUBRIC_FORMAT)
            steps.append({"rubric": [dataclasses.asdict(call) for call in result.calls]})
            for call in result.calls:
                if call.reply is not None:
                    policy.record(
                        "rubric_judge", call.messages[0]["content"], call.messages[1:], call.reply
                    )
            if result.score is None:
                errors = "; ".join(str(c.error) for c in result.calls if c.error)
                trajectory = policy.finish(outcome, {}, steps, metrics)
                trajectory.failed = f"rubric judge failed: {errors}"
                return trajectory
            rubric = result.score
        outcome["rubric"] = rubric
        if rubric is not None:
            metrics["rubric"] = rubric
        components = {
            "rubric": self.config.rubric_weight * (rubric or 0.0),
            "citation_f1": self.config.citation_weight * scores["f1"],
        }
        return policy.finish(outcome, components, steps, metrics)

    # -- report ------------------------------------------------------------------------------

    def report(
        self, tasks: list[Task], groups: list[Group] | None, request: ReportRequest
    ) -> EnvReport | None:
        """Per system on the same questions: accuracy and the persuasion metrics (multiple
        choice), or the rubric score, citation precision / recall / F1 and BERTScore F1
        (open-ended), each x100 with its interval. Episodes whose judge failed are counted in
        `failed` and left out."""
        if groups is None:
            return None
        by_system: dict[str, list[dict[str, Any]]] = {}
        answers: list[tuple[dict[str, Any], str, str]] = []
        for group in groups:
            system = group.task.meta["system"]
            for trajectory in group.trajectories:
                if trajectory.failed:
                    by_system.setdefault(system, []).append({"failed": True})
                    continue
                outcome = trajectory.outcome
                if self.open:
                    record = {**trajectory.metrics, "rubric": outcome["rubric"]}
                    answers.append((record, outcome["answer"], group.task.gold["reference"]))
                else:
                    record = {k: outcome[k] for k in ("gold", "judge", "y_invalid")}
                    if system != "single":
                        record.update(x=outcome["x"], y=outcome["y"])
                by_system.setdefault(system, []).append(record)
        if self.open and self.config.bertscore_model and answers:
            from lexrl.envs.debate.bertscore import bertscore_f1

            f1 = bertscore_f1(
                [strip_thinking(answer) for _, answer, _ in answers],
                [reference for _, _, reference in answers],
                self.config.bertscore_model,
                self.config.bertscore_layers,
            )
            for (record, _, _), value in zip(answers, f1, strict=True):
                record["bertscore_f1"] = value
        order = [*self.config.eval_systems, *SYSTEMS]
        ordered = {s: by_system[s] for s in dict.fromkeys(order) if s in by_system}
        scored = open_system_metrics if self.open else mcq_system_metrics
        data = {}
        for system, records in ordered.items():
            data[system] = scored([r for r in records if "failed" not in r], request.seed)
            data[system]["failed"] = sum("failed" in r for r in records)
        names = {"single": "single agent", "vanilla": "MAD-vanilla", "irac": "MAD-IRAC"}
        table = {f"{names[s]} ({request.system})": m for s, m in data.items()}
        return EnvReport(
            {"systems": data, "questions": len({t.meta["question_id"] for t in tasks})},
            markdown_table(table, self.open),
        )


def _for_system(task: Task, system: str, tagged: bool) -> Task:
    """`task` played under `system`; `tagged` gives it the id `<question>/<system>`, so one
    evaluation's tasks have unique ids."""
    return Task(
        id=f"{task.id}/{system}" if tagged else task.id,
        inputs=task.inputs,
        gold=task.gold,
        meta={**task.meta, "system": system, "question_id": task.id},
    )
