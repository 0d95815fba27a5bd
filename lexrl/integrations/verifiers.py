"""lexrl's envs as verifiers 0.4 environments: `vf-eval` and prime-rl play them unchanged.

verifiers 0.4 (`verifiers.v1`) is a plugin stack: a *taskset* yields `vf.Task`s, an `vf.Env`
plays one task as an *episode* of its *agents* (one `vf.AgentConfig` seat per role, played by
the run's model unless the seat pins another), each agent run is a `vf.Trace` whose model calls
go through verifiers' interception server to the run's endpoint, and rewards are named, weighted
entries on the traces (`Trace.record_reward`; a trace's reward is their weighted sum). Plugins
are found by id: `vf-eval <id>` imports the module named by the id, which exports its Taskset,
Env and Harness subclasses through `__all__`. This module is that plugin, under the id
`lexrl-verifiers` (`PLUGIN_ID`), and maps lexrl onto it so:

- `LexrlTaskset` (`vf.Taskset`): each lexrl task of the evaluated split (`lexrl eval`'s own
  choice, `eval_tasks`: `eval.split`, the first `eval.max_tasks` of each env) is one row,
  `LexrlTaskData`: `id` the lexrl task id, `env` the env that made it (a mixture's member).
- `LexrlEnv` (`vf.Env`): one agent seat per lexrl role (`Env.roles`; the seats are made when the
  lexrl env is known, `seated`), all played by the run's model. `run` plays lexrl's own episode
  (`EpisodeSession`: the env's workflow, parsers, external judges and rewards unchanged); each
  `AgentRequest` is one run of that role's agent on a one-call task (its messages, temperature
  and max tokens), stamped `trainable` as the request says. lexrl's external judges are called
  by the env itself, so they are not agents and leave no trace here.
- `LexrlHarness` (`vf.Harness`): plays one call in-process (no program, no sandbox): one chat
  completion through the interception endpoint, as the harness contract allows.
- Rewards, recorded on every trace of the episode: `reward` (weight 1) is lexrl's episode reward,
  the number `lexrl eval` averages and lexrl's GRPO credits every trainable turn with; weight 0
  (so they leave the trace's reward alone): `reward/<component>` for each reward component and
  `agent/<role>/reward` for each acting role's own reward (`grpo.advantages: role`; a trainer
  reads `agent/<trace.agent.name>/reward`). lexrl's episode metrics are the traces' metrics.
- A failed lexrl episode (a judge that could not score it, a model call that failed) has no
  reward, never a 0: `run` raises, so verifiers marks the episode not ok with the reason on
  `episode.errors` and the traces carry no rewards (what a resumed run plays again).

At the end of a run (`vf-eval`), the env prints `lexrl eval`'s table of episode means over the
episodes it played, computed from the rewards and metrics recorded on the traces
(`summarize_episodes`), so the two evaluations read alike. The dashboard's own headline differs
for envs with several calls an episode: it averages over traces, not episodes.

Lost in the mapping: the lexrl Trajectory's token ids and log-probs (verifiers records its own
per trace: with `--client.type train` its nodes carry token ids and log-probs for training), the
external judges' calls, and `Trajectory.steps` (the workflow's per-step info).

    python -m lexrl.integrations.verifiers --env.taskset.config configs/legal_mix_cpu.yaml \\
        --env.taskset.max-tasks 4 -m smollm2 --client.base-url http://127.0.0.1:8000/v1 \\
        --sampling.temperature 0 --no-push

runs `vf-eval` on this plugin (the module registers itself as the top-level module
`lexrl_verifiers`, which verifiers' id lookup needs; the `lexrl` package has no top-level module
of that name for a bare `vf-eval lexrl-verifiers` to import).
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import openai
import pydantic
import verifiers.v1 as vf
from rich.console import Console
from verifiers.v1.env import RunSlot

from lexrl.config import Config, load_config
from lexrl.envs import make_env
from lexrl.envs.base import Env as LexrlEnvBase
from lexrl.envs.composite import composite, members
from lexrl.eval.evaluate import env_summaries, eval_tasks, print_summary
from lexrl.integrations.episode import AgentRequest, EpisodeResult, EpisodeSession
from lexrl.types import Group, Task, Trajectory

PLUGIN_ID = "lexrl-verifiers"
"""The taskset and harness id verifiers finds this module by."""
MODULE_ALIAS = PLUGIN_ID.replace("-", "_")
"""The module name verifiers imports for `PLUGIN_ID` (registered at the end of this module)."""

REWARD = "reward"
"""The weight-1 reward of every trace: lexrl's episode reward."""


