"""The `Policy` handle an env plays its agents through, one per episode.

`chat(role, system, messages)` renders the chat template (so the trainer sees exactly the tokens
the sampler saw), asks the backend for a completion, records a Turn and returns the text. A
chat-level backend (`ChatBackend`: an OpenAI-compatible endpoint, for evaluation) gets the
messages instead; without a local tokenizer its Turns keep the text and whatever token ids and
log-probs the server returned.
`finish(...)` closes the episode into a Trajectory. `ScriptedPolicy` has the same interface but
answers from a teacher function: the env's workflow code runs unchanged for the warm-start data.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tqdm.auto import tqdm

from lexrl.generation import Backend, Completion, Sampling, count_turn
from lexrl.types import Task, Trajectory, Turn

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

Messages = str | list[dict[str, str]]
"""What `Policy.chat` sends after the system prompt: a string (one user message), or a list of
chat messages `{"role": "user" | "assistant", "content": ...}` in order (a multi-turn exchange, a
worked example before the question)."""


def conversation(system: str, messages: Messages) -> list[dict[str, str]]:
    """The chat messages of one call: the system prompt, then `messages` (a string is one user
    message)."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    return [{"role": "system", "content": system}, *messages]


def render_prompt(
    tokenizer: PreTrainedTokenizerBase | None, system: str, messages: Messages
) -> list[int]:
    """Token ids of the chat-templated prompt, ending with the assistant header ([] without a
    tokenizer)."""
    if tokenizer is None:
        return []
    text = tokenizer.apply_chat_template(
        conversation(system, messages), tokenize=False, add_generation_prompt=True
    )
    return tokenizer(text, add_special_tokens=False)["input_ids"]


@runtime_checkable
class ChatBackend(Protocol):
    """A backend that takes chat messages rather than token ids."""

    async def chat(self, messages: list[dict[str, str]], sampling: Sampling) -> Completion: ...


