"""Credentials in URLs: refused in every URL field of a config whatever the case of the scheme,
refused by the backends built without a config, and masked in any text lexrl stores or prints
(an httpx or openai error quoting the URL it was given)."""

import dataclasses
import typing
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from lexrl.cli import main
from lexrl.config import _URL_FIELD, Config, ConfigError, load_config
from lexrl.registry import discover_envs
from lexrl.secrets import (
    MASK,
    api_base_url,
    check_url,
    is_credential_parameter,
    scrub,
    server_root_url,
)

KEY = "sk-lexrl-canary-5f3a9c1e7b2d4680"
DEMO = str(Path(__file__).parents[1] / "configs" / "demo_cpu.yaml")

CORE_URL_FIELDS = ["rollout.base_url", "rollout.vllm_urls[0]"]
ENV_URL_FIELDS = {
    "statute": [
        "env.retrieval.dense_endpoint",
        "env.retrieval.reranker_endpoint",
        "env.eval.final_reranker.base_url",
    ],
    "lexam": ["env.judges[0].base_url"],
    "argument": ["env.judges[0].base_url"],
    "debate": ["env.judges[0].base_url", "env.rubric_judges[0].base_url"],
}
"""The URL fields of each env's options, set beside `env.type: NAME`."""

URL_FIELDS = [
    *[pytest.param(None, field, id=field) for field in CORE_URL_FIELDS],
    *[
        pytest.param(env, field, id=f"{env}:{field}")
        for env, fields in ENV_URL_FIELDS.items()
        for field in fields
    ],
    # A mixture member's are named by their place in `env.members`.
    pytest.param("mix", "env.members[0].env.judges[0].base_url", id="mix:lexam judge"),
    pytest.param("mix", "env.members[0].env.retrieval.dense_endpoint", id="mix:statute dense"),
]

BAD_URLS = {
    "upper_scheme_key_query": (f"HTTP://host:8000/v1?key={KEY}", "or fragment (`key=`)"),
    "mixed_scheme_api_key": (f"Https://host/v1?API_KEY={KEY}", "or fragment (`API_KEY=`)"),
    "header_like_parameter": (f"http://host/v1?x-api-key={KEY}", "a credential in its query"),
    "key_in_fragment": (f"http://127.0.0.1:8000/v1#key={KEY}", "or fragment (`key=`)"),
    "other_fragment": ("http://host/v1#top", "has a fragment (`#...`), where keys travel"),
    "unix_socket": ("unix:///tmp/vllm.sock", "has the scheme `unix://`, which no endpoint"),
    "ftp": ("ftp://host/v1", "has the scheme `ftp://`, which no endpoint"),
    "upper_scheme_userinfo": (f"HTTP://user:{KEY}@host:8000/v1", "carries credentials"),
    "password_only": (f"https://:{KEY}@host/v1", "carries credentials"),
    "no_scheme_userinfo": (f"user:{KEY}@host:8000/v1", "carries credentials"),
    "padded_userinfo": (f"  hTTp://u:{KEY}@host/v1", "carries credentials"),
    "other_query": ("http://host/v1?verbose=1", "has a query string, where keys travel"),
}


def _url_fields(cls: type, prefix: str = "") -> list[str]:
    """Every string option (or list of them) named like a URL, `[0]` standing for a list's
    elements, below `cls`."""
    found, hints = [], typing.get_type_hints(cls)
    for item in dataclasses.fields(cls):
        hint, name = hints[item.name], f"{prefix}{item.name}"
        inner = typing.get_args(hint)[0] if typing.get_origin(hint) is list else hint
        name += "[0]" if inner is not hint else ""
        if dataclasses.is_dataclass(inner):
            found += _url_fields(inner, f"{name}.")
        elif inner is str and any(word in item.name for word in ("url", "endpoint")):
            found.append(name)
    return found


def test_every_url_field_of_the_config_is_checked():
    assert sorted(_url_fields(Config)) == sorted(CORE_URL_FIELDS)
    for name, cls in discover_envs().items():
        assert sorted(_url_fields(cls, "env.")) == sorted(ENV_URL_FIELDS.get(name, [])), name
    fields = [*CORE_URL_FIELDS, *(f for fs in ENV_URL_FIELDS.values() for f in fs)]
    assert all(_URL_FIELD.search(field) for field in fields)


