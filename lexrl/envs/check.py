"""`check_env`: what every env must get right, checked on a few tasks without a model.

Like gymnasium's `check_env`, a pass over the contract that training, evaluation and the audit
rely on (`lexrl.envs.base.Env`), each broken rule one line in plain words rather than a
traceback halfway through a run:

- `tasks(split)` returns a non-empty list of `Task`s with unique string ids, the same at a
  second call;
- an episode played by the env's scripted teacher (where it has one) and by each of its
  degenerate policies (`Env.degenerate_policies`) finishes: `run_episode` returns the
  Trajectory of `Policy.finish`, and nothing the env's code runs raises;
- the prompts it sends are non-empty strings, in a role of `Env.roles`;
- every reward component is a finite real number (`Policy.finish` fails an episode whose one
  is not: a run would count it as a judge failure and go on), every component of
  `Env.reward_components` is reported, and none that is not declared (training would stop at
  its first step);
- the reward is deterministic: the same replies played again on the same task give the same
  components.

An episode is played by a `ScriptedPolicy` (model-free: whole replies, text only, unless a
tokenizer and a token cap are given, as the audit has). A mixture is checked member by member,
each problem naming its env. Nothing here raises for a fault of the env: whatever the env's
code raises is a problem, with the call that raised it.
"""

from __future__ import annotations

import asyncio
import math
import random
from typing import TYPE_CHECKING, Any

from lexrl.envs.composite import members
from lexrl.envs.degenerate import ProbePolicy, TeacherFactory
from lexrl.generation import Completion, Sampling
from lexrl.policy import Messages, Teacher, unusable_component
from lexrl.types import Task, Trajectory

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from lexrl.envs.base import Env

TEACHER = "teacher"


def raised(call: str, error: BaseException) -> str:
    """`<call> raised <type>: <message>`, the line of an exception from the env's code."""
    message = str(error).strip().splitlines()
    return f"{call} raised {type(error).__name__}" + (f": {message[0]}" if message else "")


class CheckPolicy(ProbePolicy):
    """A scripted policy that keeps what the env sent and got: each call's role, system prompt
    and messages, each reply (`replies`), the components `finish` was given (before it drops an
    unusable one) and whether it was called; and tells an exception of its teacher from one of
    the env (`teacher_error`)."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase | None,
        task_id: str,
        teacher: Teacher,
        max_new_tokens: int | None = None,
    ):
        super().__init__(tokenizer, task_id, teacher, max_new_tokens)
        self.calls: list[tuple[str, Any, Any]] = []
        self.replies: list[str] = []
        self.components: Any = None
        self.finished = 0
        self.teacher_error: BaseException | None = None

    async def chat(self, role: str, system: str, messages: Messages, *args, **kwargs) -> str:
        self.calls.append((role, system, messages))
        text = await super().chat(role, system, messages, *args, **kwargs)
        self.replies.append(text)
        return text

    async def _complete(
        self, role: str, system: str, messages: Messages, prompt_ids: list[int], sampling: Sampling
    ) -> Completion:
        try:
            return await super()._complete(role, system, messages, prompt_ids, sampling)
        except Exception as error:
            self.teacher_error = error
            raise

    def finish(self, outcome: Any, components: Any, *args, **kwargs) -> Trajectory:
        self.finished += 1
        self.components = components
        return super().finish(outcome, components, *args, **kwargs)


def replay(replies: list[str]) -> TeacherFactory:
    """A teacher giving `replies` in order, then empty ones: a play's replies, played again."""

    def factory(task: Task, rng: random.Random) -> Teacher:
        queue = iter(replies)
        return lambda role, messages: next(queue, "")

    return factory