class Policy:
    """The handle an env plays every agent of one episode through: `Env.run_episode` gets a
    fresh one per episode, made by whoever runs the episode (the rollout engine's caller, which
    owns the model, its sampling settings and its adapter version).

    The env calls `chat` once per LLM call (any role, in any order; calls may run concurrently)
    and `finish` once at the end, and never sees the model, tokenizer or sampler: the same
    workflow code runs for training rollouts, evaluation, an outside trainer's replies
    (`lexrl.integrations`) and, through `ScriptedPolicy`, a scripted teacher. `record` keeps a
    reply the policy did not write (an external judge's). The episode builds up in `trajectory`.

    Made with:

    - `backend`: what generates: a token-level `Backend` (the in-process `hf` backend, vLLM)
      given the rendered prompt's ids, or a `ChatBackend` (an OpenAI-compatible endpoint) given
      the messages.
    - `tokenizer`: renders the chat template and decodes replies; None only with a
      `ChatBackend` (its Turns then keep what the server returned) or a `ScriptedPolicy`.
    - `task_id`: the id of the task played, copied into the Trajectory.
    - `max_new_tokens`: the cap on a reply's tokens when a call gives none
      (`rollout.max_new_tokens`).
    - `greedy`: decode every call greedily, whatever temperature the env asks for
      (`eval.greedy`).
    """

    def __init__(
        self,
        backend: Backend | ChatBackend,
        tokenizer: PreTrainedTokenizerBase | None,
        task_id: str,
        max_new_tokens: int = 96,
        greedy: bool = False,
    ):
        self.backend = backend
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.greedy = greedy
        self.trajectory = Trajectory(task_id=task_id)
        """The episode so far: every `chat` and `record` appends a Turn, `finish` completes it.
        The rollout engine returns it as it is, marked failed, when a call fails for good."""

    async def chat(
        self,
        role: str,
        system: str,
        messages: Messages,
        temperature: float = 1.0,
        trainable: bool = True,
        max_new_tokens: int | None = None,
    ) -> str:
        """Ask the policy, playing `role`, for one reply; record the call as a Turn of the
        episode and return the reply's text.

        - `role`: the agent speaking, one of `Env.roles`. It is recorded on the Turn, logged as
          `agent/<role>/...`, is the unit of `grpo.advantages: role` (`Trajectory.role_rewards`)
          and is what a scripted teacher is asked as.
        - `system`: the role's system prompt (usually its prompt file, `prompt_text`).
        - `messages`: what follows the system prompt (`Messages`): a string is one user message.
        - `temperature`: this call's sampling temperature; 0 decodes greedily. A greedy policy
          (`greedy=True`) decodes every call greedily whatever is asked.
        - `trainable`: False keeps the Turn for logs and samples but makes no training row of
          it: for a call whose reply the policy should not learn from. (Under
          `grpo.advantages: role` a role with no trainable turn in an episode is left out of
          its group's role rewards.)
        - `max_new_tokens`: this call's cap on the reply's tokens; None (or 0) takes the
          policy's own. A reply that reaches the cap is cut there and the env reads the cut
          text, so its parser must take any text (cut, empty, malformed) without raising.

        The backend gets the chat-templated prompt's token ids (a `ChatBackend`: the messages,
        the system prompt first). The Turn appended to `trajectory.turns` keeps `role`, the
        prompt ids the sampler saw (the policy's rendering, ending with the assistant header, or
        the server's own where a chat endpoint returns them), the completion ids with the
        sampler's log-probs, the text, the adapter version that sampled it (-1: scripted),
        `trainable`, and the temperature sampled at (1.0 for a greedy call), the one the
        trainer recomputes the log-probs at. Concurrent calls of one episode
        (`asyncio.gather`) are recorded in the order their replies come back.

        Returns the reply's text: the backend's own where it has one (a chat endpoint, a
        scripted reply without a tokenizer), else the completion ids decoded without special
        tokens.

        Raises `lexrl.rollout.backend.EpisodeCallFailed` when the backend gives up on the call
        (a remote endpoint down after its retries). An env lets it propagate: the rollout
        engine then returns the episode marked failed (`Trajectory.failed`) with the turns it
        had, and the other episodes go on. Under a `ScriptedPolicy`, whatever the teacher
        raises (for a role it does not play) propagates and ends the warm-start or audit.
        """
        prompt_ids = render_prompt(self.tokenizer, system, messages)
        sampling = Sampling(
            temperature=0.0 if self.greedy else temperature,
            max_new_tokens=max_new_tokens or self.max_new_tokens,
        )
        completion = await self._complete(role, system, messages, prompt_ids, sampling)
        if completion.prompt_ids is not None:
            prompt_ids = completion.prompt_ids
        text = completion.text
        if text is None:
            text = self.tokenizer.decode(completion.completion_ids, skip_special_tokens=True)
        self._keep(
            Turn(
                role=role,
                prompt_ids=prompt_ids,
                completion_ids=completion.completion_ids,
                logprobs=completion.logprobs,
                text=text,
                adapter_version=completion.adapter_version,
                trainable=trainable,
                temperature=sampling.temperature if sampling.temperature > 0 else 1.0,
            )
        )
        return text

    def record(self, role: str, system: str, messages: Messages, text: str) -> None:
        """Keep a reply the policy did not write (an external judge's) as a non-trainable Turn,
        so samples and W&B tables show its prompt and reply beside the policy's turns."""
        completion_ids = self._encode(text)
        self._keep(
            Turn(
                role=role,
                prompt_ids=render_prompt(self.tokenizer, system, messages),
                completion_ids=completion_ids,
                logprobs=[0.0] * len(completion_ids),
                text=text,
                adapter_version=-1,
                trainable=False,
            )
        )

    def _keep(self, turn: Turn) -> None:
        """Add `turn` to the trajectory and count it towards the rollout's progress bar."""
        self.trajectory.turns.append(turn)
        count_turn()

    def _encode(self, text: str) -> list[int]:
        if self.tokenizer is None:
            return []
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    async def _complete(
        self, role: str, system: str, messages: Messages, prompt_ids: list[int], sampling: Sampling
    ) -> Completion:
        if isinstance(self.backend, ChatBackend):
            return await self.backend.chat(conversation(system, messages), sampling)
        return await self.backend.generate(prompt_ids, sampling)

    def finish(
        self,
        outcome: Any,
        components: dict[str, float],
        steps: list[dict[str, Any]] | None = None,
        metrics: dict[str, float] | None = None,
    ) -> Trajectory:
        """Close the episode and return its Trajectory, the one `chat` filled: the last call of
        `run_episode`.

        - `outcome`: the episode's result (`Trajectory.outcome`; JSON-serialisable), for the
          env's own report and for reading.
        - `components`: the reward components by name, already weighted by the env; the
          trajectory's `reward` is their sum. Each name in `Env.reward_components` is logged as
          `reward/<name>`; a name the env does not declare there stops the run at its first step.
        - `steps`: per-step records (`Trajectory.steps`); a step's `action` is counted as
          `agent/<role>/action/<action>`, the role the step's `role` names or else the env's lead
          role (`Env.actions`). None: no steps.
        - `metrics`: numbers that are not reward (`Trajectory.metrics`), logged as `env/<name>`
          for each name in `Env.episode_metrics`. None: no metrics.

        The dicts and the list are copied. The env then sets `role_rewards`, or `failed` (no
        reward could be computed), on the returned Trajectory where they apply. A component
        that is not a finite number (NaN, inf, a string) fails the episode: it is counted and
        left out as one whose judge failed, and the first such component of the process is
        reported in one line."""
        self.trajectory.outcome = outcome
        self.trajectory.components = dict(components)
        unusable = unusable_component(components)
        if unusable is not None:
            fail_episode(self.trajectory, unusable)
        else:
            self.trajectory.reward = float(sum(components.values()))
        self.trajectory.steps = list(steps or [])
        self.trajectory.metrics = dict(metrics or {})
        return self.trajectory


