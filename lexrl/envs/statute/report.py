"""Statute-retrieval evaluation: the policy's MAS stage and end-to-end ranking, and the raw-query
baselines, in one report with bootstrap 95% intervals.

- MAS stage (LegalMALR Table 7): the pool, best first, cut to `mas_k` (14): Recall and Hit.
- End to end: the pool re-ordered by the final LLM reranker when one is configured (else the pool
  order), scored at every K of `env.eval.ks` with Recall, MRR, nDCG and Hit (trec_eval).
- Baselines on the raw query: BM25 (lexrl's and the STARD authors' scorer), dense, dense + the
  light reranker.
With several samples a task, a task's value is the mean over its samples; intervals resample tasks.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from tqdm.auto import tqdm

from lexrl.bootstrap import format_interval, mean_with_ci
from lexrl.envs.base import EnvReport, ReportRequest
from lexrl.envs.statute.llm_rerank import Candidate, LLMReranker, RerankResult
from lexrl.envs.statute.ranking import metric_names, per_query_metrics
from lexrl.types import Group, Task

if TYPE_CHECKING:
    # Typing only: the env imports this module to build its report.
    from lexrl.envs.statute.env import StatuteEnv

BASELINE_RETRIEVERS = {  # name -> first stage, light reranker, BM25 variant
    "bm25": ("bm25", False, "lucene"),
    "bm25-stard": ("bm25", False, "stard"),
    "dense": ("dense", False, None),
    "dense+reranker": ("dense", True, None),
}


def task_means(per_sample: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Average `metric -> "<task id>#<sample>" -> value` over each task's samples."""
    out: dict[str, dict[str, float]] = {}
    for name, values in per_sample.items():
        grouped: dict[str, list[float]] = {}
        for key, value in values.items():
            grouped.setdefault(key.rsplit("#", 1)[0], []).append(value)
        out[name] = {task: float(np.mean(v)) for task, v in grouped.items()}
    return out


def with_intervals(
    per_task: dict[str, dict[str, float]], resamples: int, seed: int
) -> dict[str, dict[str, float]]:
    return {
        name: mean_with_ci(list(values.values()), n_resamples=resamples, seed=seed)
        for name, values in per_task.items()
    }


def final_rankings(
    env: StatuteEnv, groups: list[Group]
) -> tuple[list[list[list]], list[list[RerankResult | None]]]:
    """Per group and trajectory: the end-to-end ranking and the LLM reranker's record."""
    pools = [[t.outcome["pool"] for t in g.trajectories] for g in groups]
    reranker_config = env.config.eval.final_reranker
    if not reranker_config.model:
        return pools, [[None] * len(p) for p in pools]
    reranker = LLMReranker(reranker_config, env.config.language)
    items = []
    for group in groups:
        for trajectory in group.trajectories:
            pool, scores = trajectory.outcome["pool"], trajectory.outcome["scores"]
            candidates = [
                Candidate(env.documents[env.id_to_index[doc]], score)
                for doc, score in zip(pool, scores, strict=True)
            ]
            items.append((group.task.inputs["query"], candidates))
    results = iter(asyncio.run(reranker.rerank_many(items)))
    rankings, records = [], []
    for group_pools in pools:
        group_rankings, group_records = [], []
        for pool in group_pools:
            result = next(results)
            shown = pool[: reranker_config.max_candidates]
            group_rankings.append([shown[i] for i in result.order] + pool[len(shown) :])
            group_records.append(result)
        rankings.append(group_rankings)
        records.append(group_records)
    return rankings, records


def policy_report(
    env: StatuteEnv, groups: list[Group], request: ReportRequest, out_path: Path | None
) -> tuple[dict[str, dict[str, float]], dict[str, object]]:
    """Metrics with intervals for the policy, and notes (reranker failures). Writes each
    trajectory's end-to-end ranking and reranker record to `out_path`, one a line."""
    mas_k, options = env.config.mas_k, env.config.eval
    gold, mas, final = {}, {}, {}
    rankings, records = final_rankings(env, groups)
    for g, group in enumerate(groups):
        for t, trajectory in enumerate(group.trajectories):
            key = f"{group.task.id}#{t}"
            gold[key] = group.task.gold
            mas[key] = trajectory.outcome["pool"][:mas_k]
            final[key] = rankings[g][t]
    mas_metrics = per_query_metrics(mas, gold, [f"recall@{mas_k}", f"hit_rate@{mas_k}"])
    per_sample = {f"mas_{name}": values for name, values in mas_metrics.items()}
    per_sample.update(per_query_metrics(final, gold, metric_names(options.ks)))
    metrics = with_intervals(task_means(per_sample), request.bootstrap_resamples, request.seed)
    flat = [r for rs in records for r in rs if r is not None]
    notes: dict[str, object] = {}
    if options.final_reranker.model:
        notes["final_reranker"] = {
            "model": options.final_reranker.model,
            "queries": len(flat),
            "unparsable_after_retries": sum(1 for r in flat if r.error),
            "retried": sum(1 for r in flat if r.attempts > 1),
        }
    if out_path is not None:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        with out_path.open("w", encoding="utf-8") as file:
            for g, group in enumerate(groups):
                for t, record in enumerate(records[g]):
                    line = {
                        "task_id": group.task.id,
                        "sample": t,
                        "final_ranking": rankings[g][t],
                        "final_reranker": asdict(record) if record else None,
                    }
                    file.write(json.dumps(line, ensure_ascii=False) + "\n")
    return metrics, notes


