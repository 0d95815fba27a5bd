"""Build the configured rollout backend (`rollout.backend`). Each backend's module is imported
only when it is the one configured, so a machine with torch and transformers alone (a GPU image
without openai or vLLM) runs the `hf` backend."""

from __future__ import annotations

from typing import TYPE_CHECKING

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from lexrl.config import Config
from lexrl.generation import Backend
from lexrl.rollout.hf_backend import HFBackend

if TYPE_CHECKING:
    from lexrl.rollout.openai_chat import OpenAIChatBackend


def make_backend(
    config: Config, policy: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, base_path: str
) -> Backend | OpenAIChatBackend:
    """`policy` is the live LoRA model (`hf` samples from it); `base_path` is the base model the
    vLLM backends serve (the same weights the LoRA sits on)."""
    rollout = config.rollout
    if rollout.backend == "openai":
        return make_chat_backend(config)
    if rollout.backend == "vllm-server":
        from lexrl.rollout.vllm_server import VLLMServerBackend

        return VLLMServerBackend(
            rollout.vllm_urls,
            rollout.vllm_served_model,
            rollout.vllm_max_concurrency,
            rollout.vllm_timeout_s,
            restart_wait_s=rollout.vllm_restart_wait_s,
            ignore_eos=rollout.ignore_eos,
        )
    if rollout.backend == "vllm-engine":
        from lexrl.rollout.vllm_engine import VLLMEngineBackend

        return VLLMEngineBackend(base_path, config)
    return HFBackend(
        policy,
        tokenizer,
        rollout.max_batch_size,
        rollout.batch_wait_ms,
        rollout.deterministic,
        ignore_eos=rollout.ignore_eos,
    )


def make_chat_backend(config: Config) -> OpenAIChatBackend:
    """The `openai` backend: `model.name_or_path` served at `rollout.base_url`."""
    from lexrl.rollout.openai_chat import ChatEndpoint, OpenAIChatBackend

    rollout = config.rollout
    return OpenAIChatBackend(
        ChatEndpoint(
            base_url=rollout.base_url,
            model=config.model.name_or_path,
            api_key_env=rollout.api_key_env,
            concurrency=rollout.chat_concurrency,
            timeout_s=rollout.chat_timeout_s,
            max_retries=rollout.chat_max_retries,
            token_ids=rollout.chat_token_ids,
            cache_dir=rollout.chat_cache_dir,
        )
    )
