"""Evaluate a policy on an env split: seeded rollouts, per-task JSONL, a summary table."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import sys
from collections import Counter
from contextlib import nullcontext
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table
from transformers import PreTrainedTokenizerBase

from lexrl.bootstrap import mean_with_ci
from lexrl.config import Config
from lexrl.envs.base import Env, EnvPart, EnvReport, ReportRequest
from lexrl.envs.composite import Composite, composite
from lexrl.errors import ConfigError, EvaluationFailed
from lexrl.eval import degenerate_gain
from lexrl.eval.audit import AuditRow, audit_env, task_means
from lexrl.eval.audit import markdown as audit_markdown
from lexrl.eval.partial import PARTIAL_FILE, SignalStop, as_json, groups_jsonl, resume_partial
from lexrl.eval.plots import EVALUATION_LEGEND, evaluation_panel, plot_bars
from lexrl.eval.provenance import checkpoint_identity, provenance
from lexrl.eval.provenance import markdown as provenance_markdown
from lexrl.generation import Backend
from lexrl.policy import Policy
from lexrl.rollout.engine import run_groups_async
from lexrl.run_lock import run_folder_lock
from lexrl.secrets import scrub, write_text
from lexrl.types import Group, Task, Trajectory

MAX_REASON = 200
"""Characters of a failure reason kept for `EvaluationFailed`'s message, which stays one line."""


def episode_values(trajectories: list[Trajectory]) -> dict[str, list[float]]:
    """The reward, reward components and env metrics of the episodes reporting each, keyed by
    name, in the order the summary table shows them. A key is averaged over the episodes that
    report it: one evaluation may mix systems whose episodes report different numbers (the
    debate env's single-agent baseline has no debaters to follow)."""
    values = {}
    for key, source in summary_keys(trajectories).items():
        if source == "reward":
            values[key] = [t.reward for t in trajectories]
        else:
            values[key] = [
                getattr(t, source)[key] for t in trajectories if key in getattr(t, source)
            ]
    return values


def summary_keys(trajectories: list[Trajectory]) -> dict[str, str]:
    """Every number `episode_values` reports, in its order (the reward, then the components,
    then the metrics, each sorted by name), with the trajectory field it is read from. A name
    that is both a component and a metric keeps the component's place and the metric's value."""
    keys = {"reward": "reward"}
    for source in ("components", "metrics"):
        for key in sorted({k for t in trajectories for k in getattr(t, source)}):
            keys[key] = source
    return keys


def summarize(groups: list[Group]) -> dict[str, float]:
    """Means over every evaluated episode of the reward, its components and the env metrics;
    an episode that failed (its judge or the policy's endpoint) is counted (`failed_episodes`),
    not averaged."""
    episodes = [t for g in groups for t in g.trajectories]
    trajectories = [t for t in episodes if not t.failed]
    if not episodes:
        return {}
    summary = {"episodes": float(len(episodes))}
    if any(t.failed for t in episodes):
        summary["failed_episodes"] = float(len(episodes) - len(trajectories))
    if trajectories:
        for key, values in episode_values(trajectories).items():
            summary[key] = sum(values) / len(values)
    return summary


def summary_intervals(groups: list[Group]) -> dict[str, dict[str, float]]:
    """Percentile-bootstrap 95% intervals of the `summarize` means, the evaluation tasks being
    the resampled unit (a task's episodes are not independent draws): {key: {mean, low, high}}.
    Failed episodes are left out, as in the means."""
    trajectories = [t for group in groups for t in group.trajectories]
    keys = tuple(summary_keys([t for t in trajectories if not t.failed]))
    per_task = task_means(trajectories, keys)
    return {
        key: mean_with_ci([means[key] for means in per_task.values() if key in means])
        for key in keys
    }


def episode_task_means(groups: list[Group]) -> dict[str, dict[str, float]]:
    """Per task id, the means over its episodes that did not fail of the reward and of each env
    metric (`task_means`): one side of a task-by-task comparison (`degenerate_gain`)."""
    trajectories = [t for group in groups for t in group.trajectories]
    metrics = sorted({key for t in trajectories for key in t.metrics})
    return task_means(trajectories, ("reward", *metrics))