def component_reward(name: str) -> str:
    """The weight-0 reward entry of a reward component (lexrl logs it under the same key)."""
    return f"reward/{name}"


def role_reward(role: str) -> str:
    """The weight-0 reward entry of a role's own reward (lexrl logs it under the same key)."""
    return f"agent/{role}/reward"


@functools.cache
def lexrl_setup(config: str, overrides: tuple[str, ...]) -> tuple[Config, LexrlEnvBase]:
    """The lexrl config and its env, built once per process: the taskset and the env of one run
    both need them, and building an env can read a data set."""
    loaded = load_config(config, list(overrides))
    return loaded, make_env(loaded.env)


class LexrlTaskData(vf.TaskData):
    """A row: a lexrl task (`id`, `env`), or one agent call of its episode (`role` set, the
    call's messages as `system_prompt` and `prompt`)."""

    env: str
    """The lexrl env that made the task (a mixture's member)."""
    role: str | None = None
    turn: int | None = None
    """The call's position in its episode, from 0."""
    temperature: float | None = None
    """The sampling temperature the env asks for (a run's `--sampling.temperature` wins)."""
    max_tokens: int | None = None


class LexrlTask(vf.Task[LexrlTaskData]):
    @property
    def key(self) -> str:
        # The lexrl task id is unique within an evaluation (a mixture's ids name their member).
        return self.data.id or self.hash


class LexrlTasksetConfig(vf.TasksetConfig):
    id: str = PLUGIN_ID
    config: str = "configs/legal_mix_cpu.yaml"
    """The lexrl YAML config of the env, as `lexrl eval` takes it."""
    overrides: list[str] = pydantic.Field(default_factory=list)
    """`--section.key value` overrides of `config`, as on lexrl's command line."""
    split: str | None = None
    """The evaluated split (None: the config's `eval.split`)."""
    max_tasks: int | None = None
    """The first this many tasks of each env (None: the config's `eval.max_tasks`)."""
    member: str | None = None
    """Play one member env of a mixture config alone, on its share of the mixture's tasks (the
    numbers `lexrl eval` reports under `<member>/`)."""

    def lexrl_overrides(self) -> tuple[str, ...]:
        """`overrides` with `split` and `max_tasks` as lexrl overrides."""
        extra = []
        if self.split is not None:
            extra += ["--eval.split", self.split]
        if self.max_tasks is not None:
            extra += ["--eval.max_tasks", str(self.max_tasks)]
        return (*self.overrides, *extra)


class LexrlTaskset(vf.Taskset[LexrlTask, LexrlTasksetConfig]):
    """The tasks `lexrl eval` evaluates with the same config and overrides."""

    def __init__(self, config: LexrlTasksetConfig) -> None:
        super().__init__(config)
        self.lexrl_config, self.env = lexrl_setup(
            str(Path(config.config)), config.lexrl_overrides()
        )
        if config.member is not None:
            envs = members(self.env)
            if config.member not in envs:
                raise ValueError(
                    f"`member` is {config.member!r}; the config's envs: {sorted(envs)}"
                )
            self.env = envs[config.member]
        self.lexrl_tasks = {task.id: task for task in eval_tasks(self.env, self.lexrl_config)}

    def load(self) -> Iterable[LexrlTask]:
        view = composite(self.env)
        for task in self.lexrl_tasks.values():
            member = view.member_name(task)
            yield LexrlTask(
                LexrlTaskData(id=task.id, name=f"{member}/{task.id}", env=member),
                self.config.task,
            )


class LexrlHarnessConfig(vf.HarnessConfig):
    id: str = PLUGIN_ID


class LexrlHarness(vf.Harness[LexrlHarnessConfig]):
    """One agent call: a chat completion of the call's messages through the rollout's
    interception endpoint, which records it on the trace and forwards it to the run's model."""

    APPENDS_SYSTEM_PROMPT = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
    ) -> vf.ProgramResult:
        if not isinstance(data, LexrlTaskData) or data.role is None:
            raise vf.HarnessError(f"{PLUGIN_ID} plays lexrl agent calls, not {data!r}")
        messages = [{"role": "system", "content": data.system_prompt or ""}]
        messages += [{"role": m.role, "content": m.content} for m in data.prompt or []]
        async with openai.AsyncOpenAI(base_url=endpoint, api_key=secret) as client:
            await client.chat.completions.create(
                model=ctx.model,
                messages=messages,  # type: ignore[arg-type]
                temperature=data.temperature,
                max_tokens=data.max_tokens,
            )
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


