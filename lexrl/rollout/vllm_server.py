"""The `vllm-server` backend: rollouts from one or more vLLM OpenAI-compatible servers.

Prompts go out as token ids on `/v1/completions`, and `logprobs` + `return_tokens_as_token_ids`
bring back the sampler's exact completion ids and their log-probs, so a Turn records what was
sampled, token for token. The server must report log-probs of the distribution it sampled from:
`lexrl serve` starts it with `--logprobs-mode processed_logprobs` (after temperature) and
`--generation-config vllm` (no hidden top-k / top-p from the model's generation_config); each
request also spells out top_k, top_p, min_p and repetition_penalty so the distribution is exactly
softmax(logits / T), the one the trainer recomputes.

After each optimizer step the trainer saves the adapter and `load_adapter` hot-loads it on every
replica with `/v1/load_lora_adapter` under a new name (`lexrl-v<version>`, the server started
with `--enable-lora` and VLLM_ALLOW_RUNTIME_LORA_UPDATING=1); older names are unloaded. Version 0
is the untrained adapter (LoRA's B = 0), i.e. the served base itself.

Several URLs are replicas: each request goes to the one with the fewest requests in flight.
HTTP calls run in a thread pool of `max_concurrency` workers, so any event loop can await them.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from lexrl.retrieval.endpoints import EndpointError, post_with_retries
from lexrl.rollout.backend import Completion, Sampling


def adapter_name(version: int) -> str:
    return f"lexrl-v{version}"


def parse_completion(choice: dict, url: str) -> tuple[list[int], list[float]]:
    """Completion ids and log-probs from a `/v1/completions` choice with token-id tokens."""
    try:
        logprobs = choice["logprobs"]
        ids = [int(token.removeprefix("token_id:")) for token in logprobs["tokens"]]
        values = [float(v) for v in logprobs["token_logprobs"]]
    except (KeyError, TypeError, ValueError) as error:
        raise EndpointError(
            f"{url}: the reply lacks token-id logprobs ({error!r}); is "
            "`return_tokens_as_token_ids` supported by this server?"
        ) from None
    if len(ids) != len(values):
        raise EndpointError(f"{url}: {len(ids)} tokens but {len(values)} log-probs")
    return ids, values


class VLLMServerBackend:
    needs_adapter_files = True
    shared_by_processes = True

    def __init__(
        self,
        base_urls: list[str],
        served_model: str = "base",
        max_concurrency: int = 64,
        timeout_s: float = 600.0,
        max_retries: int = 3,
        keep_adapters: int = 2,
    ):
        if not base_urls:
            raise ValueError("vllm-server needs at least one URL (`rollout.vllm_urls`)")
        self.base_urls = [url.rstrip("/") for url in base_urls]
        self.served_model = served_model
        self.max_retries = max_retries
        self.keep_adapters = keep_adapters
        self.adapter_version = 0
        self.model_name = served_model
        self.loaded: list[str] = []
        self.requests_sent = [0] * len(self.base_urls)
        self._in_flight = [0] * len(self.base_urls)
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=timeout_s)
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="vllm")

    def _pick_replica(self) -> int:
        with self._lock:
            replica = min(range(len(self.base_urls)), key=lambda i: self._in_flight[i])
            self._in_flight[replica] += 1
            self.requests_sent[replica] += 1
        return replica

    def _post(self, url: str, payload: dict) -> httpx.Response:
        return post_with_retries(self._client, url, payload, self.max_retries, backoff_s=0.5)

    def complete(self, prompt_ids: list[int], sampling: Sampling) -> Completion:
        """One blocking completion (what `generate` runs in the thread pool)."""
        version, model = self.adapter_version, self.model_name
        greedy = sampling.temperature <= 0
        payload = {
            "model": model,
            "prompt": list(prompt_ids),
            "max_tokens": sampling.max_new_tokens,
            "temperature": 0.0 if greedy else sampling.temperature,
            "top_p": 1.0,
            "top_k": -1,
            "min_p": 0.0,
            "repetition_penalty": 1.0,
            "logprobs": 0,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
        }
        replica = self._pick_replica()
        url = f"{self.base_urls[replica]}/v1/completions"
        try:
            reply = self._post(url, payload)
        finally:
            with self._lock:
                self._in_flight[replica] -= 1
        if reply.status_code != 200:
            raise EndpointError(f"{url}: HTTP {reply.status_code}: {reply.text[:300]}")
        ids, logprobs = parse_completion(reply.json()["choices"][0], url)
        return Completion(ids, logprobs, version)

    async def generate(self, prompt_ids: list[int], sampling: Sampling) -> Completion:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self.complete, prompt_ids, sampling)

    def load_adapter(self, adapter_dir: str | Path, version: int) -> None:
        """Load the adapter saved in `adapter_dir` on every replica and sample from it next;
        unload names older than the last `keep_adapters`."""
        name = adapter_name(version)
        payload = {"lora_name": name, "lora_path": str(Path(adapter_dir).resolve())}
        for base in self.base_urls:
            reply = self._post(f"{base}/v1/load_lora_adapter", payload)
            if reply.status_code == 400 and "already" in reply.text:
                # A restarted trainer reuses version numbers the server still holds.
                self._post(f"{base}/v1/unload_lora_adapter", {"lora_name": name})
                reply = self._post(f"{base}/v1/load_lora_adapter", payload)
            if reply.status_code != 200:
                raise EndpointError(
                    f"{base}/v1/load_lora_adapter ({adapter_dir}): HTTP {reply.status_code}: "
                    f"{reply.text[:300]} (is the server started with --enable-lora and "
                    "VLLM_ALLOW_RUNTIME_LORA_UPDATING=1?)"
                )
        self.loaded.append(name)
        self.use_adapter(version)
        while len(self.loaded) > self.keep_adapters:
            old = self.loaded.pop(0)
            for base in self.base_urls:
                self._post(f"{base}/v1/unload_lora_adapter", {"lora_name": old})

    def use_adapter(self, version: int) -> None:
        """Sample from the adapter of `version` (loaded by this or another process)."""
        self.adapter_version = version
        self.model_name = adapter_name(version) if version > 0 else self.served_model

    def release_memory(self) -> None:
        """The server runs on its own GPUs: nothing to give back during the update."""

    def resume(self) -> None:
        """See `release_memory`."""

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._client.close()