def env_task_means(
    env: Env, tasks: list[Task], groups: list[Group]
) -> dict[str, dict[str, dict[str, float]]]:
    """`episode_task_means` by env name, a mixture's members each under their own task ids (as
    `degenerate_baselines` plays them)."""
    parts = composite(env).split(tasks, groups)
    return {part.name: episode_task_means(part.groups or []) for part in parts}


def env_summaries(
    env: Env, tasks: list[Task], groups: list[Group]
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """`summarize` and `summary_intervals` of an evaluation, each member env's own (for a
    mixture under `<env>/`: their rewards and metrics do not average across envs)."""
    view = composite(env)
    summary: dict[str, float] = {}
    intervals: dict[str, dict[str, float]] = {}
    for part in view.split(tasks, groups):
        summary.update({view.key(part.name, k): v for k, v in summarize(part.groups).items()})
        intervals.update(
            {view.key(part.name, k): v for k, v in summary_intervals(part.groups).items()}
        )
    return summary, intervals


def finished_groups(groups: list[Group]) -> list[Group]:
    """The groups with only the episodes their env played to the end. An episode cut short (its
    policy's endpoint failed for good, `EpisodeCallFailed`) has no outcome for the env's own
    report; the summary counts it in `failed_episodes`. One whose judge failed is kept: the
    env's report counts those itself."""
    kept = []
    for group in groups:
        ended = [t for t in group.trajectories if not (t.failed and t.outcome is None)]
        if ended:
            kept.append(Group(group.task, ended))
    return kept


def env_reports(
    env: Env, tasks: list[Task], groups: list[Group] | None, request: ReportRequest
) -> dict[str, EnvReport | None]:
    """Each env's own part of the report (`Env.report`), by env name; a mixture's members each
    write their files, if any, into a folder named after them, which the env creates when it
    writes one (a member writing none leaves no empty folder)."""
    view = composite(env)
    reports = {}
    if groups is not None:
        groups = finished_groups(groups)
    for part in view.split(tasks, groups):
        own = request
        if view.labels_members and request.out_dir is not None:
            own = replace(request, out_dir=request.out_dir / part.name)
        reports[part.name] = part.env.report(part.tasks, part.groups, own)
    return reports


def eval_tasks(env: Env, config: Config) -> list[Task]:
    """The tasks of `eval.split`, the first `eval.max_tasks` of them in the split's order when
    set (of each env's, in a mixture). The first, not a sample (unlike `lexrl audit --max-tasks`,
    `lexrl.eval.audit.sample_tasks`): every evaluation of a config, before and after training and
    on every seed, then plays the same tasks, so paired verdicts pair them, and an env orders its
    test split so that a prefix is a fair slice that keeps whole questions across its systems
    (the gdpr env's grid, the debate env's). A split sorted by label is biased here: shuffle it
    once in the env's data."""
    tasks = env.tasks(config.eval.split)
    if config.eval.max_tasks is None:
        return tasks
    view = composite(env)
    taken: Counter[str] = Counter()
    kept = []
    for task in tasks:
        member = view.member_name(task)
        if taken[member] < config.eval.max_tasks:
            taken[member] += 1
            kept.append(task)
    return kept


def policy_name(config: Config, checkpoint: str | None) -> str:
    """What a report calls the evaluated policy: the checkpoint as given, `base`, or for
    `rollout.backend: openai` the served model's name."""
    if config.rollout.backend == "openai":
        return config.model.name_or_path
    return checkpoint or "base"


def evaluation_settings(config: Config, checkpoint: str | None) -> dict[str, Any]:
    """Every setting that changes the evaluated policy or the numbers: the checkpoint (its path,
    and its adapter's sha256: a checkpoint written again under the same path is another policy),
    the model and the warm-start the `tiny` base is trained with, LoRA, rollout, the env, the
    evaluation and `run.seed` (which seeds a vLLM engine's sampling). Not
    `eval.max_failed_share`: it only decides how the evaluation ends, so a rerun with another
    share continues the same evaluation."""
    evaluation = asdict(config.eval)
    del evaluation["max_failed_share"]
    return as_json(
        {
            "checkpoint": checkpoint_identity(checkpoint),
            **{
                name: asdict(getattr(config, name))
                for name in ("model", "warmstart", "lora", "rollout", "env")
            },
            "eval": evaluation,
            "run.seed": config.run.seed,
        }
    )


def evaluation_dir(
    config: Config, checkpoint: str | None, settings: dict[str, Any], label: str = ""
) -> Path:
    """`<run.output_dir>/eval/<name>`: one folder per evaluation, so evaluations with different
    settings never overwrite each other. The name reads `<checkpoint>_<split>[_first<N>]
    [_<label>][_baselines]_<hash>` (`label`: `Env.evaluation_label`, e.g. the statute env's
    `rerank-<model>`), the hash covering `settings` (`evaluation_settings`)."""
    parts = [Path(policy_name(config, checkpoint)).name, config.eval.split]
    if config.eval.max_tasks is not None:
        parts.append(f"first{config.eval.max_tasks}")
    if label:
        parts.append(label)
    if not config.eval.policy:
        parts.append("baselines")
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:8]
    return Path(config.run.output_dir) / "eval" / "_".join([*parts, digest])


