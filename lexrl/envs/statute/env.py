"""LegalMALR: multi-agent query understanding for statute retrieval (Li et al. 2026, "LegalMALR:
Multi-Agent Query Understanding and LLM-Based Reranking for Chinese Statute Retrieval",
arXiv:2601.17692).

One policy plays seven roles that differ only by system prompt (`prompts/<language>/<role>.txt`).
Each iteration the planner picks one rewrite agent or exits; every query the agent emits goes to
retrieval (first stage top-`first_stage_k`, cut to top-`final_k`) and the results merge into the
candidate pool. At most `max_iterations` reformulations, then a forced exit. The reward is eq. 1-4
(`lexrl.rewards.statute`).

A real demo task (the built-in world, `dataset: demo`):
    query: "Help, my boss has not paid me for two months, and also my ex will not pay anything
            for our son. What can I do?"   gold: [Employment Act Article 5, Family Act Article 7]

The first stage and the light reranker are `env.retrieval` (BM25 by default; the paper's
dense + Qwen3-Reranker in `configs/stard_mas_grpo.yaml`). The outcome of an episode is the pool,
best first, with each candidate's best retrieval score (what the final LLM reranker is shown).
Departures from the paper, each a choice the paper leaves open: the pool is ordered by
reciprocal-rank fusion, and the abnormality analyzer is always followed by the
rewriter, both chosen by the single planner action `abnormality_analyzer`.
"""

from __future__ import annotations

import json
import random
import re
from functools import cached_property
from importlib import resources
from typing import Any

from lexrl.envs.base import Env, EnvReport, ReportRequest
from lexrl.envs.degenerate import TeacherFactory
from lexrl.envs.statute.data import (
    default_stopwords,
    load_csaid,
    load_jsonl,
    load_stard,
    load_stopwords,
)
from lexrl.envs.statute.degenerate import statute_policies
from lexrl.envs.statute.demo_world import ACTS, PROCEDURE_TERMS, build_demo_world
from lexrl.envs.statute.options import StatuteEnvConfig
from lexrl.envs.statute.parsing import (
    PLANNER_ACTIONS,
    parse_diagnosis,
    parse_planner_action,
    parse_rewrite,
)
from lexrl.envs.statute.pool import CandidatePool
from lexrl.policy import Messages, Policy, Teacher
from lexrl.retrieval.base import Retriever
from lexrl.retrieval.factory import build_retriever
from lexrl.rewards.statute import coverage_gains, hit, recall, statute_reward
from lexrl.types import Group, Task, Trajectory

ROLES = (
    "planner",
    "single_element",
    "supplementary_element",
    "multi_element",
    "supportive_law",
    "abnormality_analyzer",
    "abnormality_rewriter",
)
REWRITE_AGENTS = tuple(action for action in PLANNER_ACTIONS if action != "exit")
POOL_SHOWN_TO_PLANNER = 5
LABELS = {
    "en": {"question": "Question", "iteration": "Iteration", "used": "Agents used", "none": "none",
           "candidates": "Candidates", "diagnosis": "Diagnosis"},
    "zh": {"question": "问题", "iteration": "轮次", "used": "已调用的智能体", "none": "无",
           "candidates": "候选法条", "diagnosis": "诊断"},
}  # fmt: skip


def load_prompts(language: str) -> dict[str, str]:
    folder = resources.files("lexrl.envs.statute") / "prompts" / language
    return {role: (folder / f"{role}.txt").read_text(encoding="utf-8").strip() for role in ROLES}