def unusable_component(components: dict[str, Any]) -> str | None:
    """Why the first component that is not a finite number cannot be a reward, or None."""
    for name, value in components.items():
        # A numpy or 0-d torch number converts, and a string would too ("1").
        if isinstance(value, (str, bytes)) or not hasattr(value, "__float__"):
            return f"reward component {name!r} is {value!r} ({type(value).__name__}), not a number"
        if not math.isfinite(float(value)):
            return f"reward component {name!r} is {value!r}, not a finite number"
    return None


def fail_missing_components(trajectory: Trajectory, declared: Sequence[str]) -> None:
    """Fail a scored `trajectory` that leaves out a component its env declares
    (`Env.reward_components`), as `Policy.finish` fails a non-finite one: logged as 0.0 it would
    look like a reward the episode earned."""
    if trajectory.failed:
        return
    missing = [name for name in declared if name not in trajectory.components]
    if missing:
        why = f"declared reward component(s) {', '.join(map(repr, missing))} missing"
        fail_episode(trajectory, why, " (the env declares them in `reward_components`)")


def fail_episode(trajectory: Trajectory, why: str, said: str = "") -> None:
    """Mark `trajectory` failed for `why`, an env's fault that leaves no reward to learn from
    (counted and left out as an episode whose judge failed), with one `env error` line the first
    time this process meets `why` (`said`, if given, follows it in the line)."""
    trajectory.failed = why
    trajectory.components = {}
    trajectory.reward = 0.0
    report_once(
        why,
        f"env error: task {trajectory.task_id}: {why}{said}; the episode counts as failed "
        "(said once)",
    )


_REPORTED: set[str] = set()


def report_once(key: str, line: str) -> None:
    """Print `line` to stderr the first time this process meets `key`: an env that returns NaN
    for every episode says so once, not once per episode. Written above a running progress bar,
    not into it."""
    if key not in _REPORTED:
        _REPORTED.add(key)
        tqdm.write(line, file=sys.stderr)


Teacher = Callable[[str, Messages], str]
"""A scripted policy: `teacher(role, messages)` returns the reply to one `chat` call, given the
role asked and the call's `messages` (the system prompt left out). `Env.teacher` makes one per
task, so it knows the task (and its `gold`) without reading it from the prompt; a
`TeacherFactory` (`lexrl.envs.degenerate`) makes one that ignores the task's content.
`ScriptedPolicy` calls it in place of a model, synchronously and in the order the env makes its
calls, so it may keep state across the calls of its episode. A teacher raises for a role it
does not play (`KeyError`, say), which ends the episode with that error."""


class ScriptedPolicy(Policy):
    """Answers every `chat` from `teacher(role, messages)`; turns carry log-prob 0 (not sampled).
    Without a tokenizer the turns keep the text alone.

    With `max_new_tokens` set, a reply is cut at the call's token cap (the env's per-call cap,
    else `max_new_tokens`) as a sampled one would be, and the env reads the cut text: the audit
    then scores a scripted reply exactly as a rollout under that cap would. Without it (the
    warm-start's demonstrations) replies are whole."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase | None,
        task_id: str,
        teacher: Teacher,
        max_new_tokens: int | None = None,
    ):
        super().__init__(backend=None, tokenizer=tokenizer, task_id=task_id)  # type: ignore[arg-type]
        if max_new_tokens is not None:
            if tokenizer is None:
                raise ValueError("cutting scripted replies at a token cap needs a tokenizer")
            self.max_new_tokens = max_new_tokens
        self.cut = max_new_tokens is not None
        self.teacher = teacher

    async def _complete(
        self, role: str, system: str, messages: Messages, prompt_ids: list[int], sampling: Sampling
    ) -> Completion:
        text = self.teacher(role, messages)
        if self.tokenizer is None:
            return Completion([], [], adapter_version=-1, text=text)
        ids = self._encode(text) + [self.tokenizer.eos_token_id]
        if self.cut:
            ids = ids[: sampling.max_new_tokens]
        return Completion(ids, [0.0] * len(ids), adapter_version=-1)


PolicyFactory = Callable[[Task], Policy]
"""Makes the policy that plays one task's episode (`lexrl.rollout.engine.run_groups`): the
trainer's samples from the model; a `TeacherFactory` wrapped in `ScriptedPolicy` plays a script."""
