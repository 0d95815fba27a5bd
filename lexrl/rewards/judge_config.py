"""One LLM judge's endpoint and sampling: kept apart from `lexrl.rewards.judge` so that the
config layer composes it without importing the `openai` client."""

from __future__ import annotations

from dataclasses import dataclass

from lexrl.env_options import ChatEndpoint
from lexrl.options import AT_LEAST_0


@dataclass
class JudgeConfig(ChatEndpoint):
    """One LLM judge: its endpoint (`ChatEndpoint`; `max_tokens` leaves room for the explanation
    before the `[[x.x]]` score) and how it samples and is re-asked."""

    base_url: str
    """OpenAI-compatible base URL with its version prefix (`http://host:8000/v1`); a URL with
    credentials (`user:key@`) or a query string is refused: the key goes in `api_key_env`.
    `builtin:reference-overlap`: no model but an in-process stand-in for a paid judge, for demos
    and tests on machines without one: it answers LEXam's judge prompt with the token F1 of the
    answer against the reference answer as `[[0.xx]]` (`lexrl.rewards.reference_judge`)."""
    temperature: float = 0.0
    """Sampling temperature (LEXam judges at 0)."""
    max_parse_retries: int = 2
    """Re-asks after an unparsable reply, the model seeing why it was refused."""

    BOUNDS = {"temperature": AT_LEAST_0, "max_parse_retries": AT_LEAST_0}
