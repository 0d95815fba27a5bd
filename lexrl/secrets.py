"""API keys: read from environment variables only, and masked in every failure message lexrl
stores or logs.

A config names the variable holding a key (`api_key_env`), never the key (`lexrl.config.validate`
refuses a config that carries credentials). `resolve_api_key` is the one place keys are read; it
remembers the variable, so that `scrub` can mask the values of every variable read so far, and
of WANDB_API_KEY, in any text: a server may echo the Authorization header into its error body,
which the `openai` client puts into the exception's message. `scrub` also masks what a URL
carries in any text (`user:password@`, key-like query parameters), whatever its scheme's case:
an httpx or openai error may quote the URL it was given; and any string shaped like a key
(`KEY_SHAPES`), for a key read from a variable lexrl never saw named.
"""

from __future__ import annotations

import ipaddress
import os
import re
import stat
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lexrl.errors import ConfigError

MASK = "***"
_secret_variables: set[str] = {"WANDB_API_KEY"}


CREDENTIAL_PARAMETERS = (
    "key",
    "api_key",
    "apikey",
    "token",
    "access_token",
    "auth",
    "secret",
    "client_secret",
    "password",
    "passwd",
    "pwd",
    "sig",
    "signature",
)
"""Query parameters that carry a credential, compared lower-cased with `-` read as `_`. So does
any parameter whose name ends in one of `CREDENTIAL_ENDINGS` (`x-api-key`, `subscription-key`,
`X-Amz-Signature`, `refresh_token`): `scrub` masks their values, `check_url` refuses them."""
CREDENTIAL_ENDINGS = ("key", "token", "secret", "password", "signature", "credential")

URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://(?:[^\s'\"<>`]*[^\s'\"<>`:,.;!?)\]}])?")
"""A URL in free text, of any scheme in any case (`HTTP://` reaches httpx as `http://` does);
it ends before whitespace, a quote, or the punctuation that closes a sentence or a clause."""
_USERINFO = re.compile(r"^([^:]*://)[^/?#]*@")
_PARAMETER = re.compile(r"([?&;#])([^=&#?;\s'\"<>`]+)=([^&#;\s'\"<>`]*)")


def is_credential_parameter(name: str) -> bool:
    """Whether a URL query parameter of this name carries a credential (`CREDENTIAL_PARAMETERS`)."""
    name = name.lower().replace("-", "_")
    return name in CREDENTIAL_PARAMETERS or name.endswith(CREDENTIAL_ENDINGS)


CREDENTIAL_NAMES = (
    "api_key",
    "apikey",
    "access_key",
    "secret_key",
    "private_key",
    "token",
    "secret",
    "password",
    "passwd",
    "credential",
    "credentials",
)
"""An option whose name ends in one of these holds a credential (`is_credential_name`)."""
_TOKENIZER_TOKEN = re.compile(r"(bos|eos|pad|unk|sep|cls|mask|stop)_token")
"""Names a tokenizer's special token (`eos_token: </s>`), a string of the vocabulary, no key."""

KEY_SHAPES = re.compile(
    r"(?<![A-Za-z0-9_])(?:"
    r"sk-[A-Za-z0-9_\-]{20,}"
    r"|hf_[A-Za-z0-9]{30,}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"
    r"|AKIA[0-9A-Z]{16}(?![0-9A-Za-z])"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"
    r")"
)
"""A key by its shape, whatever option or text holds it: OpenAI's and the providers copying it
(`sk-...`, `sk-proj-...`, Anthropic's `sk-ant-...`), Hugging Face (`hf_...`), GitHub
(`ghp_...`, `github_pat_...`), Slack (`xoxb-...`), an AWS access key id (`AKIA...`) and a JWT
(`eyJ...header.eyJ...payload.signature`). Not preceded by a letter, digit or `_`, so a word
that merely contains `sk-` (`risk-adjusted`) is none."""


def is_credential_name(name: str) -> bool:
    """Whether an option called `name` would hold a credential: the last part of its dotted key,
    lower-cased (`-` read as `_`, a list index dropped), ends in one of `CREDENTIAL_NAMES`
    (`env.api_key`, `hf_token`, `db_password`). Not a name ending in `_env`, which names the
    environment variable holding the key (`api_key_env`), nor a tokenizer's special token
    (`eos_token`); `max_new_tokens` ends in `tokens`, so it is none either."""
    last = re.sub(r"\[\d+\]$", "", name).rsplit(".", 1)[-1].lower().replace("-", "_")
    if last.endswith("_env") or _TOKENIZER_TOKEN.fullmatch(last):
        return False
    return last.endswith(CREDENTIAL_NAMES)


