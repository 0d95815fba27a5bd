"""The `Policy` handle an env plays its agents through, one per episode.

`chat(role, system, messages)` renders the chat template (so the trainer sees exactly the tokens
the sampler saw), asks the backend for a completion, records a Turn and returns the text.
`finish(...)` closes the episode into a Trajectory. `ScriptedPolicy` has the same interface but
answers from a teacher function: the env's workflow code runs unchanged for the warm-start data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from transformers import PreTrainedTokenizerBase

from lexrl.rollout.backend import Backend, Completion, Sampling
from lexrl.types import Trajectory, Turn

Messages = str | list[dict[str, str]]


def render_prompt(tokenizer: PreTrainedTokenizerBase, system: str, messages: Messages) -> list[int]:
    """Token ids of the chat-templated prompt, ending with the assistant header."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    conversation = [{"role": "system", "content": system}, *messages]
    text = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


class Policy:
    def __init__(
        self,
        backend: Backend,
        tokenizer: PreTrainedTokenizerBase,
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
        completion = await self._complete(role, messages, prompt_ids, sampling)
        text = self.tokenizer.decode(completion.completion_ids, skip_special_tokens=True)
        self.trajectory.turns.append(
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
        completion_ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        self.trajectory.turns.append(
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

    async def _complete(
        self, role: str, messages: Messages, prompt_ids: list[int], sampling: Sampling
    ) -> Completion:
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
    """Answers every `chat` from `teacher(role, messages)`; turns carry log-prob 0 (not sampled)."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, task_id: str, teacher: Teacher):
        super().__init__(backend=None, tokenizer=tokenizer, task_id=task_id)  # type: ignore[arg-type]
        self.teacher = teacher

    async def _complete(
        self, role: str, messages: Messages, prompt_ids: list[int], sampling: Sampling
    ) -> Completion:
        text = self.teacher(role, messages)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [
            self.tokenizer.eos_token_id
        ]
        return Completion(ids, [0.0] * len(ids), adapter_version=-1)
