"""One LLM judge's endpoint and sampling: kept apart from `lexrl.rewards.judge` so that the
config layer composes it without importing the `openai` client."""

from __future__ import annotations

from dataclasses import dataclass

from lexrl.options import ABOVE_0, AT_LEAST_0, AT_LEAST_1


@dataclass
class JudgeConfig:
    base_url: str
    """OpenAI-compatible base URL with its version prefix (`http://host:8000/v1`); a URL with
    credentials (`user:key@`) or a query string is refused: the key goes in `api_key_env`.
    `builtin:reference-overlap`: no model but an in-process stand-in for a paid judge, for demos
    and tests on machines without one: it answers LEXam's judge prompt with the token F1 of the
    answer against the reference answer as `[[0.xx]]` (`lexrl.rewards.reference_judge`)."""
    model: str
    """Model name the endpoint serves; also part of the cache key."""
    api_key_env: str = ""
    """Name of the environment variable holding the API key (never the key itself: a value that
    is no upper-case variable name is refused); empty: no key, `EMPTY` is sent (a vLLM server
    started without `--api-key`). The key is masked in every stored failure message."""
    temperature: float = 0.0
    """Sampling temperature (LEXam judges at 0)."""
    max_tokens: int = 512
    """Completion cap per reply: room for the explanation before the `[[x.x]]` score."""
    timeout_s: float = 60.0
    """Per-request timeout."""
    max_retries: int = 3
    """Transport retries (connection errors, timeouts, 408/409/429/5xx), done by the `openai`
    client with exponential backoff from 0.5 s."""
    max_parse_retries: int = 2
    """Re-asks after an unparsable reply, the model seeing why it was refused."""
    concurrency: int = 8
    """Requests in flight to this judge."""

    BOUNDS = {
        "temperature": AT_LEAST_0,
        "max_tokens": AT_LEAST_1,
        "timeout_s": ABOVE_0,
        "max_retries": AT_LEAST_0,
        "max_parse_retries": AT_LEAST_0,
        "concurrency": AT_LEAST_1,
    }
