"""LEXam (Fan et al. 2025, "LEXam: Benchmarking Legal Reasoning on 340 Law Exams",
arXiv:2505.12864): law-exam questions answered by the policy.

Multiple-choice questions are scored by the answer marker (`###C###`, the last one counts);
open questions by LLM judges against the reference answer (`[[0.7]]`, the ensemble's minimum).
Workflows: `single` (the paper's examinee) and `draft_review` (the policy drafts, then reviews
its own draft as `reviewer` and gives the final answer).

A judge that cannot score an answer (no parsable score after the re-asks, or its endpoint down
after the client's retries) fails the episode: `Trajectory.failed` says why, the trainer leaves
it out of its group's advantages and the metrics count it as `judge/failed`, never as a 0.
"""

from __future__ import annotations

import dataclasses
import random
import zlib
from functools import cached_property
from typing import Any

from lexrl.envs.base import Env, EnvReport, ReportRequest, prompt_text
from lexrl.envs.degenerate import TeacherFactory
from lexrl.envs.lexam.data import (
    MCQ_CONFIGS,
    default_sample,
    load_lexam,
    split_by_course,
    split_by_facts,
    to_task,
)
from lexrl.envs.lexam.degenerate import lexam_policies
from lexrl.envs.lexam.metrics import markdown_breakdown, mcq_metrics, mcq_record, open_metrics
from lexrl.envs.lexam.options import LexamEnvConfig
from lexrl.envs.lexam.reward import mcq_reward
from lexrl.envs.mcq import format_choices, option_label, parse_mcq_answer
from lexrl.errors import ConfigError, DatasetError
from lexrl.policy import Messages, Policy, Teacher
from lexrl.rewards.judge import (
    BRACKET_FORMAT,
    JudgeClient,
    JudgeParseError,
    parse_bracket_score,
    strip_thinking,
)
from lexrl.types import Group, Task, Trajectory

SPLITS = {"course": split_by_course, "facts": split_by_facts}


def load_prompt(name: str) -> str:
    return prompt_text("lexrl.envs.lexam", name)


