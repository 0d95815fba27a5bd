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

Transport retries (connection errors, timeouts, 408/409/429/5xx, exponential backoff from 0.5 s,
Retry-After honoured) are the `openai` client's, one per replica, as for the LLM judges and the
retrieval endpoints: these routes are not OpenAI's, so they go through its low-level `post`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai

from lexrl.retrieval.endpoints import EndpointError
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
        # One pool of `max_concurrency` connections per replica, for as many worker threads.
        limits = httpx.Limits(
            max_connections=max_concurrency, max_keepalive_connections=max_concurrency
        )
        self._clients = [
            openai.OpenAI(
                base_url=f"{url}/v1",
                # The openai client refuses an empty key; `lexrl serve` asks for none.
                api_key="EMPTY",
                timeout=timeout_s,
                max_retries=max_retries,
                http_client=httpx.Client(timeout=timeout_s, limits=limits),
            )
            for url in self.base_urls
        ]
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="vllm")

    def _pick_replica(self) -> int:
        with self._lock:
            replica = min(range(len(self.base_urls)), key=lambda i: self._in_flight[i])
            self._in_flight[replica] += 1
            self.requests_sent[replica] += 1
        return replica

    def _post(self, replica: int, route: str, payload: dict) -> httpx.Response:
        """POST `payload` to `<url>/v1<route>` through the replica's openai client; the 2xx reply.

        A non-2xx status left after the client's retries raises openai.APIStatusError, whose
        `.response` callers read (an adapter already loaded is a 400); a transport failure left
        after them raises EndpointError."""
        try:
            return self._clients[replica].post(route, cast_to=httpx.Response, body=payload)
        except openai.APIStatusError:
            raise
        except openai.APIError as error:
            raise EndpointError(
                f"{self.base_urls[replica]}/v1{route}: {type(error).__name__} after "
                f"{self.max_retries + 1} attempts: {error}"
            ) from None

    def _unload(self, replica: int, name: str) -> None:
        """Unload adapter `name`; a status error is ignored (another process sharing the server,
        or a restarted server, may no longer hold it)."""
        with contextlib.suppress(openai.APIStatusError):
            self._post(replica, "/unload_lora_adapter", {"lora_name": name})

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
            reply = self._post(replica, "/completions", payload)
        except openai.APIStatusError as error:
            status, text = error.response.status_code, error.response.text
            raise EndpointError(f"{url}: HTTP {status}: {text[:300]}") from None
        finally:
            with self._lock:
                self._in_flight[replica] -= 1
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
        for replica, base in enumerate(self.base_urls):
            try:
                try:
                    self._post(replica, "/load_lora_adapter", payload)
                except openai.APIStatusError as error:
                    if error.response.status_code != 400 or "already" not in error.response.text:
                        raise
                    # A restarted trainer reuses version numbers the server still holds.
                    self._unload(replica, name)
                    self._post(replica, "/load_lora_adapter", payload)
            except openai.APIStatusError as error:
                raise EndpointError(
                    f"{base}/v1/load_lora_adapter ({adapter_dir}): HTTP "
                    f"{error.response.status_code}: {error.response.text[:300]} (is the server "
                    "started with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=1?)"
                ) from None
        self.loaded.append(name)
        self.use_adapter(version)
        while len(self.loaded) > self.keep_adapters:
            old = self.loaded.pop(0)
            for replica in range(len(self.base_urls)):
                self._unload(replica, old)

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
        for client in self._clients:
            client.close()
