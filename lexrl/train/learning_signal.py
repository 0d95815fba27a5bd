"""Is the run learning? Each step's learning signal, the early `no learning signal:` line, and
the end-of-run verdict.

GRPO learns only from differences within a group: a group whose rewards are all equal gives
every trajectory an advantage of 0, so its tokens move nothing, and a run whose every group is
so trains nothing while its loss, 0 at every step, looks calm. TRL logs the same share as
`frac_reward_zero_std`. Each step logs (`signal_sums`, averaged like the other step metrics):

- `signal/equal_reward_groups`: the share of the step's groups whose rewards (of the episodes
  that did not fail) are all equal; `signal/<role>/equal_reward_groups` the same with each
  role's own reward. Over `signal/groups` (`signal/<role>/groups`) groups, logged beside it.
- `signal/advantage_tokens`: the share of the trained completion tokens whose row carries a
  non-zero advantage; `signal/<role>/advantage_tokens` per role. Over `signal/trained_tokens`
  (`signal/<role>/trained_tokens`) tokens.
- `signal/parsed`: the mean of the env's validity metric (`Env.validity_metric_name`, the
  share of episodes whose replies the env could parse); absent for an env without one.

With groups split over processes (fewer tasks per step than processes) each process's share of
a group counts as a group in `signal/*equal_reward_groups`, as in `reward/group_std`; the
token shares, and so the `no learning signal:` decision, use the whole groups' advantages.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from lexrl.config import WarmstartConfig
from lexrl.eval.before_after import Change
from lexrl.eval.degenerate_gain import BEATS, LOSES, WITHIN, DegenerateGain
from lexrl.train.advantages import Row
from lexrl.types import Group

ADVANTAGE_EPS = 1e-6
"""An advantage at most this far from 0 counts as 0: the advantages of a group of equal rewards
come out of float arithmetic about 1e-12 from 0, not exactly 0."""

DOCS = 'see "Is it learning?" (docs/learning.md)'


def signal_keys(roles: Sequence[str], validity: str | None) -> list[str]:
    """The summed statistics `signal_sums` reports for an env with `roles` and validity metric
    `validity` (None: none); `roles=()` gives a mixture's whole-step keys."""
    keys = []
    for prefix in ["signal", *(f"signal/{role}" for role in roles)]:
        keys += [f"{prefix}/{name}" for name in ("groups", "equal_reward_groups")]
        keys += [f"{prefix}/{name}" for name in ("trained_tokens", "advantage_tokens")]
    if validity is not None:
        keys += ["signal/parsed", "signal/parsed/reported"]
    return keys


def rewards_equal(rewards: Sequence[float]) -> bool | None:
    """Whether the rewards that are not NaN (a failed episode's) are all equal; None when every
    one is NaN (the group has no reward to compare)."""
    scored = [r for r in rewards if not math.isnan(r)]
    if not scored:
        return None
    return max(scored) == min(scored)


def role_group_rewards(group: Group, role: str) -> list[float]:
    """The rewards `role` is credited with in each trajectory of `group` that did not fail and
    in which it took a trainable turn (`Trajectory.role_rewards`, else the reward)."""
    return [
        t.role_rewards.get(role, t.reward)
        for t in group.trajectories
        if not t.failed and any(turn.role == role and turn.trainable for turn in t.turns)
    ]


def group_rows(groups: list[Group], rows: list[Row]) -> list[list[Row]]:
    """`rows` (as `rows_from_groups` made them from `groups`, in order) split by group: each
    trajectory that did not fail has one row per trainable turn with a completion."""
    out, start = [], 0
    for group in groups:
        count = sum(
            turn.trainable and bool(turn.completion_ids)
            for t in group.trajectories
            if not t.failed
            for turn in t.turns
        )
        out.append(rows[start : start + count])
        start += count
    if start != len(rows):
        raise ValueError(f"{len(rows)} rows for groups with {start} trainable turns")
    return out