class LexrlEnvConfig(vf.EnvConfig):
    """The env's config. Its agent seats, one per lexrl role, are added once the lexrl env is
    known (`seated`): a lexrl config decides its roles, so no class can declare them ahead."""

    roles: dict[str, dict[str, Any]] = pydantic.Field(default_factory=dict)
    """`vf.AgentConfig` fields for some roles' seats (e.g. `{"judge": {"model": "gpt-4o"}}`);
    a seat not named here plays the run's model, client and sampling."""
    summary: bool = True
    """Print `lexrl eval`'s table of episode means when the env stops serving (the end of a
    `vf-eval` run). Keeps each finished episode's numbers until then: turn it off for a
    long-running env server."""


def seat(overrides: dict[str, Any]) -> vf.AgentConfig:
    """A role's seat: this module's harness in a local subprocess runtime (the harness runs
    nothing in it), unless `overrides` say otherwise."""
    return vf.AgentConfig.model_validate(
        {"harness": {"id": PLUGIN_ID}, "runtime": {"type": "subprocess"}, **overrides}
    )


def seated(config: LexrlEnvConfig, roles: tuple[str, ...]) -> LexrlEnvConfig:
    """`config` as an instance of a subclass with one seat per role (verifiers makes an env's
    agents from its config's `AgentConfig` fields, named after them)."""
    unknown = sorted(set(config.roles) - set(roles))
    if unknown:
        raise ValueError(f"`roles` names {unknown}, not roles of this env: {list(roles)}")
    seats: dict[str, Any] = {
        role: (vf.AgentConfig, seat(config.roles.get(role, {}))) for role in roles
    }
    cls = pydantic.create_model(f"{type(config).__name__}Seated", __base__=type(config), **seats)
    return cls.model_validate({name: getattr(config, name) for name in type(config).model_fields})


class LexrlEpisodeFailed(RuntimeError):
    """A lexrl episode without a reward: a judge could not score it, or an agent call failed."""


class LexrlEnv(vf.Env[LexrlEnvConfig]):
    """lexrl's env: each episode is lexrl's own, each of its agent calls a run of the role's
    agent."""

    def __init__(self, config: LexrlEnvConfig) -> None:
        taskset = vf.load_taskset(config.taskset)
        if not isinstance(taskset, LexrlTaskset):
            raise TypeError(f"{type(self).__name__} plays the {PLUGIN_ID} taskset only")
        super().__init__(seated(config, taskset.env.roles))
        self.lexrl: LexrlTaskset = taskset
        self.played: list[tuple[Task, Trajectory]] = []
        self.label = ""

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        data = task.data
        assert isinstance(data, LexrlTaskData) and data.id is not None
        session = EpisodeSession(
            self.lexrl.env,
            self.lexrl.lexrl_tasks[data.id],
            max_new_tokens=self.lexrl.lexrl_config.rollout.max_new_tokens,
        )
        traces: list[vf.Trace] = []
        try:
            step = await session.start()
            while isinstance(step, AgentRequest):
                trace = await self.call(agents, data, step, len(traces))
                traces.append(trace)
                reply = trace.assistant_messages[-1].content if trace.assistant_messages else ""
                step = await session.reply(reply or "")
        finally:
            session.close()
        if step.failed is not None:
            raise LexrlEpisodeFailed(f"lexrl episode of task {data.id!r} failed: {step.failed}")
        record(traces, step)

    async def call(
        self, agents: vf.Agents, data: LexrlTaskData, request: AgentRequest, turn: int
    ) -> vf.Trace:
        """One agent call of the episode: a run of the role's agent on the call's messages."""
        system, *messages = request.messages
        agent = getattr(agents, request.role)
        agent.trainable = request.trainable
        call = LexrlTask(
            LexrlTaskData(
                idx=data.idx,
                id=data.id,
                name=f"{data.env}/{data.id}/{turn}",
                env=data.env,
                role=request.role,
                turn=turn,
                system_prompt=system["content"],
                prompt=messages,
                temperature=request.temperature,
                max_tokens=request.max_new_tokens,
            )
        )
        trace = await agent.run(call)
        if not trace.ok:
            error = trace.last_error
            reason = f"{error.type}: {error.message}" if error else trace.stop_condition
            raise LexrlEpisodeFailed(f"{request.role} call {turn} of task {data.id!r}: {reason}")
        return trace

    async def start(self) -> None:
        self.played = []

    async def run_slot(
        self,
        slot: RunSlot,
        ctx: vf.ModelContext,
        semaphore: asyncio.Semaphore | None = None,
        on_complete: Callable[[vf.Episode], Awaitable[None]] | None = None,
        on_trace: Callable[[vf.Trace], None] | None = None,
    ) -> vf.Episode:
        """The base's, keeping the finished episode's numbers for the summary (retries
        included: only the final attempt counts)."""
        episode = await super().run_slot(slot, ctx, semaphore, on_complete, on_trace)
        if self.config.summary:
            self.label = ctx.model
            data = episode.task.data
            self.played.append((self.lexrl.lexrl_tasks[data.id], trajectory_of(episode)))
        return episode

    async def stop(self) -> None:
        if self.played:
            summary, intervals = summarize_played(self.lexrl.env, self.played)
            print_summary({self.label: summary}, Console(), {self.label: intervals})
            self.played = []