class Problems:
    """The problems found, each said once: a problem met in several episodes is one line, with
    the first episode it was met in and how many others."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[str, int]] = {}

    def add(self, text: str, where: str = "") -> None:
        first, count = self.seen.get(text, (where, 0))
        self.seen[text] = (first, count + 1)

    def lines(self, prefix: str) -> list[str]:
        out = []
        for text, (where, count) in self.seen.items():
            more = f" (and {count - 1} more episode{'s' * (count > 2)})" if count > 1 else ""
            out.append(f"{prefix}{where + ': ' if where else ''}{text}{more}")
        return out


def check_env(
    env: Env,
    split: str = "train",
    tasks: int = 3,
    seed: int = 0,
    tokenizer: PreTrainedTokenizerBase | None = None,
    max_new_tokens: int | None = None,
) -> list[str]:
    """One human-readable line per broken rule of the env contract (this module's docstring) on
    the first `tasks` tasks of `split`, each episode seeded by `seed`; empty when `env` passes.
    A mixture is checked member by member, each line starting with the member's name; a single
    env's lines start with its name too. With `tokenizer` and `max_new_tokens` replies are cut
    at each call's token cap as the audit cuts them (`ScriptedPolicy`); without, whole.

    Raises nothing for a fault of the env (an exception of its code is a line naming the call);
    a `tokenizer`-less `max_new_tokens` is the caller's error (`ValueError`)."""
    if max_new_tokens is not None and tokenizer is None:
        raise ValueError("cutting scripted replies at a token cap needs a tokenizer")
    try:
        envs = members(env)
    except Exception as error:  # noqa: BLE001 - an env's `members` is its own code
        return [raised(f"{getattr(env, 'name', type(env).__name__)}: members", error)]
    out: list[str] = []
    for name, member in envs.items():
        problems = Problems()
        check_member(member, split, tasks, seed, tokenizer, max_new_tokens, problems)
        out += problems.lines(f"{name}: ")
    return out


def check_member(
    env: Env,
    split: str,
    count: int,
    seed: int,
    tokenizer: PreTrainedTokenizerBase | None,
    max_new_tokens: int | None,
    problems: Problems,
) -> None:
    """`check_env` of one env (not a mixture), its problems added to `problems`."""
    check_declarations(env, problems)
    tasks = checked_tasks(env, split, problems)[:count]
    if not tasks:
        return
    policies: dict[str, TeacherFactory] = {}
    teacher_tasks = teacher_playable(env, tasks, seed, problems)
    try:
        own = env.degenerate_policies()
        if not isinstance(own, dict):
            problems.add(f"degenerate_policies() returned a {type(own).__name__}, not a dict")
            own = {}
    except Exception as error:  # noqa: BLE001 - the env's code
        problems.add(raised("degenerate_policies()", error))
        own = {}
    policies.update(own)
    for policy, factory in [(TEACHER, env.teacher), *policies.items()]:
        played = teacher_tasks if policy == TEACHER else tasks
        if played:
            check_policy(env, played, policy, factory, seed, tokenizer, max_new_tokens, problems)


def check_declarations(env: Env, problems: Problems) -> None:
    """The env's names: `name`, `roles` and `reward_components` as strings, its
    `headline_metric` `reward` or one of `episode_metrics`."""
    if not isinstance(getattr(env, "name", None), str) or not env.name:
        problems.add("the env has no `name` (a non-empty string)")
    roles = getattr(env, "roles", None)
    if not isinstance(roles, (tuple, list)) or not roles:
        problems.add("`roles` is not a non-empty tuple of role names")
    elif not all(isinstance(role, str) and role for role in roles):
        problems.add(f"`roles` {roles!r} holds a name that is not a non-empty string")
    declared = getattr(env, "reward_components", ())
    if isinstance(declared, str) or not all(isinstance(name, str) for name in declared):
        problems.add(f"`reward_components` {declared!r} is not a tuple of names")
    metrics = tuple(getattr(env, "episode_metrics", ()))
    headline = getattr(env, "headline_metric", "reward")
    if headline != "reward" and headline not in metrics:
        problems.add(
            f"`headline_metric` {headline!r} is neither 'reward' nor one of `episode_metrics`"
        )


def checked_tasks(env: Env, split: str, problems: Problems) -> list[Task]:
    """`env.tasks(split)` where it is a non-empty list of `Task`s with unique string ids, the
    same at a second call; [] (and the problem) where not."""
    call = f"tasks({split!r})"
    try:
        tasks = env.tasks(split)
    except Exception as error:  # noqa: BLE001 - the env's loader
        problems.add(raised(call, error))
        return []
    if not isinstance(tasks, list):
        problems.add(f"{call} returned a {type(tasks).__name__}, not a list of Task")
        return []
    if not tasks:
        problems.add(f"{call} returned no tasks")
        return []
    wrong = [(i, t) for i, t in enumerate(tasks) if not isinstance(t, Task)]
    if wrong:
        index, item = wrong[0]
        problems.add(
            f"{call}[{index}] is a {type(item).__name__}, not a Task"
            + (f" ({len(wrong)} such items)" if len(wrong) > 1 else "")
        )
        return []
    ids = [task.id for task in tasks]
    bad = [task_id for task_id in ids if not isinstance(task_id, str) or not task_id]
    if bad:
        problems.add(f"{call}: task id {bad[0]!r} is not a non-empty string ({len(bad)} such)")
    counts: dict[Any, int] = {}
    for task_id in ids:
        counts[task_id] = counts.get(task_id, 0) + 1
    duplicates = {task_id: n for task_id, n in counts.items() if n > 1}
    if duplicates:
        shown = ", ".join(f"{task_id!r} ({n} times)" for task_id, n in list(duplicates.items())[:5])
        more = f" and {len(duplicates) - 5} more" if len(duplicates) > 5 else ""
        problems.add(f"{call}: duplicate task ids: {shown}{more}")
    try:
        again = env.tasks(split)
        same = isinstance(again, list) and [getattr(t, "id", None) for t in again] == ids
    except Exception as error:  # noqa: BLE001
        problems.add(raised(f"{call} (called again)", error))
        same = True
    if not same:
        problems.add(f"{call} is not the same list of task ids at a second call")
    return tasks


def teacher_playable(env: Env, tasks: list[Task], seed: int, problems: Problems) -> list[Task]:
    """The tasks `env.teacher` can play (`NotImplementedError`: an env or task without one, no
    problem); any other exception is one."""
    out = []
    for task in tasks:
        try:
            env.teacher(task, random.Random(seed))
        except NotImplementedError:
            continue
        except Exception as error:  # noqa: BLE001 - the env's teacher
            problems.add(raised("teacher(task, rng)", error), f"task {task.id}")
            continue
        out.append(task)
    return out


def check_policy(
    env: Env,
    tasks: list[Task],
    policy: str,
    factory: TeacherFactory,
    seed: int,
    tokenizer: PreTrainedTokenizerBase | None,
    max_new_tokens: int | None,
    problems: Problems,
) -> None:
    """Play `policy` on each of `tasks`, then its replies again: each episode checked
    (`check_episode`), and the second play's components against the first's."""

    def make(task: Task, teacher: TeacherFactory) -> CheckPolicy | None:
        try:
            made = teacher(task, random.Random(seed))
        except Exception as error:  # noqa: BLE001 - the env's factory
            problems.add(raised(f"policy {policy}: making its teacher", error), f"task {task.id}")
            return None
        return CheckPolicy(tokenizer, task.id, made, max_new_tokens)

    first = play(env, [(task, make(task, factory)) for task in tasks])
    again = []
    for task, (scripted, result) in zip(tasks, first, strict=True):
        if scripted is None:
            continue
        where = f"task {task.id}, policy {policy}"
        if check_episode(env, task, scripted, result, problems, where):
            again.append((task, scripted))
    if not again:
        return
    second = play(env, [(task, make(task, replay(s.replies))) for task, s in again])
    for (task, one), (two, result) in zip(again, second, strict=True):
        where = f"task {task.id}, policy {policy}"
        if isinstance(result, BaseException):
            problems.add(raised("run_episode (the same replies played again)", result), where)
        elif two is not None and not same_components(one.components, two.components):
            problems.add(
                "the reward is not deterministic: the same replies played again gave "
                f"components {two.components!r}, the first play {one.components!r}",
                where,
            )


def play(
    env: Env, episodes: list[tuple[Task, CheckPolicy | None]]
) -> list[tuple[CheckPolicy | None, Trajectory | BaseException | None]]:
    """Each episode played in turn in one event loop, as `run_episode` returns it or the
    exception it raised (None: no policy to play it with)."""

    async def run() -> list[Any]:
        out = []
        for task, policy in episodes:
            if policy is None:
                out.append((None, None))
                continue
            try:
                out.append((policy, await env.run_episode(task, policy)))
            except Exception as error:  # noqa: BLE001 - the env's (or its teacher's) code
                out.append((policy, error))
        return out

    try:
        return asyncio.run(run())
    except Exception as error:  # noqa: BLE001 - a loop the env's code broke
        return [(policy, error) for _, policy in episodes]


def check_episode(
    env: Env,
    task: Task,
    policy: CheckPolicy,
    result: Trajectory | BaseException | None,
    problems: Problems,
    where: str,
) -> bool:
    """Add the problems of one played episode; whether it scored, so its replies can be played
    again for determinism."""
    if isinstance(result, BaseException):
        if policy.teacher_error is result:
            problems.add(raised("the policy's teacher", result), where)
        else:
            problems.add(raised("run_episode", result), where)
        return False
    if result is None:
        return False
    check_prompts(env, policy, problems, where)
    if not isinstance(result, Trajectory):
        problems.add(f"run_episode returned a {type(result).__name__}, not a Trajectory", where)
        return False
    if not policy.finished:
        problems.add("run_episode returned without calling Policy.finish", where)
        return False
    if policy.finished > 1:
        problems.add(f"run_episode called Policy.finish {policy.finished} times", where)
    components = policy.components
    if not isinstance(components, dict):
        problems.add(f"the reward components are a {type(components).__name__}, not a dict", where)
        return False
    unusable = unusable_component(components)
    if unusable is not None:
        problems.add(f"{unusable}: the episode counts as failed", where)
    elif result.failed:
        problems.add(f"the episode failed: {result.failed}", where)
    declared = tuple(getattr(env, "reward_components", ()))
    missing = [name for name in declared if name not in components]
    if missing:
        names = ", ".join(map(repr, missing))
        problems.add(f"declared reward component {names} not reported", where)
    extra = [name for name in components if name not in declared]
    if extra:
        names = ", ".join(map(repr, extra))
        problems.add(
            f"reward component {names} reported but not declared in reward_components", where
        )
    return unusable is None and not result.failed


def check_prompts(env: Env, policy: CheckPolicy, problems: Problems, where: str) -> None:
    """Each call's role is one of the env's, its system prompt a non-empty string and its
    messages a non-empty string or a list of chat messages ending with a non-empty user one.
    A call after an empty reply may carry that reply on (the `empty` policy's clerk leaves its
    judge nothing to read), so its message may be empty."""
    roles = tuple(getattr(env, "roles", ()))
    for index, (role, system, messages) in enumerate(policy.calls):
        if role not in roles:
            problems.add(f"chat in role {role!r}, not one of the env's roles {roles!r}", where)
        if not isinstance(system, str) or not system.strip():
            problems.add(f"role {role!r}: the system prompt is {short(system)}", where)
        after_empty = any(not reply.strip() for reply in policy.replies[:index])
        if isinstance(messages, str):
            if not messages.strip() and not after_empty:
                problems.add(f"role {role!r}: the user message is {short(messages)}", where)
            continue
        if not isinstance(messages, list) or not messages:
            problems.add(f"role {role!r}: the messages are {short(messages)}", where)
            continue
        for message in messages:
            if (
                not isinstance(message, dict)
                or message.get("role") not in ("user", "assistant")
                or not isinstance(message.get("content"), str)
            ):
                problems.add(
                    f"role {role!r}: a message is {short(message)}, not "
                    "{'role': 'user' | 'assistant', 'content': str}",
                    where,
                )
                break
        else:
            last = messages[-1]
            if last["role"] != "user" or not (last["content"].strip() or after_empty):
                problems.add(
                    f"role {role!r}: the last message is {short(last)}, not a non-empty user one",
                    where,
                )


def short(value: Any, limit: int = 60) -> str:
    """`value`'s repr, cut to `limit` characters (an empty string reads `''`)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def same_components(one: Any, two: Any) -> bool:
    """Whether two plays' components are the same names with the same values (to 1e-9)."""
    if not isinstance(one, dict) or not isinstance(two, dict) or one.keys() != two.keys():
        return False
    try:
        return all(
            math.isclose(float(one[k]), float(two[k]), rel_tol=1e-9, abs_tol=1e-12) for k in one
        )
    except (TypeError, ValueError):
        return False