def signal_sums(
    groups: list[Group],
    rows: list[list[Row]],
    roles: Sequence[str],
    validity: str | None,
) -> dict[str, float]:
    """Sums (not shares) of the learning signal of `groups`, whose rows are `rows` (one list per
    group, `group_rows`): over `signal_keys(roles, validity)`, reduced across processes and
    turned into shares by the trainer (`metric_means`)."""
    sums: Counter[str] = Counter({key: 0.0 for key in signal_keys(roles, validity)})
    for group, mine in zip(groups, rows, strict=True):
        _count_equal(sums, "signal", rewards_equal(group.rewards))
        for role in roles:
            equal = rewards_equal(role_group_rewards(group, role))
            _count_equal(sums, f"signal/{role}", equal)
        for row in mine:
            tokens = len(row.completion_ids)
            moved = tokens if abs(row.advantage) > ADVANTAGE_EPS else 0
            for prefix in ["signal", f"signal/{row.role}"] if row.role in roles else ["signal"]:
                sums[f"{prefix}/trained_tokens"] += tokens
                sums[f"{prefix}/advantage_tokens"] += moved
        if validity is not None:
            for t in group.trajectories:
                if not t.failed and validity in t.metrics:
                    sums["signal/parsed"] += t.metrics[validity]
                    sums["signal/parsed/reported"] += 1
    return dict(sums)


def _count_equal(sums: Counter[str], prefix: str, equal: bool | None) -> None:
    if equal is not None:
        sums[f"{prefix}/groups"] += 1
        sums[f"{prefix}/equal_reward_groups"] += equal


def signal_denominator(key: str) -> str | None:
    """The summed count the share `key` (a `signal/` key of `signal_keys`) is a mean over; None
    for a count, logged as it is."""
    if key == "signal/parsed":
        return "signal/parsed/reported"
    for share, count in (
        ("/equal_reward_groups", "/groups"),
        ("/advantage_tokens", "/trained_tokens"),
    ):
        if key.endswith(share):
            return key[: -len(share)] + count
    return None


def progress_fields(metrics: dict[str, float]) -> dict[str, str]:
    """The step's signal for the progress bar: `equal=100%` (groups with equal rewards) and
    `parsed=0%` where the step has them."""
    fields = {}
    for name, key in (("equal", "signal/equal_reward_groups"), ("parsed", "signal/parsed")):
        if key in metrics:
            fields[name] = f"{metrics[key]:.0%}"
    return fields


def no_signal_line(
    steps: int,
    first: int,
    counts: dict[str, float],
    parsed: float | None,
    warmstart: WarmstartConfig | None,
) -> str:
    """The line that says a run had nothing to learn from in each of its steps `first` to
    `steps` (1-based). `counts`, summed over those steps: `groups` and the `equal` ones among
    them, trained `tokens` and the `moved` ones (a non-zero advantage); `parsed`: the share of
    replies parsed (None: the env has no such measure); `warmstart`: the tiny model's warm-start
    settings, named whether it ran or is off (None: another model, which has none)."""
    which = f"the first {steps} steps" if first == 1 else f"steps {first} to {steps}"
    line = (
        f"no learning signal: in each of {which} no trained token had a non-zero advantage "
        f"({counts['moved']:.0f} of {counts['tokens']:.0f} tokens; {counts['equal']:.0f} of "
        f"{counts['groups']:.0f} groups had equal rewards)"
    )
    if parsed is not None:
        line += f"; {parsed:.0%} of replies parsed"
    if warmstart is not None and not warmstart.enabled:
        line += (
            "; the tiny model was not warm-started (warmstart.enabled=false), and a random model "
            "rarely writes the answer format: turn it on, or raise"
        )
    elif warmstart is not None:
        line += (
            f"; the warm-start may be too short (warmstart.num_episodes={warmstart.num_episodes}, "
            f"warmstart.epochs={warmstart.epochs}): raise it, or raise"
        )
    else:
        line += "; raise"
    return line + f" grpo.num_generations or the env's sampling temperature; {DOCS}"