def looks_like_key(text: str) -> bool:
    """Whether `text` holds a string shaped like an API key or token (`KEY_SHAPES`)."""
    return KEY_SHAPES.search(text) is not None


def _parameters(url: str) -> list[str]:
    """The parameter names of the query and of the fragment (`#key=...` travels in logs and
    provenance as a query does)."""
    base, _, fragment = url.partition("#")
    query = base.partition("?")[2]
    return [part.partition("=")[0] for part in re.split("[&;]", f"{query}&{fragment}") if part]


def check_url(url: str, where: str, query_allowed: bool = False) -> None:
    """Refuse (ConfigError naming `where`, never the value) a URL that carries credentials: a
    `user:password@` in any scheme's case, or a key-like query parameter; and, unless
    `query_allowed`, any query string or fragment, where keys travel too, and a scheme other
    than http or https (an endpoint's client speaks nothing else). A URL without `scheme://` is
    read as starting with its host."""
    hint = "put the key in an environment variable and name it in `api_key_env`"
    scheme, separator, rest = url.strip().partition("://")
    if not separator:
        rest = url.strip()
    if "@" in re.split("[/?#]", rest, maxsplit=1)[0]:
        raise ConfigError(f"{where} carries credentials (`user:password@`): {hint}")
    names = _parameters(rest)
    keys = [name for name in names if is_credential_parameter(name)]
    if keys:
        # Only a listed name is shown: another one could be a key written without `=`.
        listed = [n for n in keys if n.lower().replace("-", "_") in CREDENTIAL_PARAMETERS]
        shown = f" (`{listed[0]}=`)" if listed else ""
        raise ConfigError(f"{where} has a credential in its query or fragment{shown}: {hint}")
    if query_allowed:
        return
    if "?" in rest or "#" in rest:
        part = "a query string" if "?" in rest else "a fragment (`#...`)"
        raise ConfigError(f"{where} has {part}, where keys travel: {hint}")
    if separator and scheme.lower() not in ("http", "https"):
        raise ConfigError(
            f"{where} has the scheme `{scheme.split('/')[-1][:20]}://`, which no endpoint client "
            "here speaks: give an http:// or https:// address"
        )


VERSION_PREFIX = "/v1"
"""The path prefix of the OpenAI-compatible API (vLLM, llama.cpp, OpenAI itself)."""


def api_base_url(url: str) -> str:
    """An OpenAI-compatible base URL as the `openai` client takes it: a bare server address
    (`http://host:8000`, with or without a trailing `/`) gets `/v1`; a URL with any path is kept,
    because providers put their API elsewhere (`.../compatible-mode/v1`, `.../v1beta/openai`).
    Not a `scheme://` URL (`builtin:reference-overlap`, empty): kept as is."""
    stripped = url.strip()
    if "://" not in stripped or urlsplit(stripped).path.strip("/"):
        return url
    return stripped.rstrip("/") + VERSION_PREFIX


def server_root_url(url: str) -> str:
    """A vLLM server's address without the API prefix, as `rollout.vllm_urls` holds it (the
    backend adds `/v1` per route and polls `/health` at the root): a trailing `/v1` is dropped."""
    stripped = url.strip().rstrip("/")
    return stripped.removesuffix(VERSION_PREFIX) if "://" in stripped else url


def is_loopback(url: str) -> bool:
    """Whether the URL's host is this machine (`localhost`, 127.0.0.0/8, `::1`)."""
    try:
        host = urlsplit(url.strip()).hostname or ""
    except ValueError:  # a malformed IPv6 literal
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def scrub_urls(text: str) -> str:
    """`text` with the `user:password@` of every URL and the value of every key-like query
    parameter (`is_credential_parameter`) replaced by `***`."""
    return URL.sub(lambda match: _masked_url(match.group()), text)


def _masked_url(url: str) -> str:
    def mask(match: re.Match) -> str:
        separator, name, value = match.groups()
        masked = MASK if value and is_credential_parameter(name) else value
        return f"{separator}{name}={masked}"

    return _PARAMETER.sub(mask, _USERINFO.sub(rf"\1{MASK}@", url))


def remember(api_key_env: str) -> None:
    """Mask the value of the environment variable `api_key_env` from now on (`scrub`). The
    config names its key variables when it is validated, before any client reads them."""
    if api_key_env:
        _secret_variables.add(api_key_env)