def task_chunks(tasks: list[Task], config: Config) -> list[list[Task]]:
    """The tasks in runs of as many as the engine runs at once (`rollout.max_concurrent_episodes`
    episodes, `eval.samples_per_task` a task): the unit sampled under one seed and saved to the
    partial file."""
    size = max(1, config.rollout.max_concurrent_episodes // config.eval.samples_per_task)
    return [tasks[start : start + size] for start in range(0, len(tasks), size)]


def chunk_seed(seed: int, chunk: int) -> int:
    """The torch seed of chunk `chunk`. Every chunk is seeded on its own, so its draws do not
    depend on the chunks before it, and an evaluation resumed after some chunks samples the
    rest as an uninterrupted one would. The first keeps `seed` itself: an evaluation that fits
    one chunk samples as evaluations did before they were chunked."""
    if chunk == 0:
        return seed
    return int.from_bytes(hashlib.sha256(f"{seed}:{chunk}".encode()).digest()[:8], "big") >> 1


def rollout_split(
    env: Env,
    backend: Backend,
    tokenizer: PreTrainedTokenizerBase,
    config: Config,
    name: str = "eval",
) -> list[Group]:
    """`eval.samples_per_task` seeded episodes on each evaluation task, chunk by chunk
    (`task_chunks`, each seeded by `chunk_seed`). The same seed and policy give the same
    episodes, so a before/after comparison sees the same random draws."""
    chunks = task_chunks(eval_tasks(env, config), config)
    groups: list[Group] = []
    for index, chunk in enumerate(chunks):
        description = chunk_name(name, chunks, index)
        groups += asyncio.run(
            chunk_episodes(env, backend, tokenizer, config, chunk, index, description)
        )
    return groups


def resumable_rollout(
    env: Env,
    backend: Backend,
    tokenizer: PreTrainedTokenizerBase,
    config: Config,
    settings: dict[str, Any],
    stop: SignalStop,
) -> list[Group]:
    """`rollout_split`, each chunk appended once done to `stop.partial`, the chunks found there
    not sampled again (`resume_partial`), and a signal stopping it with `EvaluationInterrupted`
    (`SignalStop`) with the chunks done kept."""
    tasks = eval_tasks(env, config)
    chunks = task_chunks(tasks, config)
    done = resume_partial(stop.partial, chunks, settings)
    name = f"eval {config.eval.split}"
    for index, chunk in enumerate(chunks):
        if index not in done:
            stop.check(sum(map(len, done.values())), len(tasks))
            episodes = chunk_episodes(
                env, backend, tokenizer, config, chunk, index, chunk_name(name, chunks, index)
            )
            groups = asyncio.run(stop.cancellable(episodes))
            if groups is not None:
                write_text(stop.partial, groups_jsonl(groups, chunk=index), append=True)
                done[index] = groups
    stop.check(sum(map(len, done.values())), len(tasks))
    return [group for index in sorted(done) for group in done[index]]


def chunk_name(name: str, chunks: list[list[Task]], index: int) -> str:
    return f"{name} {index + 1}/{len(chunks)}" if len(chunks) > 1 else name


async def chunk_episodes(
    env: Env,
    backend: Backend,
    tokenizer: PreTrainedTokenizerBase,
    config: Config,
    chunk: list[Task],
    index: int,
    description: str,
) -> list[Group]:
    """`eval.samples_per_task` episodes on each task of chunk `index`, sampled after seeding
    torch with its `chunk_seed`."""
    torch.manual_seed(chunk_seed(config.eval.seed, index))
    return await run_groups_async(
        env,
        chunk,
        config.eval.samples_per_task,
        lambda task: Policy(
            backend, tokenizer, task.id, config.rollout.max_new_tokens, greedy=config.eval.greedy
        ),
        max_concurrent=config.rollout.max_concurrent_episodes,
        description=description,
    )


def write_groups(
    groups: list[Group], path: str | Path, extra: list[list[dict]] | None = None
) -> None:
    """`groups_jsonl` of `groups` into `path`, every API key masked."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, groups_jsonl(groups, extra))


def evaluate(
    env: Env,
    backend: Backend,
    tokenizer: PreTrainedTokenizerBase,
    config: Config,
    out_dir: str | Path | None = None,
    name: str = "eval",
) -> tuple[dict[str, float], dict[str, dict[str, float]], dict[str, dict[str, dict[str, float]]]]:
    """Roll out the evaluation split; the means of the episode metrics, their 95% intervals
    (`summary_intervals`) and, by env name and task id, the means of each task's episodes'
    reward and metrics (`env_task_means`). Writes `<out_dir>/<name>.jsonl` (one task a line,
    trajectories included), `<name>_summary.json` and `<name>_intervals.json`, and the env's
    own part of the report without baselines (`Env.report`) as `<name>_env.json` and `.md`,
    which it prints."""
    groups = rollout_split(env, backend, tokenizer, config, name)
    tasks = eval_tasks(env, config)
    summary, intervals = env_summaries(env, tasks, groups)
    out = Path(out_dir) if out_dir is not None else None
    # The env writes no files of its own here: the before and after evaluations share a folder.
    request = ReportRequest(
        config.eval.split,
        name,
        None,
        config.eval.bootstrap_resamples,
        config.eval.seed,
        baselines=False,
    )
    env_report = joined_report(env, env_reports(env, tasks, groups, request))
    if env_report is not None:
        print_markdown(Console(), env_report.markdown)
    if out is not None:
        write_groups(groups, out / f"{name}.jsonl")
        write_text(out / f"{name}_summary.json", json.dumps(summary, indent=2))
        write_text(out / f"{name}_intervals.json", json.dumps(intervals, indent=2))
        if env_report is not None:
            write_text(
                out / f"{name}_env.json", json.dumps(env_report.data, indent=2, ensure_ascii=False)
            )
            write_text(out / f"{name}_env.md", env_report.markdown)
    return summary, intervals, env_task_means(env, tasks, groups)


def joined_report(env: Env, reports: dict[str, EnvReport | None]) -> EnvReport | None:
    """The env's own report; for a mixture its members' reports in one, the data by env name."""
    if not composite(env).labels_members:
        return next(iter(reports.values()))
    given = {name: report for name, report in reports.items() if report is not None}
    if not given:
        return None
    return EnvReport(
        {name: report.data for name, report in given.items()},
        "\n".join(report.markdown for report in given.values()),
    )


def print_summary(
    summaries: dict[str, dict[str, float]],
    console: Console | None = None,
    intervals: dict[str, dict[str, dict[str, float]]] | None = None,
) -> None:
    """Two columns per evaluated policy (e.g. before / after GRPO), its means and its failed
    episodes (`failed_text`), one row per metric; a mean with an interval in
    `intervals[policy][metric]` is followed by it."""
    console = console or Console()
    intervals = intervals or {}

    def cells(name: str, key: str) -> tuple[str, str]:
        summary = summaries[name]
        mean = mean_text(summary.get(key, math.nan), intervals.get(name, {}).get(key))
        return mean, failed_text(summary, key)

    table = Table(title="evaluation")
    table.add_column("metric")
    names = list(summaries)
    for name in names:
        table.add_column(name, justify="right")
        table.add_column("failed", justify="right")
    keys = list(dict.fromkeys(k for s in summaries.values() for k in s))
    for key in keys:
        table.add_row(key, *(cell for name in names for cell in cells(name, key)))
    console.print(table)


def failed_text(summary: dict[str, float], key: str = "") -> str:
    """`failed/episodes` of the episodes behind the mean of `key` (a mixture's `<env>/...` keys
    count their env's), empty when `summary` counts no episodes."""
    env = key.split("/", 1)[0] + "/"
    if f"{env}episodes" not in summary:
        env = ""
    episodes = summary.get(f"{env}episodes")
    if episodes is None:
        return ""
    return f"{summary.get(f'{env}failed_episodes', 0.0):.0f}/{episodes:.0f}"


def mean_text(value: float, interval: dict[str, float] | None) -> str:
    """A mean, followed by its interval unless it has none or a zero-width one; `n/a` for a mean
    over no episode (every one failed)."""
    if math.isnan(value):
        return "n/a"
    text = f"{value:.4f}"
    if interval is not None and interval["low"] != interval["high"]:
        text += f" [{interval['low']:.3f}, {interval['high']:.3f}]"
    return text


def print_markdown(console: Console, markdown: str) -> None:
    # Plain Markdown: a rendered table would be cut to the terminal's width.
    console.print(markdown, markup=False, highlight=False, soft_wrap=True)


def markdown_summary(summary: dict[str, float], intervals: dict[str, dict[str, float]]) -> str:
    """The episode means of one policy as a Markdown table, each with its interval and the
    failed episodes it leaves out."""
    failed = failed_text(summary)
    lines = ["| metric | mean [95% CI] | failed |", "|---|---|---|"]
    lines += [
        f"| {key} | {mean_text(value, intervals.get(key))} | {failed} |"
        for key, value in summary.items()
    ]
    return "\n".join(lines) + "\n"


def reason_text(reason: str) -> str:
    """A failure reason on one line, whitespace folded (one reason written two ways counts
    once) and cut at `MAX_REASON` characters."""
    return " ".join(reason.split())[:MAX_REASON]


def failure_reasons(groups: list[Group]) -> list[dict[str, Any]]:
    """Why the failed episodes of `groups` failed (`reason_text`), each reason with its count,
    the most frequent first: [{"reason": str, "count": int}] (empty when none failed)."""
    counts = Counter(
        reason_text(t.failed) for group in groups for t in group.trajectories if t.failed
    )
    return [{"reason": reason, "count": count} for reason, count in counts.most_common()]


def markdown_failures(reasons: list[dict[str, Any]]) -> str:
    """`failure_reasons` as a Markdown table."""
    lines = ["| episodes | reason |", "|---:|---|"]
    for row in reasons:
        # A reason may hold a `|` (a server's message), which would split its cell.
        reason = row["reason"].replace("|", r"\|")
        lines.append(f"| {row['count']} | {reason} |")
    return "\n".join(lines) + "\n"


def _section(
    groups: list[Group] | None,
    own: EnvReport | None,
    label: str,
    heading: str,
    console: Console,
    degenerate: list[AuditRow] | None = None,
) -> tuple[dict, list[str]]:
    """One env's part of a report, printed: its episode means with intervals and the reasons
    its failed episodes failed, with counts (when `groups` were rolled out), its own report
    (`own`) and its degenerate baselines, as JSON fields and Markdown lines."""
    entry: dict = {}
    lines: list[str] = []
    level = heading.split()[0]
    if groups is not None:
        summary, intervals = summarize(groups), summary_intervals(groups)
        entry.update(summary=summary, intervals=intervals)
        print_summary({label: summary}, console, {label: intervals})
        lines += [heading, "", markdown_summary(summary, intervals)]
        reasons = failure_reasons(groups)
        if reasons:
            entry["failure_reasons"] = reasons
            table = f"{level} Failed episodes\n\n{markdown_failures(reasons)}"
            print_markdown(console, table)
            lines += [table]
    entry["env"] = own.data if own is not None else None
    if own is not None:
        print_markdown(console, own.markdown)
        lines.append(own.markdown)
    if degenerate:
        entry["degenerate_baselines"] = [row.as_json() for row in degenerate]
        table = f"{level} Degenerate baselines\n\n{audit_markdown(degenerate)}"
        print_markdown(console, table)
        lines += ["", table]
    if degenerate and groups is not None:
        rows = degenerate_gain.gains(
            {"after": entry["summary"]},
            {"after": entry["intervals"]},
            {degenerate[0].env: degenerate},
            mixture=False,
            task_values={degenerate[0].env: episode_task_means(groups)},
        )
        entry["vs_degenerate"] = degenerate_gain.as_json(rows)
        # Captioned by what was evaluated: `lexrl eval` without a checkpoint trained nothing.
        system = label.split(": ", 1)[-1] if level == "###" else label
        evaluated = "the base model (`base`: no adapter)" if system == "base" else f"`{system}`"
        caption = degenerate_gain.markdown(rows, policy=evaluated)
        table = f"{level} Against the best degenerate policy\n\n{caption}"
        print_markdown(console, table)
        lines += ["", table]
    return entry, lines


def degenerate_baselines(
    env: Env,
    tasks: list[Task],
    tokenizer: PreTrainedTokenizerBase | None,
    seed: int,
    max_new_tokens: int | None = None,
) -> dict[str, list[AuditRow]]:
    """Each env's degenerate policies and scripted teacher played on its evaluated tasks
    (`lexrl.eval.audit`), by env name (a mixture's members each on their own tasks). With a
    tokenizer every reply is cut at the policy's own token caps, as the evaluated policy's
    were; without one (a served model's tokenizer is not here) replies are whole."""
    cap = max_new_tokens if tokenizer is not None else None
    return {
        part.name: audit_env(part.name, part.env, part.tasks, tokenizer, seed, cap)
        for part in composite(env).split(tasks, None)
    }


def plot_headlines(
    path: Path, system: str, panels: list[tuple[str, str, dict | None, list[AuditRow]]]
) -> Path | None:
    """The report's figure at `path`: per env `(env, metric, interval, degenerate)`, the
    policy's mean of its headline metric with its 95% interval (None: not rolled out, or every
    episode failed) beside its teacher's and degenerate policies' means (`AuditRow.headline`).
    None, and no file, when no env has a bar to draw."""
    drawn = [
        evaluation_panel(
            env,
            metric,
            Path(system).name,
            interval,
            [(row.policy, row.headline) for row in degenerate],
        )
        for env, metric, interval, degenerate in panels
    ]
    if not any(bars for _, _, bars in drawn):
        return None
    # One env a row: a mixture's envs each have a dozen degenerate policies or more.
    return plot_bars(path, drawn, EVALUATION_LEGEND, columns=1)


def write_member_parts(
    out_dir: Path, split: str, name: str, groups: list[Group] | None, part: dict, lines: list[str]
) -> None:
    """A mixture member's own files in `out_dir/<name>/`: its tasks with their trajectories
    (`eval_<split>.jsonl`, when rolled out) and its section of the report (`part`, `lines`) as
    `eval_<split>_report.json` and `.md`, beside any files its env wrote there."""
    folder = out_dir / name
    folder.mkdir(parents=True, exist_ok=True)
    if groups is not None:
        write_groups(groups, folder / f"eval_{split}.jsonl")
    write_text(folder / f"eval_{split}_report.json", json.dumps(part, indent=2, ensure_ascii=False))
    write_text(folder / f"eval_{split}_report.md", "\n".join([f"# {name}", "", *lines]))


def evaluation_report(
    env: Env,
    tasks: list[Task],
    groups: list[Group] | None,
    config: Config,
    system: str,
    out_dir: Path,
    console: Console | None = None,
    degenerate: dict[str, list[AuditRow]] | None = None,
    checkpoint: str | None = None,
) -> Path:
    """The report of one evaluation: the policy's episode means with intervals and its failure
    reasons (when `groups` were rolled out), the env's own part (`Env.report`: breakdowns,
    baselines), its `degenerate` baselines (`degenerate_baselines`, by env name), if given, and
    its `provenance` (`lexrl.eval.provenance`, of `config` and `checkpoint`) at the end. A
    mixture's report opens with a table of each env's headline metric (`Env.headline_metric`),
    then has a section per env with its episode means and its own part, each also written into
    the env's folder (`labelled_sections`). Prints it all and writes `eval_<split>.jsonl` (each
    task with its trajectories), `eval_<split>_report.json`, `eval_<split>_report.md` and the
    figure of each env's headline metric (`plot_headlines`) into `out_dir` (the report names
    the env, `env_name`, so that `lexrl compare` can refuse reports of different envs), removes
    the `PARTIAL_FILE` there and returns the Markdown file's path."""
    console = console or Console()
    split = config.eval.split
    out_dir.mkdir(parents=True, exist_ok=True)
    request = ReportRequest(
        split, system, out_dir, config.eval.bootstrap_resamples, config.eval.seed
    )
    reports = env_reports(env, tasks, groups, request)
    if groups is None and all(report is None for report in reports.values()):
        raise ConfigError(f"env {env.name!r} has no baselines: set `eval.policy: true`")
    origin = provenance(config, checkpoint)
    report: dict = {
        "env_name": env.name,
        "split": split,
        "system": system,
        "tasks": len(tasks),
        "samples_per_task": config.eval.samples_per_task if groups is not None else None,
        # `lexrl compare` checks that two reports cover the same tasks.
        "task_ids": [task.id for task in tasks],
    }
    markdown = [f"# Evaluation of {system}, {split} split ({len(tasks)} tasks)", ""]
    if groups is not None:
        write_groups(groups, out_dir / f"eval_{split}.jsonl")
    view = composite(env)
    parts = view.split(tasks, groups)
    rows = {part.name: (degenerate or {}).get(part.name) or [] for part in parts}
    sections = [
        (part, *member_section(view, part, reports[part.name], system, console, rows[part.name]))
        for part in parts
    ]
    if view.labels_members:
        markdown += labelled_sections(report, sections, out_dir, console, groups is not None)
    else:
        ((part, entry, lines),) = sections
        report["headline_metric"] = part.env.headline_metric
        report.update(entry)
        markdown += lines
    panels = []
    for part, entry, _ in sections:
        metric = part.env.headline_metric
        interval = entry.get("intervals", {}).get(metric)
        panels.append((part.name, metric, interval, rows[part.name]))
    figure = plot_headlines(out_dir / f"eval_{split}_headline.png", system, panels)
    if figure is not None:
        report["figure"] = figure.name
        markdown += ["", f"![Each env's headline metric with its 95% interval]({figure.name})", ""]
    report["provenance"] = origin
    markdown += ["", provenance_markdown(origin)]
    write_text(
        out_dir / f"eval_{split}_report.json", json.dumps(report, indent=2, ensure_ascii=False)
    )
    path = out_dir / f"eval_{split}_report.md"
    write_text(path, "\n".join(markdown))
    # Whole now: a rerun evaluates afresh rather than reading an unfinished run's tasks.
    (out_dir / PARTIAL_FILE).unlink(missing_ok=True)
    return path


def member_section(
    view: Composite,
    part: EnvPart,
    own: EnvReport | None,
    system: str,
    console: Console,
    degenerate: list[AuditRow],
) -> tuple[dict, list[str]]:
    """`_section` of one member env: the report's own (`## Episode means`), or where members are
    labelled (a mixture) a subsection of the member's section, its numbers named after it."""
    if view.labels_members:
        label, heading = f"{part.name}: {system}", "### Episode means"
    else:
        label, heading = system, "## Episode means"
    return _section(part.groups, own, label, heading, console, degenerate)


def labelled_sections(
    report: dict,
    sections: list[tuple[EnvPart, dict, list[str]]],
    out_dir: Path,
    console: Console,
    rolled_out: bool,
) -> list[str]:
    """A mixture's report body as Markdown lines, its JSON under `report["envs"]` by env: a
    table of each env's headline metric (when `rolled_out`, printed), then a section per env
    (`member_section`), each also written into the env's folder (`write_member_parts`) when it
    has anything to show."""
    split, system = report["split"], report["system"]
    report["envs"] = {}
    headline = [
        "## Headline",
        "",
        "| env | tasks | metric | mean [95% CI] | failed |",
        "|---|---|---|---|---|",
    ]
    body = []
    for part, entry, lines in sections:
        metric = part.env.headline_metric
        member = {"tasks": len(part.tasks), "headline_metric": metric, **entry}
        report["envs"][part.name] = member
        if part.groups is not None:
            summary = entry["summary"]
            value = mean_text(summary.get(metric, math.nan), entry["intervals"].get(metric))
            headline.append(
                f"| {part.name} | {len(part.tasks)} | {metric} | {value} | {failed_text(summary)} |"
            )
        if part.groups is not None or lines:
            own = {"env_name": part.name, "split": split, "system": system, **member}
            write_member_parts(out_dir, split, part.name, part.groups, own, lines)
        body += [f"## {part.name}", "", *lines]
    if not rolled_out:
        return body
    print_markdown(console, "\n".join(headline))
    return [*headline, "", *body]


def evaluate_checkpoint(
    env: Env,
    config: Config,
    checkpoint: str | None,
    backend: Backend | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
) -> Path:
    """`lexrl eval`: the policy's episodes when `eval.policy` (with `backend` and `tokenizer`),
    resumed from and saved to the evaluation folder (`evaluation_dir`, `resumable_rollout`),
    then the report there (`evaluation_report`); returns the report's path, or raises
    `EvaluationFailed` once it is written when too many episodes failed (`check_failures`;
    fewer give a warning line on stderr). A signal once every task is evaluated lets the report
    be written (a second one aborts). The folder is held for the duration (`run_folder_lock`):
    another evaluation into it (the same settings) is refused at once with `RunFolderLocked`
    instead of both appending to its partial file and writing its report."""
    settings = evaluation_settings(config, checkpoint)
    out_dir = evaluation_dir(config, checkpoint, settings, env.evaluation_label())
    tasks = eval_tasks(env, config)
    groups = None
    # Baselines alone keep nothing to continue from: a signal ends them as it ends any process.
    with (
        run_folder_lock(out_dir),
        SignalStop(out_dir / PARTIAL_FILE) if config.eval.policy else nullcontext() as stop,
    ):
        if config.eval.policy:
            groups = resumable_rollout(env, backend, tokenizer, config, settings, stop)
        degenerate = None
        if config.eval.degenerate_baselines:
            degenerate = degenerate_baselines(
                env, tasks, tokenizer, config.eval.seed, config.rollout.max_new_tokens
            )
        system = policy_name(config, checkpoint)
        path = evaluation_report(
            env,
            tasks,
            groups,
            config,
            system,
            out_dir,
            degenerate=degenerate,
            checkpoint=checkpoint,
        )
    if groups is not None:
        check_failures(env, tasks, groups, config.eval.max_failed_share, path)
    return path


def most_often(reasons: Counter[str], shown: int = 3) -> str:
    """`N x reason; ...` of the `shown` most common reasons, and how many others there are."""
    common = "; ".join(f"{count} x {reason}" for reason, count in reasons.most_common(shown))
    others = len(reasons) - shown
    return common + (f" (and {others} more)" if others > 0 else "")


def check_failures(
    env: Env, tasks: list[Task], groups: list[Group], share: float, report: Path
) -> None:
    """`EvaluationFailed` naming the most common failure reasons when every episode of an env
    failed, or more than `share` of them (a mixture's envs each on their own). When some but
    fewer failed, the means stand (over the episodes that did not fail) and one warning line on
    stderr says how many failed and why."""
    over: list[str] = []
    under: list[str] = []
    over_reasons: Counter[str] = Counter()
    all_reasons: Counter[str] = Counter()
    view = composite(env)
    for part in view.split(tasks, groups):
        episodes = [t for group in part.groups for t in group.trajectories]
        failed = [reason_text(t.failed) for t in episodes if t.failed]
        if not failed:
            continue
        name = f"{part.name}: " if view.labels_members else ""
        count = f"{name}{len(failed)} of {len(episodes)}"
        all_reasons.update(failed)
        if len(failed) == len(episodes) or len(failed) > share * len(episodes):
            over.append(count)
            over_reasons.update(failed)
        else:
            under.append(count)
    if over:
        raise EvaluationFailed(
            f"{', '.join(over)} episodes failed (eval.max_failed_share: {share:g}), most often: "
            f"{most_often(over_reasons)}; the report {report} counts them beside every mean: "
            "fix the cause, then run the same command again"
        )
    if under:
        line = (
            f"warning: {', '.join(under)} episodes failed and are left out of the means "
            f"(eval.max_failed_share: {share:g}), most often: {most_often(all_reasons)}; "
            f"the report {report} lists every reason"
        )
        print(scrub(line), file=sys.stderr, flush=True)