def _nested(dotted: str, value: object) -> dict:
    """The YAML mapping setting `dotted` (`a.b[0].c`) to `value`; a judge gets a model name."""
    head, _, rest = dotted.partition(".")
    if head.endswith("[0]"):
        head = head.removesuffix("[0]")
        element = {**_nested(rest, value), "model": "m"} if rest else value
        return {head: [element]}
    return {head: _nested(rest, value) if rest else value}


def _config_setting(env: str | None, field: str, value: object) -> dict:
    """The YAML mapping setting `field` to `value` under `env.type: env`; a mixture's one
    member is the lexam env for a judge's field, else the statute env."""
    data = _nested(field, value)
    if env == "mix":
        member = data["env"]["members"][0]
        member.pop("model")  # `_nested` names the list's elements judges
        member["env"]["type"] = "lexam" if ".judges[" in field else "statute"
    if env is not None:
        data["env"]["type"] = env
    return data


@pytest.mark.parametrize(("env", "field"), URL_FIELDS)
@pytest.mark.parametrize("case", list(BAD_URLS))
def test_a_url_with_credentials_is_refused_naming_the_field_not_the_key(tmp_path, env, field, case):
    url, said = BAD_URLS[case]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(_config_setting(env, field, url)))
    with pytest.raises(ConfigError) as error:
        load_config(path)
    message = str(error.value)
    assert message.startswith(f"`{field}` ") and said in message, message
    assert KEY not in message


def test_the_command_line_refuses_it_with_exit_2_and_no_key(capsys):
    url = f"HTTP://host:8000/v1?key={KEY}"
    with pytest.raises(SystemExit) as stop:
        main(["eval", DEMO, "--rollout.backend", "openai", "--rollout.base_url", url])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("config error: `rollout.base_url` has a credential in its query")
    assert KEY not in err


@pytest.mark.parametrize(
    "value",
    [
        f"see HTTP://u:{KEY}@mirror.test/data.jsonl",
        f"s3://bucket/x?X-Amz-Signature={KEY}",
        f"wss://host/ws?token={KEY}",
    ],
)
def test_a_url_with_credentials_in_any_other_field_is_refused(value):
    with pytest.raises(ConfigError) as error:
        load_config(None, ["--env.type", "lexam", "--env.source", value])
    assert str(error.value).startswith("`env.source` ") and KEY not in str(error.value)


def test_a_query_without_credentials_is_left_to_fields_that_are_no_endpoint():
    config = load_config(
        None, ["--env.type", "lexam", "--env.source", "https://host/data.jsonl?download=1"]
    )
    assert config.env.source.endswith("?download=1")


def test_the_backends_refuse_a_url_with_credentials_without_a_config():
    from lexrl.rollout.openai_chat import ChatEndpoint, OpenAIChatBackend
    from lexrl.rollout.vllm_server import VLLMServerBackend

    with pytest.raises(ConfigError, match="`rollout.base_url` carries credentials"):
        OpenAIChatBackend(ChatEndpoint(base_url=f"HTTP://user:{KEY}@host/v1", model="m"))
    with pytest.raises(
        ConfigError, match=r"`rollout.vllm_urls\[1\]` has a credential in its query"
    ):
        VLLMServerBackend(["http://a:8000", f"HTTP://b:8000?token={KEY}"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            f"policy HTTP://host/v1?key={KEY}: APIConnectionError: Connection error.",
            f"policy HTTP://host/v1?key={MASK}: APIConnectionError: Connection error.",
        ),
        (
            f"Client error '401 Unauthorized' for url 'Https://user:{KEY}@host/v1/chat?a=1'",
            f"Client error '401 Unauthorized' for url 'Https://{MASK}@host/v1/chat?a=1'",
        ),
        (
            f"(ws://h/x?Access_Token={KEY}&page=2&X-Amz-Signature={KEY}#top).",
            f"(ws://h/x?Access_Token={MASK}&page=2&X-Amz-Signature={MASK}#top).",
        ),
        (f"to http://u:p@ss:{KEY}@h:1/v1", f"to http://{MASK}@h:1/v1"),
        ("http://host/v1?page=2 and text?token=x", "http://host/v1?page=2 and text?token=x"),
    ],
)
def test_scrub_masks_the_credentials_of_urls_in_free_text(text, expected):
    assert scrub(text) == expected


