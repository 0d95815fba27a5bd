"""Did training beat the cheapest way to earn the reward?

A trained policy's rise over its untrained self says little when a content-free reply (always
abstain, always "Yes", the majority label) earns as much: training may simply have found that
shortcut. This compares the held-out evaluation after training with the best of each env's
degenerate policies (`lexrl.eval.audit`), played on the same tasks, on the reward and on the
env's headline metric, and says whether the trained policy's 95% interval lies above it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from lexrl.eval.audit import TEACHER, AuditRow

BEATS = "yes"
WITHIN = "within the interval"
LOSES = "no"


@dataclass
class DegenerateGain:
    """One measure of one env: the trained policy against the best degenerate policy."""

    env: str
    measure: str
    """`reward` or the env's headline metric."""
    before: float | None
    after: float
    after_low: float | None
    """The lower end of the after value's 95% interval (None without one)."""
    best_policy: str | None
    """The degenerate policy with the highest value of `measure` (None: none reports it)."""
    best_value: float | None
    tied: int
    """How many other degenerate policies have `best_value` too."""
    teacher: float | None
    """The scripted teacher's value on the same tasks, the upper reference."""

    @property
    def gain(self) -> float | None:
        return None if self.best_value is None else self.after - self.best_value

    @property
    def verdict(self) -> str:
        """`yes` when the interval's lower end is above the best degenerate value, `within the
        interval` when only the mean is, `no` otherwise (`n/a` without a degenerate value)."""
        if self.best_value is None:
            return "n/a"
        if self.after <= self.best_value:
            return LOSES
        low = self.after if self.after_low is None else self.after_low
        return BEATS if low > self.best_value else WITHIN


def _value(row: AuditRow, measure: str) -> float | None:
    return row.mean_reward if measure == "reward" else row.headline


def gains(
    summaries: dict[str, dict[str, float]],
    intervals: dict[str, dict[str, dict[str, float]]],
    baselines: dict[str, list[AuditRow]],
    mixture: bool,
) -> list[DegenerateGain]:
    """For each env of `baselines` (by env name, as `degenerate_baselines` returns them) and
    each of reward and its headline metric: the `after` evaluation (`summaries["after"]`, a
    mixture's keys prefixed `<env>/`) against the best degenerate policy on the same tasks."""
    rows = []
    for env, audit_rows in baselines.items():
        if not audit_rows:
            continue
        headline = audit_rows[0].headline_metric
        for measure in dict.fromkeys(("reward", headline)):
            key = f"{env}/{measure}" if mixture else measure
            after = summaries.get("after", {}).get(key)
            if after is None:
                continue
            teacher = next((r for r in audit_rows if r.policy == TEACHER), None)
            scored = [
                (value, row.policy)
                for row in audit_rows
                if row.policy != TEACHER and (value := _value(row, measure)) is not None
            ]
            best_value, best_policy = max(scored) if scored else (None, None)
            rows.append(
                DegenerateGain(
                    env=env,
                    measure=measure,
                    before=summaries.get("before", {}).get(key),
                    after=after,
                    after_low=intervals.get("after", {}).get(key, {}).get("low"),
                    best_policy=best_policy,
                    best_value=best_value,
                    tied=sum(value == best_value for value, _ in scored) - 1 if scored else 0,
                    teacher=None if teacher is None else _value(teacher, measure),
                )
            )
    return rows


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def markdown(rows: list[DegenerateGain]) -> str:
    """The rows as a Markdown table with a line on how to read it."""
    lines = [
        "| env | measure | before | after | best degenerate policy | its value | after - it "
        "| beats it | teacher |",
        "|---|---|---:|---:|---|---:|---:|---|---:|",
    ]
    for row in rows:
        gain = "n/a" if row.gain is None else f"{row.gain:+.3f}"
        best = row.best_policy or "n/a"
        if row.tied:
            best += f" (and {row.tied} tied)"
        lines.append(
            f"| {row.env} | {row.measure} | {_number(row.before)} | {_number(row.after)} "
            f"| {best} | {_number(row.best_value)} | {gain} "
            f"| {row.verdict} | {_number(row.teacher)} |"
        )
    lines.append(
        "\nHeld-out means after training against the best degenerate policy on the same tasks "
        f"(`lexrl audit`); `{BEATS}`: the after value's 95% interval lies above it."
    )
    return "\n".join(lines)


def as_json(rows: list[DegenerateGain]) -> list[dict]:
    return [{**asdict(row), "gain": row.gain, "verdict": row.verdict} for row in rows]