class SignalWatch:
    """Watches the first `steps` steps of a run (0: none) for a learning signal: when none of
    them has a trained token with a non-zero advantage, `observe` returns the `no learning
    signal:` line at step `steps`, once. A run resumed at step `start` watches only what is
    left of those steps; one resumed past them watches nothing."""

    def __init__(self, steps: int, start: int, warmstart: WarmstartConfig | None) -> None:
        self.steps = steps
        self.first = start + 1
        self.warmstart = warmstart
        self.silent = True
        self.counts: Counter[str] = Counter()
        self.parsed: list[float] = []

    def observe(self, step: int, metrics: dict[str, float]) -> str | None:
        """The line when `step` (1-based; its metrics reduced over the processes, so every
        process decides alike) is the last watched one and no watched step had signal. A step
        without a trained token (every episode failed) has none."""
        if not self.first <= step <= self.steps:
            return None
        moved = metrics.get("signal/advantage_tokens", 0.0)
        self.silent = self.silent and not moved
        groups = metrics.get("signal/groups", 0.0)
        tokens = metrics.get("signal/trained_tokens", 0.0)
        self.counts["groups"] += groups
        self.counts["equal"] += metrics.get("signal/equal_reward_groups", 0.0) * groups
        self.counts["tokens"] += tokens
        self.counts["moved"] += moved * tokens
        if "signal/parsed" in metrics:
            self.parsed.append(metrics["signal/parsed"])
        if step < self.steps or not self.silent:
            return None
        parsed = sum(self.parsed) / len(self.parsed) if self.parsed else None
        return no_signal_line(self.steps, self.first, self.counts, parsed, self.warmstart)


def verdict_lines(
    headlines: dict[str, Sequence[str]],
    changes: list[Change],
    rows: list[DegenerateGain],
) -> list[str]:
    """One line per env of `headlines` (env name -> its measures: reward and its headline
    metric) and measure: whether training moved it (the paired before/after `changes`; a single
    env's are under env "") and whether the trained policy beats the best degenerate policy
    (`rows`)."""
    lines = []
    for env, measures in headlines.items():
        for measure in measures:
            change = next((c for c in changes if c.env in (env, "") and c.metric == measure), None)
            row = next((r for r in rows if r.env == env and r.measure == measure), None)
            lines.append(verdict_line(env, measure, change, row))
    return lines


def verdict_line(env: str, measure: str, change: Change | None, row: DegenerateGain | None) -> str:
    """`verdict: <env> <measure> <change> (95% CI ...): learned | did not learn; vs the best
    degenerate policy (<name>): beats it | above it, within the 95% interval | does not beat it:
    <paired difference> (95% CI ...)`. Learned: the paired change's interval lies above 0; the
    comparison is `DegenerateGain.verdict`."""
    if change is None:
        line = f"verdict: {env} {measure}: no evaluation before training to pair with"
    else:
        learned = "learned" if change.difference["low"] > 0 else "did not learn"
        paired = _interval(change.difference, f", paired over {change.tasks} tasks")
        line = f"verdict: {env} {measure} {paired}: {learned}"
    if row is None:
        return line + "; not compared with degenerate policies"
    if row.best_policy is None:
        return line + "; no degenerate policy scores it"
    best = row.best_policy + (f" and {row.tied} tied" if row.tied else "")
    beats = {
        BEATS: "beats it",
        WITHIN: "above it, within the 95% interval",
        LOSES: "does not beat it",
    }[row.verdict]
    if row.paired is not None:
        beats += f": {_interval(row.paired, f', paired over {row.paired_tasks} tasks')}"
    elif row.gain is not None:
        beats += f": {row.gain:+.3f} (unpaired)"
    return line + f"; vs the best degenerate policy ({best}): {beats}"


def _interval(values: dict[str, float], note: str = "") -> str:
    """`+0.210 (95% CI +0.120 to +0.300<note>)` from {mean, low, high}."""
    low, high = values["low"], values["high"]
    return f"{values['mean']:+.3f} (95% CI {low:+.3f} to {high:+.3f}{note})"
