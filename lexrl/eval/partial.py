"""What lets a stopped `lexrl eval` continue: its partial file and the signals that stop it.

Tasks are evaluated in chunks, each appended once done to `PARTIAL_FILE` in the evaluation's
folder; the same command run again reads the chunks back and samples only the others. The file
opens with the evaluation's settings (those its folder's name hashes) and is read back only under
the same ones: a chunk sampled from another policy would otherwise be averaged with this one's.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from lexrl.errors import DatasetError, EvaluationInterrupted, PartialOfOtherSettings
from lexrl.jsonl import read_appended
from lexrl.secrets import write_text
from lexrl.stop_signals import CancellingStop
from lexrl.types import Group, Task, Trajectory

T = TypeVar("T")

PARTIAL_FILE = "partial.jsonl"
"""The tasks an unfinished `lexrl eval` has evaluated, in its evaluation folder: a first line
`{"settings": ...}`, then one task a line as in `eval_<split>.jsonl`, with the `chunk` it was
sampled in. Removed once the report is written."""


class SavedTask(NamedTuple):
    """A task line of a partial file."""

    chunk: int
    task: dict[str, Any]
    trajectories: list[Trajectory]


class SignalStop(CancellingStop):
    """Within `with`, SIGTERM or SIGINT stops the evaluation between two chunks or cancels the
    chunk in progress (`cancellable`, `lexrl.stop_signals.CancellingStop`); the evaluation then
    ends with `EvaluationInterrupted` where it calls `check`. A second signal aborts at once."""

    def __init__(self, partial: Path):
        super().__init__()
        self.partial = partial

    def second(self, signum: int) -> None:
        self._abort(signum)

    def _abort(self, signum: int) -> None:
        """End the process now: a second signal says not to wait. Every chunk in the partial file
        is whole, bar a last line cut mid-write, which the next run drops."""
        print(
            f"\ninterrupted ({signal.Signals(signum).name} again): aborted; the tasks done are "
            f"kept in {self.partial}: run the same command again to continue from there",
            file=sys.stderr,
            flush=True,
        )
        sys.stdout.flush()
        os._exit(128 + signum)

    def check(self, done: int, total: int) -> None:
        """`EvaluationInterrupted` if a signal came, `done` of the `total` tasks being kept."""
        if self.signum is None:
            return
        raise EvaluationInterrupted(
            f"{signal.Signals(self.signum).name}: evaluation stopped after {done} of {total} "
            f"tasks, kept in {self.partial} (partial); run the same command again to continue "
            "from there",
            self.signum,
        )


def resume_partial(
    partial: Path, chunks: list[list[Task]], settings: dict[str, Any]
) -> dict[int, list[Group]]:
    """The groups of each chunk `partial` holds whole, with the very tasks it has now (a chunk
    of other tasks, or cut short, is sampled again); `partial` is rewritten to hold `settings`
    and just them. A partial file of other settings is refused (`PartialOfOtherSettings`)."""
    settings = as_json(settings)
    lines = [record for _, record in read_appended(partial, partial_record)]
    if lines:
        refuse_other_settings(partial, lines[0], settings)
    saved: dict[int, list[SavedTask]] = {}
    for number, record in enumerate(lines[1:], start=2):
        if not isinstance(record, SavedTask):
            raise DatasetError(f"{partial}:{number}: a second settings line: remove the file")
        saved.setdefault(record.chunk, []).append(record)
    done = {}
    for index, chunk in enumerate(chunks):
        records = saved.get(index, [])
        if [record.task for record in records] == [as_json(asdict(t)) for t in chunk]:
            done[index] = [
                Group(task, record.trajectories)
                for task, record in zip(chunk, records, strict=True)
            ]
    partial.parent.mkdir(parents=True, exist_ok=True)
    kept = "".join(groups_jsonl(done[index], chunk=index) for index in done)
    write_text(partial, json.dumps({"settings": settings}, ensure_ascii=False) + "\n" + kept)
    if done:
        count = sum(len(groups) for groups in done.values())
        print(f"resuming: {count} of {sum(map(len, chunks))} tasks read from {partial}")
    return done


def partial_record(value: object) -> dict[str, Any] | SavedTask:
    """A line of a partial file: the settings (an object) or a task with its trajectories."""
    if not isinstance(value, dict):
        raise TypeError(f"an object expected, got {str(value)[:80]}")
    if value.keys() == {"settings"}:
        return value["settings"]
    chunk, task, trajectories = value["chunk"], value["task"], value["trajectories"]
    if not isinstance(chunk, int) or isinstance(chunk, bool):
        raise TypeError(f"`chunk` is a chunk's index, got {str(chunk)[:80]}")
    if not isinstance(task, dict) or not isinstance(trajectories, list):
        raise TypeError("`task` is an object and `trajectories` a list")
    played = [Trajectory.from_json(json.dumps(t)) for t in trajectories]
    return SavedTask(chunk, task, played)


def refuse_other_settings(
    partial: Path, recorded: dict[str, Any] | SavedTask, settings: dict[str, Any]
) -> None:
    """`PartialOfOtherSettings` naming the settings that differ, unless `recorded` (the first
    line of `partial`) is `settings`."""
    if recorded == settings:
        return
    if isinstance(recorded, SavedTask):
        why = "it has no settings line (written by an older lexrl)"
    else:
        old, new = flat(recorded), flat(settings)
        keys = sorted(key for key in old.keys() | new.keys() if old.get(key) != new.get(key))
        shown = [f"{key}: {old.get(key)!r} there, {new.get(key)!r} now" for key in keys[:3]]
        more = f" and {len(keys) - 3} more" if len(keys) > 3 else ""
        why = "; ".join(shown) + more
    raise PartialOfOtherSettings(
        f"{partial} holds tasks evaluated under other settings ({why}): run with its settings "
        "to continue it, or delete it to evaluate afresh"
    )


def flat(value: object, prefix: str = "") -> dict[str, object]:
    """A nested dict by dotted key (`rollout.max_new_tokens`)."""
    if not isinstance(value, dict) or not value:
        return {prefix.removesuffix("."): value}
    return {
        key: leaf
        for name, item in value.items()
        for key, leaf in flat(item, f"{prefix}{name}.").items()
    }


def as_json(value: T) -> T:
    """`value` as it reads back from JSON (tuples become lists, keys strings)."""
    return json.loads(json.dumps(value, ensure_ascii=False))


def groups_jsonl(
    groups: list[Group], extra: list[list[dict]] | None = None, chunk: int | None = None
) -> str:
    """One task a line with its trajectories; `extra[g][t]` is merged into trajectory t of
    group g (e.g. the final ranking), and `chunk` (`PARTIAL_FILE`) is added to each line."""
    lines = []
    for g, group in enumerate(groups):
        trajectories = [json.loads(t.to_json()) for t in group.trajectories]
        if extra is not None:
            for t, trajectory in enumerate(trajectories):
                trajectory.update(extra[g][t])
        record = {"task": asdict(group.task), "trajectories": trajectories}
        if chunk is not None:
            record = {"chunk": chunk, **record}
        lines.append(json.dumps(record, ensure_ascii=False) + "\n")
    return "".join(lines)
