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

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from transformers import PreTrainedTokenizerBase

from lexrl.rollout.backend import Backend, Completion, Sampling, count_turn
from lexrl.types import Trajectory, Turn

Messages = str | list[dict[str, str]]


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

    async def chat(
        self,
        role: str,
        system: str,
        messages: Messages,
        temperature: float = 1.0,
        trainable: bool = True,
        max_new_tokens: int | None = None,
    ) -> str:
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
        """Close the episode; the reward is the sum of the (already weighted) components."""
        self.trajectory.outcome = outcome
        self.trajectory.components = dict(components)
        self.trajectory.reward = float(sum(components.values()))
        self.trajectory.steps = list(steps or [])
        self.trajectory.metrics = dict(metrics or {})
        return self.trajectory


Teacher = Callable[[str, Messages], str]


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
