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

A replica still unreachable after them (killed, restarting, a 5xx) is taken out of the rotation
and one thread per replica polls its `/health` for up to `restart_wait_s`; once it answers, that
thread loads the adapter being sampled from onto it (a restarted server holds only the base) and
puts it back, and the failed requests are sent again. The other replicas take the requests
meanwhile; with none left, requests wait. A request answered 404 for the adapter's name means the
same: the server restarted between two requests. `restart_wait_s = 0` fails at once instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai

from lexrl.errors import ConfigError, EndpointError
from lexrl.generation import Completion, Sampling
from lexrl.secrets import check_url

# `/health` polls while a replica is down: soon after it comes back, without hammering it.
HEALTH_POLL_S = 0.5
MAX_HEALTH_POLL_S = 5.0
# How often a long wait says it is still waiting.
WAIT_REPORT_S = 60.0


class _Unreachable(EndpointError):
    """A replica that did not answer, or answered 5xx, after the client's retries: it may be
    restarting, so the request is worth sending again once it is back."""


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
        restart_wait_s: float = 600.0,
        ignore_eos: bool = False,
    ):
        if not base_urls:
            raise ConfigError("vllm-server needs at least one URL (`rollout.vllm_urls`)")
        for index, url in enumerate(base_urls):
            # httpx sends a URL's `user:password@` as Basic auth; lexrl's servers take no key.
            check_url(url, f"`rollout.vllm_urls[{index}]`")
        self.base_urls = [url.rstrip("/") for url in base_urls]
        self.served_model = served_model
        self.max_retries = max_retries
        self.keep_adapters = keep_adapters
        self.restart_wait_s = restart_wait_s
        self.ignore_eos = ignore_eos
        """Every completion runs to `max_new_tokens` past end-of-sequence (`rollout.ignore_eos`,
        vLLM's `ignore_eos` request field)."""
        self.adapter_version = 0
        self.model_name = served_model
        # Where the adapter sampled from is saved: what a restarted replica is given again.
        self.adapter_dir: Path | None = None
        self.loaded: list[str] = []
        self.requests_sent = [0] * len(self.base_urls)
        self._in_flight = [0] * len(self.base_urls)
        self._lock = threading.Lock()
        # Replica state, under `_lock`: `_live` is False while a replica is down (its reviver
        # thread waits for it); `_given_up` holds the error once that wait ran out; `_revivals`
        # counts its returns, so that a failure of a request sent before the last one, which
        # says nothing about the replica now, does not take it down again.
        self._live = [True] * len(self.base_urls)
        self._given_up: list[str | None] = [None] * len(self.base_urls)
        self._revivals = [0] * len(self.base_urls)
        self._replica_changed = threading.Condition(self._lock)
        self._closed = threading.Event()
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

    def _acquire_replica(self) -> tuple[int, int, int, str]:
        """The live replica with the fewest requests in flight, its revival count, and the adapter
        version and model name to ask it for; waits while every replica is down. Raises
        EndpointError once no replica can come back."""
        with self._replica_changed:
            while True:
                live = [i for i, up in enumerate(self._live) if up]
                if live:
                    replica = min(live, key=lambda i: self._in_flight[i])
                    self._in_flight[replica] += 1
                    self.requests_sent[replica] += 1
                    return (
                        replica,
                        self._revivals[replica],
                        self.adapter_version,
                        self.model_name,
                    )
                if all(self._given_up):
                    raise EndpointError("; ".join(self._given_up))
                self._replica_changed.wait()

    def _post(self, replica: int, route: str, payload: dict) -> httpx.Response:
        """POST `payload` to `<url>/v1<route>` through the replica's openai client; the 2xx reply.

        A 4xx status raises openai.APIStatusError, whose `.response` callers read (an adapter
        already loaded is a 400); a transport failure or a 5xx left after the client's retries
        raises _Unreachable."""
        url = f"{self.base_urls[replica]}/v1{route}"
        attempts = self.max_retries + 1
        try:
            return self._clients[replica].post(route, cast_to=httpx.Response, body=payload)
        except openai.APIStatusError as error:
            if error.status_code < 500:
                raise
            raise _Unreachable(
                f"{url}: HTTP {error.status_code} after {attempts} attempts: "
                f"{error.response.text[:300]}"
            ) from None
        except openai.APIError as error:
            raise _Unreachable(
                f"{url}: {type(error).__name__} after {attempts} attempts: {error}"
            ) from None

    def _unload(self, replica: int, name: str) -> None:
        """Unload adapter `name`; failures are ignored: another process sharing the server, or a
        restarted server, may no longer hold it, and a server gone is found by the next request."""
        with contextlib.suppress(openai.APIStatusError, _Unreachable):
            self._post(replica, "/unload_lora_adapter", {"lora_name": name})

    def _load(self, replica: int, version: int, adapter_dir: Path, replace: bool) -> None:
        """Load the adapter of `version` from `adapter_dir` on `replica`. A name the server already
        holds is unloaded and loaded again if `replace`, else kept."""
        name = adapter_name(version)
        payload = {"lora_name": name, "lora_path": str(adapter_dir)}
        try:
            try:
                self._post(replica, "/load_lora_adapter", payload)
            except openai.APIStatusError as error:
                if error.response.status_code != 400 or "already" not in error.response.text:
                    raise
                if not replace:
                    # Loaded since the restart by another process sharing the server: same files.
                    return
                # A restarted trainer reuses version numbers the server still holds.
                self._unload(replica, name)
                self._post(replica, "/load_lora_adapter", payload)
        except openai.APIStatusError as error:
            raise EndpointError(
                f"{self.base_urls[replica]}/v1/load_lora_adapter ({adapter_dir}): HTTP "
                f"{error.response.status_code}: {error.response.text[:300]} (is the server "
                "started with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=1?)"
            ) from None

    def complete(self, prompt_ids: list[int], sampling: Sampling) -> Completion:
        """One blocking completion (what `generate` runs in the thread pool). A replica that
        fails it is waited for (`restart_wait_s`) and the request sent again, to whichever
        replica is live then, for the adapter sampled from then."""
        greedy = sampling.temperature <= 0
        payload = {
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
            "ignore_eos": self.ignore_eos,
        }
        first_failure = None
        while True:
            replica, revivals, version, model = self._acquire_replica()
            url = f"{self.base_urls[replica]}/v1/completions"
            try:
                reply = self._post(replica, "/completions", {**payload, "model": model})
            except _Unreachable as error:
                reason = str(error)
            except openai.APIStatusError as error:
                status, text = error.response.status_code, error.response.text
                if status != 404 or version == 0 or model not in text:
                    raise EndpointError(f"{url}: HTTP {status}: {text[:300]}") from None
                reason = f"{url}: the server does not hold {model!r} (restarted?)"
            else:
                ids, logprobs = parse_completion(reply.json()["choices"][0], url)
                return Completion(ids, logprobs, version)
            finally:
                with self._lock:
                    self._in_flight[replica] -= 1
            self._replica_failed(replica, revivals, reason)
            # Bounds a request that fails again and again on a server that looks healthy.
            first_failure = first_failure or time.monotonic()
            if time.monotonic() - first_failure > self.restart_wait_s:
                raise EndpointError(
                    f"{reason}; still failing {time.monotonic() - first_failure:.0f} s after the "
                    f"first failure (rollout.vllm_restart_wait_s = {self.restart_wait_s:g})"
                )

    def _replica_failed(self, replica: int, revivals: int, reason: str) -> None:
        """Take `replica` out of the rotation and start the one thread that waits for it, unless
        that is under way or the failure predates its last return. Raises EndpointError(reason)
        when there is no waiting (`restart_wait_s = 0`)."""
        if self.restart_wait_s <= 0:
            raise EndpointError(reason)
        with self._lock:
            if not self._live[replica] or self._revivals[replica] != revivals:
                return
            self._live[replica] = False
        threading.Thread(
            target=self._revive, args=(replica, reason), name=f"vllm-revive-{replica}", daemon=True
        ).start()

    def _revive(self, replica: int, reason: str) -> None:
        """Poll the replica's `/health` until it answers, load the adapter sampled from onto it
        and put it back in the rotation; after `restart_wait_s`, give up on it for good."""
        url = self.base_urls[replica]
        _say(f"{reason}; waiting up to {self.restart_wait_s:.0f} s for {url} to come back")
        started = time.monotonic()
        delay = HEALTH_POLL_S
        next_report = WAIT_REPORT_S
        while not self._closed.is_set():
            waited = time.monotonic() - started
            if waited > self.restart_wait_s:
                self._give_up(
                    replica,
                    f"{url}: not back after {waited:.0f} s (rollout.vllm_restart_wait_s = "
                    f"{self.restart_wait_s:g}); it went down with {reason}",
                )
                return
            if waited >= next_report:
                _say(f"{url}: still down after {waited:.0f} s of {self.restart_wait_s:.0f} s")
                next_report += WAIT_REPORT_S
            if self._healthy(url):
                try:
                    loaded = self._restore_adapter(replica)
                except _Unreachable:
                    loaded = None  # down again before the load: keep waiting
                except EndpointError as error:
                    self._give_up(replica, str(error))
                    return
                if loaded is not None:
                    _say(f"{url}: back after {time.monotonic() - started:.0f} s; {loaded}")
                    return
            self._closed.wait(delay)
            delay = min(2 * delay, MAX_HEALTH_POLL_S)
        self._give_up(replica, f"{url}: the backend was closed while waiting for it")

    def _restore_adapter(self, replica: int) -> str | None:
        """Load the adapter sampled from onto the replica and put it back in the rotation; what
        was loaded, or None if the version sampled from changed meanwhile (load that one next)."""
        with self._lock:
            version, folder = self.adapter_version, self.adapter_dir
        if version > 0:
            if folder is None:
                raise EndpointError(
                    f"{self.base_urls[replica]}: cannot give it adapter version {version} again: "
                    "its folder is unknown (use_adapter without adapter_dir)"
                )
            self._load(replica, version, folder, replace=False)
        with self._replica_changed:
            if self.adapter_version != version:
                return None
            self._live[replica] = True
            self._revivals[replica] += 1
            self._replica_changed.notify_all()
        if version == 0:
            return "sampling from the base (version 0), nothing to re-load"
        return f"re-loaded adapter {adapter_name(version)} ({folder})"

    def _give_up(self, replica: int, message: str) -> None:
        _say(message)
        with self._replica_changed:
            self._given_up[replica] = message
            self._replica_changed.notify_all()

    @staticmethod
    def _healthy(url: str) -> bool:
        try:
            return httpx.get(f"{url}/health", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    async def generate(self, prompt_ids: list[int], sampling: Sampling) -> Completion:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self.complete, prompt_ids, sampling)

    def load_adapter(self, adapter_dir: str | Path, version: int) -> None:
        """Load the adapter saved in `adapter_dir` on every live replica and sample from it next
        (a replica that is down gets it when it is back); unload names older than the last
        `keep_adapters`."""
        folder = Path(adapter_dir).resolve()
        with self._lock:
            replicas = [(i, self._revivals[i]) for i, up in enumerate(self._live) if up]
        for replica, revivals in replicas:
            try:
                self._load(replica, version, folder, replace=True)
            except _Unreachable as error:
                # Its reviver loads the version sampled from, this one after `use_adapter`.
                self._replica_failed(replica, revivals, str(error))
        self.loaded.append(adapter_name(version))
        self.use_adapter(version, folder)
        while len(self.loaded) > self.keep_adapters:
            old = self.loaded.pop(0)
            with self._lock:
                live = [i for i, up in enumerate(self._live) if up]
            for replica in live:
                self._unload(replica, old)

    def use_adapter(self, version: int, adapter_dir: str | Path | None = None) -> None:
        """Sample from the adapter of `version` (loaded by this or another process), saved in
        `adapter_dir`: what a restarted replica is given again."""
        with self._lock:
            self.adapter_version = version
            self.model_name = adapter_name(version) if version > 0 else self.served_model
            self.adapter_dir = Path(adapter_dir).resolve() if adapter_dir is not None else None

    def release_memory(self) -> None:
        """The server runs on its own GPUs: nothing to give back during the update."""

    def resume(self) -> None:
        """See `release_memory`."""

    def close(self) -> None:
        self._closed.set()
        self._pool.shutdown(wait=False)
        for client in self._clients:
            client.close()


def _say(message: str) -> None:
    """One line on stderr, where the trainer's step lines go."""
    print(f"vllm-server: {message}", file=sys.stderr, flush=True)