def record(traces: list[vf.Trace], result: EpisodeResult) -> None:
    """lexrl's reward, reward components, role rewards and metrics onto every trace."""
    assert result.reward is not None
    for trace in traces:
        trace.record_reward(REWARD, result.reward)
        for name, value in result.components.items():
            trace.record_reward(component_reward(name), value, weight=0.0)
        for role, value in result.role_rewards.items():
            trace.record_reward(role_reward(role), value, weight=0.0)
        trace.record_metrics(result.metrics)


def trajectory_of(episode: vf.Episode) -> Trajectory:
    """The lexrl numbers an episode recorded, as a Trajectory without turns: its reward,
    reward components and metrics, or why it failed."""
    task_id = episode.task.data.id
    if not episode.ok or not episode.traces:
        error = episode.last_error or next(
            (trace.last_error for trace in episode.traces if trace.last_error), None
        )
        return Trajectory(task_id, failed=error.message if error else "episode not ok")
    trace = episode.traces[0]
    components = {
        name.removeprefix("reward/"): reward.score
        for name, reward in trace.rewards.items()
        if reward is not None and name.startswith("reward/")
    }
    reward = trace.rewards[REWARD]
    assert reward is not None
    return Trajectory(
        task_id,
        reward=reward.score,
        components=components,
        metrics={name: value for name, value in trace.metrics.items() if value is not None},
    )


def summarize_played(
    env: LexrlEnvBase, played: list[tuple[Task, Trajectory]]
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """`lexrl eval`'s episode means and intervals (`env_summaries`) of the played episodes,
    grouped by task in the order first played."""
    groups: dict[str, Group] = {}
    for task, trajectory in played:
        groups.setdefault(task.id, Group(task, [])).trajectories.append(trajectory)
    return env_summaries(env, [group.task for group in groups.values()], list(groups.values()))


def summarize_episodes(
    env: LexrlEnvBase, tasks: dict[str, Task], episodes: Iterable[vf.Episode]
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """`lexrl eval`'s numbers of verifiers episodes (e.g. a `vf-eval` run's `traces.jsonl`),
    from what their traces recorded; `tasks`: the lexrl tasks by id."""
    return summarize_played(
        env, [(tasks[episode.task.data.id], trajectory_of(episode)) for episode in episodes]
    )


def load_environment(
    config: str = "configs/legal_mix_cpu.yaml",
    split: str | None = None,
    max_tasks: int | None = None,
    overrides: list[str] | None = None,
    member: str | None = None,
    **kwargs: Any,
) -> LexrlEnv:
    """The verifiers env of a lexrl config: its evaluation tasks (`split` and `max_tasks`
    default to the config's `eval.split` and `eval.max_tasks`, as in `lexrl eval`), or those of
    one `member` of a mixture; `kwargs` are `LexrlEnvConfig` fields (`roles`, `summary`,
    `max_concurrent_agents`, ...)."""
    taskset = LexrlTasksetConfig(
        config=config,
        split=split,
        max_tasks=max_tasks,
        overrides=list(overrides or []),
        member=member,
    )
    return LexrlEnv(LexrlEnvConfig(taskset=taskset, **kwargs))


__all__ = [
    "LexrlEnv",
    "LexrlHarness",
    "LexrlTaskset",
    "load_environment",
]


def main(argv: list[str] | None = None) -> None:
    """`vf-eval` on this plugin: `argv` are vf-eval's options."""
    from verifiers.v1.cli.eval.main import main as vf_eval

    vf_eval([PLUGIN_ID, *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    # Run as a script, this file is `__main__`: the plugin is the module `lexrl` imports.
    from lexrl.integrations.verifiers import main as plugin_main

    plugin_main()
else:
    sys.modules.setdefault(MODULE_ALIAS, sys.modules[__name__])
