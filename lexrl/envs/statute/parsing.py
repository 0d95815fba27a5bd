"""Parsers for the agents' JSON replies. They never raise: a bad reply gives `error`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

PLANNER_ACTIONS = (
    "single_element",
    "supplementary_element",
    "multi_element",
    "supportive_law",
    "abnormality_analyzer",
    "exit",
)
MAX_QUERIES = 5


@dataclass
class PlannerAction:
    action: str | None
    reason: str = ""
    error: str | None = None


@dataclass
class Rewrite:
    queries: list[str] = field(default_factory=list)
    fields: dict = field(default_factory=dict)
    error: str | None = None


def parse_json_object(text: str) -> tuple[dict | None, str | None]:
    """The first JSON object in `text` (models wrap JSON in prose or code fences)."""
    if not isinstance(text, str):
        return None, "reply is not a string"
    start = text.find("{")
    if start < 0:
        return None, "no JSON object in reply"
    decoder = json.JSONDecoder()
    while start >= 0:
        try:
            value, _ = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return value, None
        start = text.find("{", start + 1)
    return None, "malformed JSON"


def parse_planner_action(text: str) -> PlannerAction:
    data, error = parse_json_object(text)
    if data is None:
        return PlannerAction(None, error=error)
    action = data.get("action")
    if not isinstance(action, str) or action.strip() not in PLANNER_ACTIONS:
        return PlannerAction(None, error=f"unknown action {action!r}")
    reason = data.get("reason")
    return PlannerAction(action.strip(), reason=reason if isinstance(reason, str) else "")


def parse_rewrite(text: str) -> Rewrite:
    """`{"query": str}` or `{"queries": [str, ...]}`; blank queries are dropped, at most 5 kept."""
    data, error = parse_json_object(text)
    if data is None:
        return Rewrite(error=error)
    raw = data.get("queries", data.get("query"))
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list):
        return Rewrite(fields=data, error="no `query` or `queries` field")
    queries = [q.strip() for q in raw if isinstance(q, str) and q.strip()][:MAX_QUERIES]
    if not queries:
        return Rewrite(fields=data, error="empty rewrite")
    return Rewrite(queries=queries, fields=data)


def parse_diagnosis(text: str) -> Rewrite:
    """The analyzer's `{"anomaly", "diagnosis"}`; it emits no query."""
    data, error = parse_json_object(text)
    if data is None:
        return Rewrite(error=error)
    if not isinstance(data.get("anomaly"), str):
        return Rewrite(fields=data, error="no `anomaly` field")
    return Rewrite(fields=data)