class LexamEnv(Env):
    name = "lexam"

    def __init__(self, config: LexamEnvConfig):
        self.config = config
        self.open = config.config == "open_question"
        source = str(default_sample(config.config)) if config.source == "sample" else config.source
        items = load_lexam(source, config.config, config.hub_split, config.language or None)
        if not items:
            raise DatasetError(
                f"env: no {config.language or 'any'}-language items of {config.config} in {source}"
            )
        self.split_rule = config.split or (
            "facts" if config.source == "sample" and config.config in MCQ_CONFIGS else "course"
        )
        split = SPLITS[self.split_rule](items, config.eval_fraction, config.split_seed)
        self._tasks = {name: [to_task(item) for item in part] for name, part in split.items()}
        self.source = source
        roles = ["examinee"]
        if config.workflow == "draft_review":
            roles.append("reviewer")
        if self.open:
            roles.append("judge")
        self.roles = tuple(roles)
        self.reward_components = ("score",) if self.open else ("correct", "format")
        self.episode_metrics = ("score", "judge_calls") if self.open else ("accuracy", "parsed")
        self.headline_metric = "score" if self.open else "accuracy"
        if not self.open and config.workflow == "draft_review":
            self.episode_metrics += ("draft_accuracy",)
        self.prompts = {
            "examinee": load_prompt(
                "examinee_open"
                if self.open
                else ("examinee_mcq" if config.prompt == "paper" else "examinee_mcq_brief")
            ),
            "reviewer": load_prompt("reviewer_open" if self.open else "reviewer_mcq"),
            "judge_system": load_prompt("judge_system"),
            "judge_user": load_prompt("judge_user"),
            "brief_example": load_prompt("brief_example"),
        }

    @classmethod
    def from_config(cls, config: LexamEnvConfig) -> LexamEnv:
        return cls(config)

    @cached_property
    def judge_client(self) -> JudgeClient:
        """The judge endpoints, connected on first use (MCQ runs and `--stats` never connect)."""
        return JudgeClient(
            self.config.judges, self.config.judge_cache_dir, self.config.judge_aggregate
        )

    def tasks(self, split: str) -> list[Task]:
        if split not in self._tasks:
            raise ConfigError(f"LEXam has splits {', '.join(self._tasks)}, not {split!r}")
        return self._tasks[split]

    def text_corpus(self) -> list[str]:
        texts = list(self.prompts.values())
        for task in self._tasks.get("train", []):
            texts.append(self.question_text(task))
            if isinstance(task.gold, str):
                texts.append(task.gold)
        return texts

    def stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = {
            "source": self.source,
            "config": self.config.config,
            "split": self.split_rule,
        }
        for split, tasks in self._tasks.items():
            courses: dict[str, int] = {}
            for task in tasks:
                courses[task.meta["course"]] = courses.get(task.meta["course"], 0) + 1
            stats[split] = {"questions": len(tasks), "courses": courses}
        return stats

    def report(
        self, tasks: list[Task], groups: list[Group] | None, request: ReportRequest
    ) -> EnvReport | None:
        """MCQ accuracy and parse rate, or judge scores x100 (failed judgments counted, not
        averaged), overall, by language and (MCQ) by option count, each with its interval."""
        if groups is None:
            return None
        episodes = [(g.task, t) for g in groups for t in g.trajectories]
        if self.open:
            records = [
                {
                    "score": None if t.failed else t.outcome["score"],
                    "language": task.meta["language"],
                }
                for task, t in episodes
            ]
            data = open_metrics(records, seed=request.seed)
        else:
            records = [mcq_record(task, t) for task, t in episodes]
            data = mcq_metrics(records, seed=request.seed)
        return EnvReport(data, markdown_breakdown(data))

    def question_text(self, task: Task) -> str:
        choices = task.inputs["choices"]
        options = format_choices(choices) if choices else ""
        return f"Question: {task.inputs['question']}{options}"

    async def run_episode(self, task: Task, policy: Policy) -> Trajectory:
        course = task.inputs["course"]
        question = self.question_text(task)
        draft = await policy.chat(
            "examinee",
            self.prompts["examinee"].format(course=course),
            [*self.demonstration(task), {"role": "user", "content": f"{question}\nAnswer:"}],
            max_new_tokens=self.config.max_new_tokens,
        )
        answer = draft
        if self.config.workflow == "draft_review":
            answer = await policy.chat(
                "reviewer",
                self.prompts["reviewer"].format(course=course),
                [{"role": "user", "content": f"{question}\n\nDraft answer:\n{draft}"}],
                max_new_tokens=self.config.max_new_tokens,
            )
        if self.open:
            return await self._judged(task, policy, answer)
        return self._scored_mcq(task, policy, draft, answer)

    def teacher(self, task: Task, rng: random.Random) -> Teacher:
        """The reference answer, for the examinee and the reviewer alike: an open question's
        text, an MCQ's gold label in the marker the prompt asks for (`Correct Answer: ###C###`,
        or `###C###` under `brief`). As the policy's judge (no `judges`) it scores that answer,
        which is the reference itself, 1.0 (`teacher_max_words` may cut it short)."""
        cut = self.config.teacher_max_words
        if self.open:
            answer = task.gold if cut is None else " ".join(task.gold.split()[:cut])
        else:
            label = option_label(task.gold, task.meta["n_options"])
            marker = f"###{label}###"
            answer = marker if self.config.prompt == "brief" else f"Correct Answer: {marker}"

        def respond(role: str, messages: Messages) -> str:
            if role == "judge":
                return "The answer is the reference answer. The correctness score: [[1.0]]"
            return answer

        return respond

    def degenerate_policies(self) -> dict[str, TeacherFactory]:
        return lexam_policies(self.open, self.config.prompt == "brief", not self.config.judges)

    def demonstration(self, task: Task) -> list[dict[str, str]]:
        """The `brief` prompt's one worked exchange (`prompts/brief_example.txt`, a made-up
        question, not from LEXam; `*` marks its right option): with it SmolLM2-135M writes the
        `###X###` marker in about half of its answers, without it in under one in twenty
        (docs/benchmarks.md). Its options are rotated by the task id, so the example's answer
        letter varies and copying it is no strategy."""
        if self.open or self.config.prompt != "brief":
            return []
        stem, *lines = self.prompts["brief_example"].strip().splitlines()
        right = next(i for i, line in enumerate(lines) if line.startswith("*"))
        options = [line[1:].strip() for line in lines]
        shift = zlib.crc32(task.id.encode()) % len(options)
        rotated = options[-shift:] + options[:-shift] if shift else options
        label = option_label((right + shift) % len(options), len(options))
        return [
            {"role": "user", "content": f"Question: {stem}{format_choices(rotated)}\nAnswer:"},
            {"role": "assistant", "content": f"###{label}###"},
        ]

    def _scored_mcq(self, task: Task, policy: Policy, draft: str, answer: str) -> Trajectory:
        n_options = task.meta["n_options"]
        components = mcq_reward(answer, task.gold, n_options, self.config.chance_normalised)
        predicted = parse_mcq_answer(answer, n_options)
        metrics = {
            "accuracy": float(predicted == task.gold),
            "parsed": float(predicted is not None),
        }
        if self.config.workflow == "draft_review":
            metrics["draft_accuracy"] = float(parse_mcq_answer(draft, n_options) == task.gold)
        weighted = {
            "correct": components["correct"],
            "format": self.config.format_weight * components["format"],
        }
        outcome = {"predicted": predicted, "gold": task.gold, "n_options": n_options}
        return policy.finish(outcome, weighted, metrics=metrics)

    def judge_messages(self, task: Task, answer: str) -> list[dict[str, str]]:
        """The paper's judge prompt (App. E.2) on the answer with any thinking stripped."""
        user = self.prompts["judge_user"].format(
            question=task.inputs["question"], reference=task.gold, answer=strip_thinking(answer)
        )
        return [
            {"role": "system", "content": self.prompts["judge_system"]},
            {"role": "user", "content": user},
        ]

    async def _judged(self, task: Task, policy: Policy, answer: str) -> Trajectory:
        messages = self.judge_messages(task, answer)
        if self.config.judges:
            result = await self.judge_client.score(messages, parse_bracket_score)
            score, calls = result.score, [dataclasses.asdict(call) for call in result.calls]
            for call in result.calls:
                if call.reply is not None:
                    policy.record(
                        "judge", call.messages[0]["content"], call.messages[1:], call.reply
                    )
        else:
            score, calls = await self._policy_judges(policy, messages)
        outcome = {"answer": answer, "score": score}
        steps = [{"judge": call} for call in calls]
        if score is None:
            reasons = "; ".join(str(call["error"]) for call in calls if call.get("error"))
            trajectory = policy.finish(outcome, {}, steps, {"judge_calls": len(calls)})
            trajectory.failed = f"judge failed: {reasons}"
            return trajectory
        return policy.finish(
            outcome, {"score": score}, steps, {"score": score, "judge_calls": len(calls)}
        )

    async def _policy_judges(
        self, policy: Policy, messages: list[dict[str, str]]
    ) -> tuple[float | None, list[dict[str, Any]]]:
        """The policy as judge, at temperature 0 (the paper's judges), re-asked with the reason
        when its judgment has no parsable score."""
        system, conversation = messages[0]["content"], list(messages[1:])
        calls: list[dict[str, Any]] = []
        for _ in range(self.config.judge_max_parse_retries + 1):
            reply = await policy.chat(
                "judge",
                system,
                conversation,
                temperature=0.0,
                trainable=self.config.judge_trainable,
            )
            try:
                score = parse_bracket_score(reply)
            except JudgeParseError as error:
                calls.append(
                    {"judge": "policy", "reply": reply, "score": None, "error": str(error)}
                )
                conversation += [
                    {"role": "assistant", "content": reply},
                    {"role": "user", "content": f"{error} {BRACKET_FORMAT}"},
                ]
                continue
            calls.append({"judge": "policy", "reply": reply, "score": score, "error": None})
            return score, calls
        return None, calls