class StatuteEnv(Env):
    name = "statute"
    roles = ROLES
    reward_components = ("recall", "coverage_gain", "step_penalty", "early_exit")
    headline_metric = "mas_recall"
    episode_metrics = (
        "mas_recall",
        "mas_hit",
        "pool_recall",
        "pool_size",
        "retrieval_calls",
        "iterations",
        "invalid_actions",
    )
    actions = PLANNER_ACTIONS

    def __init__(
        self,
        corpus: list[dict],
        splits: dict[str, list[Task]],
        config: StatuteEnvConfig,
        corpus_source: str = "",
    ):
        self.config = config
        self.corpus = corpus
        self.splits = splits
        self.corpus_source = corpus_source
        self.notes: list[str] = []
        """What the loader dropped or could not match (one line each)."""
        self.prompts = load_prompts(config.language)
        self.id_to_index = {article["id"]: index for index, article in enumerate(corpus)}
        self.documents = [f"{a['name']} {a['content']}" for a in corpus]
        self.stopwords: frozenset[str] = frozenset()
        if config.language == "zh":
            self.stopwords = (
                load_stopwords(config.stopwords_path)
                if config.stopwords_path
                else default_stopwords()
            )

    @cached_property
    def retriever(self) -> Retriever:
        """The configured retriever, built on first use: `--stats` and the loaders never load a
        retrieval model."""
        return self.build_retriever()

    def build_retriever(
        self,
        first_stage: str | None = None,
        rerank: bool | None = None,
        bm25_variant: str | None = None,
    ) -> Retriever:
        """The configured retriever over this corpus, or a variant of it (for the baselines)."""
        return build_retriever(
            self.config.retrieval,
            self.documents,
            self.config.first_stage_k,
            self.config.language,
            self.stopwords,
            first_stage=first_stage,
            rerank=rerank,
            bm25_variant=bm25_variant,
        )

    @classmethod
    def from_config(cls, config: StatuteEnvConfig) -> StatuteEnv:
        if config.dataset == "demo":
            world = build_demo_world()
            splits = {
                split: [
                    Task(
                        id=q["id"],
                        inputs={"query": q["query"]},
                        gold=q["gold"],
                        meta={"type": q["type"], "plan": q["plan"]},
                    )
                    for q in questions
                ]
                for split, questions in (("train", world.train), ("test", world.test))
            }
            return cls(world.corpus, splits, config, "built-in demo world")
        if config.dataset in ("stard", "csaid"):
            if config.dataset == "stard":
                data = load_stard(
                    config.queries_path, config.split_path, config.corpus_path or None
                )
            else:
                data = load_csaid(
                    config.queries_path, config.corpus_path or None, config.allow_unmatched_gold
                )
            env = cls(data.corpus, data.splits, config, data.corpus_source)
            env.notes = data.notes
            return env
        return cls.from_jsonl(config)

    @classmethod
    def from_jsonl(cls, config: StatuteEnvConfig) -> StatuteEnv:
        data = load_jsonl(config.corpus_path, config.queries_path)
        return cls(data.corpus, data.splits, config, data.corpus_source)

    def tasks(self, split: str) -> list[Task]:
        if split not in self.splits:
            raise KeyError(f"statute env has no split {split!r}; it has {', '.join(self.splits)}")
        return self.splits[split]

    def stats(self) -> dict[str, object]:
        """Loader statistics: per split, query count, mean gold per query (distinct articles, and
        labels as the file lists them where they differ), mean query length."""
        out: dict[str, object] = {
            "corpus_size": len(self.corpus),
            "corpus_source": self.corpus_source,
            "loader_notes": {"count": len(self.notes), "first": self.notes[:5]},
        }
        for split, tasks in self.splits.items():
            count = max(len(tasks), 1)
            split_stats: dict[str, float] = {
                "queries": len(tasks),
                "mean_gold_per_query": sum(len(t.gold) for t in tasks) / count,
            }
            if any("gold_labels_listed" in t.meta for t in tasks):
                split_stats["mean_gold_labels_listed_per_query"] = (
                    sum(t.meta.get("gold_labels_listed", len(t.gold)) for t in tasks) / count
                )
            split_stats["mean_query_chars"] = sum(len(t.inputs["query"]) for t in tasks) / count
            out[split] = split_stats
        return out

    def report(
        self, tasks: list[Task], groups: list[Group] | None, request: ReportRequest
    ) -> EnvReport:
        """The MAS stage and end-to-end ranking of the policy (after the final LLM reranker when
        `eval.final_reranker` is set) and the raw-query baselines of `env.eval.baselines`, each with
        intervals (`lexrl.envs.statute.report`)."""
        from lexrl.envs.statute.report import statute_report

        return statute_report(self, tasks, groups, request)

    def evaluation_label(self) -> str:
        model = self.config.eval.final_reranker.model
        return "rerank-" + re.sub(r"[^\w.-]+", "-", model) if model else ""

    def text_corpus(self) -> list[str]:
        texts = list(self.prompts.values())
        texts += [f"{a['name']} {a['content']}" for a in self.corpus]
        texts += [task.inputs["query"] for task in self.splits.get("train", [])]
        return texts

    def search(self, query: str, k: int, retriever: Retriever | None = None) -> list[Any]:
        """Article ids of the k best hits for `query` (default: the env's retriever), best first."""
        return [
            self.corpus[h.doc_index]["id"] for h in (retriever or self.retriever).search(query, k)
        ]

    def retrieve(self, query: str) -> list[tuple[Any, float]]:
        """(article id, score) for one emitted query: the first stage's top-`first_stage_k`,
        re-ordered by the light reranker if one is configured, cut to top-`final_k`."""
        hits = self.retriever.search(query, self.config.final_k)
        return [(self.corpus[h.doc_index]["id"], h.score) for h in hits]

    def planner_message(
        self, query: str, iteration: int, steps: list[dict], pool: CandidatePool
    ) -> str:
        label = LABELS[self.config.language]
        used = [s["action"] for s in steps if s.get("action")]
        lines = [
            f"{label['question']}: {query}",
            f"{label['iteration']}: {iteration + 1}/{self.config.max_iterations}",
            f"{label['used']}: {', '.join(used) if used else label['none']}",
        ]
        for step in steps:
            for emitted in step.get("queries", []):
                lines.append(f"- {step['action']}: {emitted}")
        shown = [
            self.corpus[self.id_to_index[d]]["name"] for d in pool.ordered()[:POOL_SHOWN_TO_PLANNER]
        ]
        shown_text = "; ".join(shown) if shown else label["none"]
        lines.append(f"{label['candidates']} ({len(pool)}): {shown_text}")
        return "\n".join(lines)

    async def run_agent(
        self, action: str, query: str, policy: Policy
    ) -> tuple[list[str], str | None]:
        """Call the chosen rewrite agent(s); returns the emitted queries and a parse error."""
        temperature = self.config.rewriter_temperature
        label = LABELS[self.config.language]
        message = f"{label['question']}: {query}"
        if action == "abnormality_analyzer":
            reply = await policy.chat(
                action, self.prompts[action], message, temperature=temperature
            )
            diagnosis = parse_diagnosis(reply)
            if diagnosis.error:
                return [], diagnosis.error
            message += f"\n{label['diagnosis']}: {json.dumps(diagnosis.fields, ensure_ascii=False)}"
            action = "abnormality_rewriter"
        reply = await policy.chat(action, self.prompts[action], message, temperature=temperature)
        rewrite = parse_rewrite(reply)
        return rewrite.queries, rewrite.error

    async def run_episode(self, task: Task, policy: Policy) -> Trajectory:
        query = task.inputs["query"]
        pool = CandidatePool()
        steps: list[dict] = []
        pool_after_iteration: list[list[Any]] = []
        retrieval_calls = 0
        exited_before_retrieval = False
        for iteration in range(self.config.max_iterations):
            reply = await policy.chat(
                "planner",
                self.prompts["planner"],
                self.planner_message(query, iteration, steps, pool),
                temperature=self.config.planner_temperature,
            )
            decision = parse_planner_action(reply)
            if decision.error:
                steps.append({"action": None, "error": decision.error})
                pool_after_iteration.append(pool.ordered())
                continue
            if decision.action == "exit":
                exited_before_retrieval = retrieval_calls == 0
                steps.append({"action": "exit"})
                break
            queries, error = await self.run_agent(decision.action, query, policy)
            for emitted in queries:
                hits = self.retrieve(emitted)
                pool.add([doc for doc, _ in hits], [score for _, score in hits])
                retrieval_calls += 1
            steps.append({"action": decision.action, "queries": queries, "error": error})
            pool_after_iteration.append(pool.ordered())
        else:
            steps.append({"action": "exit", "forced": True})
        ordered = pool.ordered()
        gold = task.gold
        components = statute_reward(
            ordered,
            gold,
            coverage_gains(pool_after_iteration, gold),
            planner_steps=len(steps),
            exited_before_retrieval=exited_before_retrieval,
            alpha=self.config.alpha,
            step_penalty=self.config.step_penalty,
            early_exit_penalty=self.config.early_exit_penalty,
            recall_k=self.config.reward_recall_k,
        )
        mas_pool = ordered[: self.config.mas_k]
        metrics = {
            "mas_recall": recall(mas_pool, gold),
            "mas_hit": hit(mas_pool, gold),
            "pool_recall": recall(ordered, gold),
            "pool_size": float(len(ordered)),
            "retrieval_calls": float(retrieval_calls),
            "iterations": float(sum(1 for s in steps if s["action"] not in (None, "exit"))),
            "invalid_actions": float(sum(1 for s in steps if s.get("error"))),
        }
        outcome = {"pool": ordered, "scores": [pool.best_score(doc) for doc in ordered]}
        return policy.finish(outcome=outcome, components=components, steps=steps, metrics=metrics)

    def degenerate_policies(self) -> dict[str, TeacherFactory]:
        return statute_policies()

    def teacher(self, task: Task, rng: random.Random) -> Teacher:
        """A naive scripted team for warm-start data: correct rewrites, but a planner that picks
        agents uniformly at random and stops after 1-3 of them. GRPO's job is the planning."""
        plan = task.meta.get("plan")
        if plan is None:
            raise NotImplementedError("the scripted teacher needs the demo world's task plans")
        stop_after = rng.randint(1, 3)
        calls = {"planner": 0}

        def respond(role: str, messages: Messages) -> str:
            domain = ACTS[plan["acts"][0]]
            if role == "planner":
                calls["planner"] += 1
                if calls["planner"] > stop_after:
                    return json.dumps(
                        {"action": "exit", "reason": "the candidates cover the question"}
                    )
                action = rng.choice(REWRITE_AGENTS)
                return json.dumps({"action": action, "reason": f"try {action.replace('_', ' ')}"})
            if role == "single_element":
                return json.dumps({"query": plan["concepts"][0]})
            if role == "supplementary_element":
                return json.dumps({"query": f"{plan['concepts'][0]} {domain} conditions"})
            if role == "multi_element":
                return json.dumps({"queries": plan["concepts"]})
            if role == "supportive_law":
                return json.dumps({"query": f"{PROCEDURE_TERMS} {domain}"})
            if role == "abnormality_analyzer":
                anomaly = "domain_overlap" if len(plan["concepts"]) > 1 else "none"
                return json.dumps({"anomaly": anomaly, "diagnosis": f"a {domain} question"})
            if role == "abnormality_rewriter":
                return json.dumps({"query": f"{domain} rights", "reason": "name the domain"})
            raise ValueError(f"no scripted reply for role {role!r}")

        return respond
