"""Which Origins may call the MCP endpoint (`agent_knowledge.mcp.origins`): the pure rules, on
events built by hand."""

from __future__ import annotations

from typing import Any

import pytest

from agent_knowledge.errors import ConfigurationError
from agent_knowledge.mcp.origins import (
    ENVIRONMENT_VARIABLE,
    normalized_origin,
    origin_allowed,
    own_origin,
    parse_allowed_origins,
)
from agent_knowledge.settings import get_settings, load_settings, reset_settings
from tests.support.fakes import REQUIRED_ENVIRONMENT

API_DOMAIN = "abc123.execute-api.eu-west-1.amazonaws.com"


def event(origin: str | None, domain: str | None = API_DOMAIN, host: str | None = None) -> dict[str, Any]:
    headers = {"content-type": "application/json", "host": host or domain or "unknown"}
    if origin is not None:
        headers["origin"] = origin
    return {"headers": headers, "requestContext": {} if domain is None else {"domainName": domain}}


@pytest.mark.parametrize(
    ("value", "normalized"),
    [
        ("https://a.example", "https://a.example:443"),
        ("https://A.Example:443", "https://a.example:443"),
        ("HTTP://localhost", "http://localhost:80"),
        ("http://127.0.0.1:3000", "http://127.0.0.1:3000"),
        ("http://[::1]:3000", "http://[::1]:3000"),
        ("  https://a.example:8443 ", "https://a.example:8443"),
        # Not the origin of an http or https page:
        ("null", None),
        ("", None),
        ("file://", None),
        ("ftp://a.example", None),
        ("a.example", None),
        ("https://a.example/", None),
        ("https://a.example/path", None),
        ("https://a.example?q=1", None),
        ("https://a.example#top", None),
        ("https://user@a.example", None),
        ("https://a.example:", None),
        ("https://a.example:x", None),
        ("https://a.example:70000", None),
        ("http://[::1", None),
    ],
)
def test_an_origin_is_normalised_or_refused(value: str, normalized: str | None) -> None:
    assert normalized_origin(value) == normalized


def test_the_configured_origins_are_parsed_and_normalised() -> None:
    assert parse_allowed_origins("") == frozenset()
    assert parse_allowed_origins(" , ") == frozenset()
    assert parse_allowed_origins("https://kb.example.com, http://localhost:3000,") == {
        "https://kb.example.com:443",
        "http://localhost:3000",
    }


@pytest.mark.parametrize("value", ["https://kb.example.com/", "kb.example.com", "https://a.example, null"])
def test_a_configured_entry_that_is_no_origin_is_a_configuration_error_naming_it(value: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        parse_allowed_origins(value)
    bad = value.split(", ")[-1]
    assert f"invalid {ENVIRONMENT_VARIABLE} entry {bad!r}" in str(raised.value)


def test_the_container_reads_the_variable_once(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**REQUIRED_ENVIRONMENT, ENVIRONMENT_VARIABLE: "https://kb.example.com"}.items():
        monkeypatch.setenv(name, value)
    reset_settings()
    try:
        assert get_settings().allowed_origins == {"https://kb.example.com:443"}
        monkeypatch.setenv(ENVIRONMENT_VARIABLE, "")
        assert get_settings().allowed_origins == {"https://kb.example.com:443"}
    finally:
        reset_settings()


def test_the_settings_are_unset_without_the_variable_and_refuse_an_entry_that_is_no_origin() -> None:
    assert load_settings(REQUIRED_ENVIRONMENT).allowed_origins == frozenset()
    with pytest.raises(ConfigurationError) as raised:
        load_settings({**REQUIRED_ENVIRONMENT, ENVIRONMENT_VARIABLE: "https://a.example, null"})
    assert f"invalid {ENVIRONMENT_VARIABLE} entry 'null'" in str(raised.value)


def test_the_apis_own_origin_is_its_domain_over_https_never_the_host_header() -> None:
    assert own_origin(event(None)) == f"https://{API_DOMAIN}:443"
    assert own_origin(event(None, host="evil.example")) == f"https://{API_DOMAIN}:443"
    assert own_origin(event(None, domain=None)) is None


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        (None, True),  # not a browser
        (f"https://{API_DOMAIN}", True),
        (f"https://{API_DOMAIN.upper()}:443", True),
        ("https://kb.example.com", True),  # configured
        (f"http://{API_DOMAIN}", False),  # API Gateway serves HTTPS only
        (f"https://{API_DOMAIN}:8443", False),
        ("https://evil.example", False),
        ("null", False),
    ],
)
def test_an_origin_is_allowed_when_absent_the_apis_own_or_configured(origin: str | None, allowed: bool) -> None:
    assert origin_allowed(event(origin), {"https://kb.example.com:443"}) is allowed


def test_a_rebinding_page_naming_itself_in_host_and_origin_is_refused() -> None:
    # The attacker's domain resolves to the server: Host and Origin both name it.
    rebound = event("http://evil.example:3000", domain="evil.example", host="evil.example:3000")
    assert not origin_allowed(rebound, {"http://localhost:3000", "http://127.0.0.1:3000", "http://[::1]:3000"})


def test_every_loopback_name_is_allowed_whichever_addresses_the_server() -> None:
    allowed = parse_allowed_origins("http://localhost:3000,http://127.0.0.1:3000,http://[::1]:3000")
    for domain in ("localhost", "127.0.0.1", "[::1]"):
        for origin in ("http://localhost:3000", "http://127.0.0.1:3000", "http://[::1]:3000"):
            assert origin_allowed(event(origin, domain=domain, host=f"{domain}:3000"), allowed)
        assert not origin_allowed(event("http://localhost:3001", domain=domain), allowed)
