"""Option types that several envs share, each field documented once: a chat endpoint (an LLM
judge, a reranker), a held-out split, the policy's sampling per turn, and the cache and
ensemble of external judges. An env's options compose them by inheritance, so that their keys
stay flat in YAML (`env.eval_fraction`, `env.judge_cache_dir`) and their `BOUNDS` and `CHOICES`
apply with the env's own (`lexrl.options.class_rules` merges them along the classes' MRO).

A type whose default differs in one env keeps its docstring: `with_defaults` gives the env's
class its own defaults without declaring the field again. A field's docstring is read from the
class that declares it (`declaring_class`): draccus' help looks only along a class's first base,
which an env's options, deriving `EnvConfig` and these types, are not on, so this module points
draccus' lookup at the declaring class. On the ground floor beside `lexrl.options` (it imports
nothing else of lexrl), so that both `lexrl.rewards.judge_config` and every env's options
import it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from draccus.wrappers import docstring as draccus_docstring

from lexrl.options import ABOVE_0, AT_LEAST_0, AT_LEAST_1, HELD_OUT, SEED

T = TypeVar("T", bound=type)


def with_defaults(**defaults: Any) -> Callable[[T], T]:
    """A class decorator, written below `@dataclass`, giving inherited fields other defaults
    (`@with_defaults(timeout_s=120.0)`). The field keeps its place, its type and the docstring
    of the class that declares it; a name that is no inherited field is a TypeError."""

    def decorate(cls: T) -> T:
        inherited: dict[str, dataclasses.Field] = {}
        for base in reversed(cls.__mro__[1:]):
            inherited |= getattr(base, "__dataclass_fields__", {})
        unknown = sorted(set(defaults) - set(inherited))
        if unknown:
            raise TypeError(f"{cls.__name__}: with_defaults names no inherited field: {unknown}")
        annotations = cls.__dict__.get("__annotations__", {})
        cls.__annotations__ = dict(annotations)
        for name, value in defaults.items():
            if name in annotations:
                raise TypeError(f"{cls.__name__}.{name} is declared: give it its default there")
            cls.__annotations__[name] = inherited[name].type
            setattr(cls, name, value)
        cls.__defaults_only__ = frozenset(defaults)
        return cls

    return decorate


def declaring_class(cls: type, name: str) -> type:
    """The class along `cls`'s MRO whose body declares the field `name` (and its docstring), a
    default given by `with_defaults` not counting; `cls` itself when none does."""
    for klass in cls.__mro__:
        own = klass.__dict__.get("__annotations__", {})
        if name in own and name not in klass.__dict__.get("__defaults_only__", ()):
            return klass
    return cls


_draccus_attribute_docstring = draccus_docstring.get_attribute_docstring


def _attribute_docstring(cls: type, name: str) -> draccus_docstring.AttributeDocString:
    return _draccus_attribute_docstring(declaring_class(cls, name), name)


draccus_docstring.get_attribute_docstring = _attribute_docstring


@dataclass
class ChatEndpoint:
    """An OpenAI-compatible chat model lexrl calls over HTTP (a judge, a reranker): where it is,
    how it is reached, and how long a reply may be."""

    base_url: str
    """OpenAI-compatible base URL with its version prefix (`http://host:8000/v1`); a URL with
    credentials (`user:key@`) or a query string is refused: the key goes in `api_key_env`."""
    model: str
    """Model name the endpoint serves; also part of the cache key."""
    api_key_env: str = ""
    """Name of the environment variable holding the API key (never the key itself: a value that
    is no upper-case variable name is refused); empty or unset: `EMPTY` is sent (a vLLM server
    started without `--api-key`). The key is masked in every stored failure message."""
    max_tokens: int = 512
    """Completion cap per reply."""
    timeout_s: float = 60.0
    """Per-request timeout."""
    max_retries: int = 3
    """Transport retries (connection errors, timeouts, 408/409/429/5xx), done by the `openai`
    client with exponential backoff from 0.5 s."""
    concurrency: int = 8
    """Requests in flight to this endpoint."""

    BOUNDS = {
        "max_tokens": AT_LEAST_1,
        "timeout_s": ABOVE_0,
        "max_retries": AT_LEAST_0,
        "concurrency": AT_LEAST_1,
    }


@dataclass
class HeldOutSplit:
    """The questions held out for evaluation where the data has no test split of its own."""

    eval_fraction: float = 0.3
    """Share of the questions held out, carved out in whole groups (a course, a case, a fact
    pattern: the env's data loader says which), never question by question, so that no
    held-out question shares its facts with a trained one. At most 0.5
    (`lexrl.envs.data.split_by_group`) unless the env says otherwise."""
    split_seed: int = 0
    """Seed of that split: the same seed gives the same held-out questions."""

    BOUNDS = {"eval_fraction": HELD_OUT, "split_seed": SEED}


@dataclass
class TurnTokens:
    """The length of the policy's turns."""

    max_new_tokens: int | None = None
    """Tokens per turn of the policy (a ply, an answer, a review); None:
    `rollout.max_new_tokens`."""

    BOUNDS = {"max_new_tokens": AT_LEAST_1}


@dataclass
class TurnSampling(TurnTokens):
    """The length and sampling temperature of the policy's turns, every role alike."""

    temperature: float = 1.0
    """Sampling temperature of every role the policy plays in training (evaluation samples
    greedily with `eval.greedy`)."""

    BOUNDS = {"temperature": AT_LEAST_0}


@dataclass
class JudgeCache:
    """Where the replies of the env's external models (`judges`) are kept."""

    judge_cache_dir: str = ".lexrl_cache/judge"
    """On-disk cache of external replies, keyed by model, messages and sampling: a
    re-evaluation or a resumed run pays for no call twice."""


@dataclass
class JudgeEnsemble(JudgeCache):
    """Several judges scoring one answer, and how their scores combine."""

    judge_aggregate: str = "min"
    """How several judges' scores of one answer combine: `min` (an answer is as good as its
    strictest judge says, LEXam's ensemble) or `mean`."""

    CHOICES = {"judge_aggregate": ("min", "mean")}
