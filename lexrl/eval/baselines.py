"""Retrieval baselines on the raw query, scored with the same ranking metrics as the policy."""

from __future__ import annotations

import json
from pathlib import Path

from tqdm.auto import tqdm

from lexrl.envs.statute import StatuteEnv
from lexrl.eval.ranking import ranking_metrics
from lexrl.types import Task


def bm25_baseline(
    env: StatuteEnv, tasks: list[Task], ks: list[int], out_dir: str | Path | None = None
) -> dict[str, float]:
    """BM25 top-max(ks) for each raw query of `tasks`; writes `baseline_bm25.jsonl` per query."""
    depth = max(ks)
    rankings = {
        task.id: env.search(task.inputs["query"], depth)
        for task in tqdm(tasks, desc="bm25 baseline", leave=False)
    }
    gold = {task.id: task.gold for task in tasks}
    summary = ranking_metrics(rankings, gold, ks)
    if out_dir is not None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        with (out_dir / "baseline_bm25.jsonl").open("w", encoding="utf-8") as file:
            for task in tasks:
                record = {
                    "id": task.id,
                    "query": task.inputs["query"],
                    "gold": task.gold,
                    "ranking": rankings[task.id],
                }
                file.write(json.dumps(record, ensure_ascii=False) + "\n")
        (out_dir / "baseline_bm25_summary.json").write_text(json.dumps(summary, indent=2))
    return summary
