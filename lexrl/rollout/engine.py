"""Run K episodes for each of G tasks concurrently and return Groups, with a progress bar of
the episodes ended and, beside it, the turns played.

Each episode runs inside `RunningEpisodes.track`, so a deterministic backend knows when every
running episode waits for it and cuts its batch then. An episode whose policy call failed for
good (`EpisodeCallFailed`: a remote chat endpoint down) is returned failed, with the turns it
had, and the others go on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from lexrl.errors import EpisodeCallFailed
from lexrl.generation import RunningEpisodes
from lexrl.plugin_errors import note_task
from lexrl.policy import PolicyFactory, fail_missing_components
from lexrl.types import Group, Task, Trajectory

if TYPE_CHECKING:
    from lexrl.envs.base import Env


async def run_groups_async(
    env: Env,
    tasks: Sequence[Task],
    num_generations: int,
    make_policy: PolicyFactory,
    max_concurrent: int = 256,
    progress: bool = True,
    description: str = "rollout",
) -> list[Group]:
    limit = asyncio.Semaphore(max_concurrent)
    bar = tqdm(
        total=len(tasks) * num_generations, desc=description, disable=not progress, leave=False
    )
    running = RunningEpisodes(on_turn=lambda turns: show_turns(bar, turns))

    async def episode(task: Task, index: int) -> Trajectory:
        async with limit:
            with running.track(index):
                policy = make_policy(task)
                try:
                    trajectory = await env.run_episode(task, policy)
                    fail_missing_components(trajectory, declared_components(env, task))
                except EpisodeCallFailed as error:
                    trajectory = policy.trajectory
                    trajectory.failed = str(error)
                except Exception as error:
                    note_task(error, task.id)
                    raise
        bar.update(1)
        return trajectory

    # Episodes are created task-major so that a fixed seed gives the same batches every run.
    jobs = [
        episode(task, t * num_generations + k)
        for t, task in enumerate(tasks)
        for k in range(num_generations)
    ]
    try:
        trajectories = await asyncio.gather(*jobs)
    finally:
        close_bar(bar)
    return [
        Group(
            task=task,
            trajectories=list(trajectories[i * num_generations : (i + 1) * num_generations]),
        )
        for i, task in enumerate(tasks)
    ]


def declared_components(env: Env, task: Task) -> tuple[str, ...]:
    """`Env.declared_components`; none for a stand-in env without it (a test's, a tool's)."""
    declared = getattr(env, "declared_components", None)
    return declared(task) if declared is not None else ()


def show_turns(bar: tqdm, turns: int) -> None:
    """Show the turns played beside the episodes ended. `update(0)` redraws no more often than
    the bar's own updates do, so a log file gets no line per turn."""
    bar.set_postfix_str(f"turns={turns}", refresh=False)
    bar.update(0)


def close_bar(bar: tqdm) -> None:
    """Close `bar` with the next output on a line of its own. On a terminal tqdm wipes a bar
    left with `leave=False`; in a log file or a pipe, `\\r` wipes nothing, so the bar's last
    state is ended with a newline instead of leaving fragments that a table's title lands on."""
    # Read before closing: `close` marks the bar disabled.
    drawn = not bar.disable
    bar.close()
    if drawn and not getattr(bar.fp, "isatty", lambda: True)():
        bar.fp.write("\n")
        bar.fp.flush()


def run_groups(
    env: Env,
    tasks: Sequence[Task],
    num_generations: int,
    make_policy: PolicyFactory,
    max_concurrent: int = 256,
    progress: bool = True,
    description: str = "rollout",
) -> list[Group]:
    """Synchronous wrapper around `run_groups_async` (one event loop per call)."""
    return asyncio.run(
        run_groups_async(
            env, tasks, num_generations, make_policy, max_concurrent, progress, description
        )
    )