SCHEMES = st.sampled_from(["http", "HTTP", "Https", "hTTps", "ws", "S3", "git+ssh"])
SECRETS = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_~", min_size=8)
PARAMETERS = st.sampled_from(["key", "API_KEY", "apiKey", "token", "sig", "x-api-key", "Password"])


def _refusal(url: str) -> str:
    with pytest.raises(ConfigError) as error:
        check_url(url, "`field`")
    return str(error.value)


# The secret is drawn from the characters of words like "credential", so asserting only that it
# does not appear would fail on a secret the fixed wording happens to contain. The property is
# stronger anyway: what is shown does not depend on the secret at all.
@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(SCHEMES, SECRETS, PARAMETERS, st.booleans(), st.sampled_from(["", ".", ": refused", ")"]))
def test_scrub_leaves_no_url_credential_in_any_text(scheme, secret, parameter, userinfo, tail):
    def url(credential: str) -> str:
        if userinfo:
            return f"{scheme}://user:{credential}@host/v1"
        return f"{scheme}://host/v1?a=1&{parameter}={credential}"

    other = "0" * 8 if secret != "0" * 8 else "1" * 8
    assert scrub(f"error for url '{url(secret)}'{tail}") == scrub(
        f"error for url '{url(other)}'{tail}"
    )
    assert _refusal(url(secret)) == _refusal(url(other))


def test_credential_parameters_by_name():
    for name in ("key", "KEY", "api-key", "apikey", "access_token", "client_secret", "sig"):
        assert is_credential_parameter(name), name
    for name in ("page", "model", "verbose", "q", "split"):
        assert not is_credential_parameter(name), name


# Every URL field takes the server's address with or without `/v1`; the config writes it the
# one way its client takes it, so no consumer sees `/v1/v1` or a missing `/v1`.
API_URL_FIELDS = [param for param in URL_FIELDS if param.values[1] != "rollout.vllm_urls[0]"]


def _field_value(config: Config, dotted: str) -> object:
    value: object = config
    for part in dotted.split("."):
        name, _, index = part.partition("[")
        value = getattr(value, name)
        if index:
            value = value[int(index.rstrip("]"))]
    return value


@pytest.mark.parametrize(("env", "field"), API_URL_FIELDS)
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000/v1"),
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000/v1"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("https://dashscope.aliyuncs.com/compatible-mode/v1", None),
        ("https://generativelanguage.googleapis.com/v1beta/openai", None),
    ],
)
def test_an_api_url_field_takes_the_address_with_or_without_v1(
    tmp_path, env, field, given, expected
):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(_config_setting(env, field, given)))
    assert _field_value(load_config(path), field) == (expected or given)


@pytest.mark.parametrize(
    "given",
    [
        "http://127.0.0.1:8000",
        "http://127.0.0.1:8000/",
        "http://127.0.0.1:8000/v1",
        "http://127.0.0.1:8000/v1/",
    ],
)
def test_vllm_urls_take_the_address_with_or_without_v1(given):
    config = load_config(None, ["--rollout.vllm_urls", f"[{given}, http://b:8001/v1]"])
    assert config.rollout.vllm_urls == ["http://127.0.0.1:8000", "http://b:8001"]


def test_the_builtin_judge_and_empty_urls_are_left_alone():
    assert api_base_url("builtin:reference-overlap") == "builtin:reference-overlap"
    assert api_base_url("") == "" and server_root_url("") == ""
    config = load_config(
        None,
        [
            "--env.type",
            "lexam",
            "--env.judges",
            "[{base_url: builtin:reference-overlap, model: m}]",
        ],
    )
    assert config.env.judges[0].base_url == "builtin:reference-overlap"


def test_the_openai_backend_adds_v1_to_a_bare_address_without_a_config():
    from lexrl.rollout.openai_chat import ChatEndpoint, OpenAIChatBackend

    for url in ("http://127.0.0.1:8000", "http://127.0.0.1:8000/v1"):
        backend = OpenAIChatBackend(ChatEndpoint(base_url=url, model="m"))
        assert backend.endpoint.base_url == "http://127.0.0.1:8000/v1"