def baseline_report(
    env: StatuteEnv,
    tasks: Sequence[Task],
    name: str,
    request: ReportRequest,
    out_path: Path | None,
) -> dict[str, dict[str, float]]:
    """Metrics with intervals of one raw-query baseline; writes its per-query rankings."""
    first_stage, rerank, bm25_variant = BASELINE_RETRIEVERS[name]
    retriever = env.build_retriever(
        first_stage=first_stage, rerank=rerank, bm25_variant=bm25_variant
    )
    ks = env.config.eval.ks
    rankings = {
        task.id: env.search(task.inputs["query"], max(ks), retriever)
        for task in tqdm(tasks, desc=f"baseline {name}", leave=False)
    }
    gold = {task.id: task.gold for task in tasks}
    per_task = per_query_metrics(rankings, gold, metric_names(ks))
    if out_path is not None:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        with out_path.open("w", encoding="utf-8") as file:
            for task in tasks:
                record = {
                    "id": task.id,
                    "query": task.inputs["query"],
                    "gold": task.gold,
                    "ranking": rankings[task.id],
                }
                file.write(json.dumps(record, ensure_ascii=False) + "\n")
    return with_intervals(per_task, request.bootstrap_resamples, request.seed)


def statute_report(
    env: StatuteEnv, tasks: Sequence[Task], groups: list[Group] | None, request: ReportRequest
) -> EnvReport:
    """Score the policy's `groups` (if given) and `env.eval.baselines` on `tasks`;
    writes `eval_<split>_final_rankings.jsonl` and `baseline_<name>_<split>.jsonl` into
    `request.out_dir`."""
    split, out = request.split, request.out_dir
    systems: dict[str, dict[str, dict[str, float]]] = {}
    notes: dict[str, object] = {}
    if groups is not None:
        path = out / f"eval_{split}_final_rankings.jsonl" if out else None
        systems[request.system], notes[request.system] = policy_report(env, groups, request, path)
    for name in env.config.eval.baselines if request.baselines else []:
        path = out / f"baseline_{name}_{split}.jsonl" if out else None
        systems[name] = baseline_report(env, tasks, name, request, path)
    data = {
        "split": split,
        "queries": len(tasks),
        "corpus": env.corpus_source,
        "corpus_size": len(env.corpus),
        "retrieval": asdict(env.config.retrieval),
        "interval": f"percentile bootstrap 95%, {request.bootstrap_resamples} resamples of the queries",
        "systems": systems,
        "notes": notes,
    }
    return EnvReport(data, markdown_report(data))


def _metric_order(systems: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    return list(dict.fromkeys(m for metrics in systems.values() for m in metrics))


def _cell(value: dict[str, float] | None) -> str:
    return "-" if value is None else format_interval(value)


def markdown_report(report: dict) -> str:
    systems = report["systems"]
    metrics = _metric_order(systems)
    lines = [
        f"## Statute retrieval, {report['split']} split ({report['queries']} queries)",
        "",
        f"Corpus: {report['corpus']}. Intervals: {report['interval']}.",
        "MRR scores a query with no gold in the top K as 0 (LegalMALR counts it as rank K+1).",
        "",
        "| metric | " + " | ".join(systems) + " |",
        "|---|" + "---|" * len(systems),
    ]
    for metric in metrics:
        cells = " | ".join(_cell(values.get(metric)) for values in systems.values())
        lines.append(f"| {metric} | {cells} |")
    for name, note in report["notes"].items():
        if "final_reranker" in note:
            lines += ["", f"Final reranker ({name}): `{json.dumps(note['final_reranker'])}`"]
    return "\n".join(lines) + "\n"