def resolve_api_key(
    api_key_env: str, model: str, required: bool = True, base_url: str = "", flag: str = ""
) -> str:
    """The key in the environment variable `api_key_env`; `EMPTY` when no variable is named (or,
    with `required=False`, when it is unset). A named but unset variable is a one-line error,
    naming `flag` (the option that skips the key) when given; except for a `base_url` on this
    machine (`is_loopback`), which gets `EMPTY` and a note on stderr: a paper's config names
    OpenAI's key, and a local server needs none, so pointing it at one must not need a fake key."""
    remember(api_key_env)
    key = os.environ.get(api_key_env, "") if api_key_env else ""
    if key:
        return _header_safe(key, api_key_env, model)
    if api_key_env and required and base_url and is_loopback(base_url):
        print(
            f"note: {api_key_env} ({flag or 'api_key_env'}) is not set; {scrub_urls(base_url)} "
            "is on this machine, so no key is sent",
            file=sys.stderr,
        )
    elif api_key_env and required:
        skip = f'pass `{flag} ""`' if flag else 'set that `api_key_env` to ""'
        raise ConfigError(
            f"{model}: environment variable {api_key_env} (api_key_env) is not set; set it, or "
            f"{skip} for a server without authentication"
        )
    # The openai client refuses an empty key; servers without authentication ignore this one.
    return "EMPTY"


def _header_safe(key: str, api_key_env: str, model: str) -> str:
    """`key`, unless an HTTP header cannot carry it: a key pasted with its newline, a space or a
    non-ASCII character otherwise fails every call as a bare "Connection error"."""
    if key.isascii() and key.isprintable() and not any(c.isspace() for c in key):
        return key
    raise ConfigError(
        f"{model}: environment variable {api_key_env} (api_key_env) holds a space, a newline, a "
        "control or a non-ASCII character, which no HTTP header carries: set it to the key alone"
    )


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of each non-empty secret replaced by `***`. Longer secrets
    are matched first, so one that contains another is masked whole. A secret containing `*`
    could reappear from the masks themselves; API keys never contain one."""
    ordered = sorted({s for s in secrets if s}, key=len, reverse=True)
    if not ordered:
        return text
    return re.sub("|".join(map(re.escape, ordered)), MASK, text)


def scrub(text: str) -> str:
    """`text` with the current values of WANDB_API_KEY and of every variable `resolve_api_key`
    has read masked, and the credentials of every URL in it (`scrub_urls`); then, for a key from
    a variable lexrl never named (a plugin's own), every string shaped like one (`KEY_SHAPES`)."""
    values = (os.environ.get(name, "") for name in tuple(_secret_variables))
    return KEY_SHAPES.sub(MASK, scrub_urls(redact(text, values)))


def scrub_tree(value: Any) -> Any:
    """`value` (JSON-like: dicts, lists, strings, numbers) with `scrub` applied to every string,
    keys included; for the W&B tables and anything else handed over as structures."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub_tree(k): scrub_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_tree(v) for v in value]
    return value


def write_text(path: str | Path, text: str, append: bool = False) -> None:
    """Write (or append) `text` to `path` in UTF-8 with every key masked: the one writer of
    every file lexrl produces from model, judge or server text (samples, metrics, evaluation
    files, caches).

    A failed write (a full disk, a file-size limit) frees what it wrote and raises an OSError
    naming `path`: an append is cut back to the file's earlier length, so the file never ends
    in a torn record, and a new file is written beside `path` and renamed into place, so an
    earlier version stays whole and no half-written file is left."""
    path = Path(path)
    data = scrub(text).encode("utf-8")
    try:
        if append or (path.exists() and not path.is_file()):
            _append(path, data)
        else:
            _replace(path, data)
    except OSError as error:
        if error.filename is None:
            raise OSError(error.errno, error.strerror, str(path)) from error
        raise


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def _append(path: Path, data: bytes) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        # A pipe or a terminal (`--out /dev/stdout`) has no length to cut back to.
        regular = stat.S_ISREG(os.fstat(descriptor).st_mode)
        start = os.lseek(descriptor, 0, os.SEEK_END) if regular else 0
        try:
            _write_all(descriptor, data)
        except OSError:
            if regular:
                os.ftruncate(descriptor, start)
            raise
    finally:
        os.close(descriptor)


def _replace(path: Path, data: bytes) -> None:
    staging = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    try:
        descriptor = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            _write_all(descriptor, data)
        finally:
            os.close(descriptor)
        os.replace(staging, path)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise
