"""Every protocol error code arrives as its own typed error, with guidance."""

from __future__ import annotations

import pytest

from agent_knowledge_host import KnowledgeClient
from agent_knowledge_host import errors as e
from tests.host.fakes import PREFIX, ROUTE, FakeApi, error, running
from tests.support import protocol

PROTOCOL_ERRORS = [(status, code, getattr(e, name)) for status, code, name in protocol.ERRORS]
SEARCH_AGAIN_CODES = {
    "knowledge_reference_invalid",
    "knowledge_reference_expired",
    "knowledge_scope_changed",
    "knowledge_changed",
}


def test_every_protocol_code_has_its_own_class() -> None:
    assert set(e.ERROR_BY_CODE) == {code for _, code, _ in PROTOCOL_ERRORS}
    assert len({error_type for _, _, error_type in PROTOCOL_ERRORS}) == len(PROTOCOL_ERRORS)


@pytest.mark.parametrize(("status", "code", "error_type"), PROTOCOL_ERRORS, ids=[row[1] for row in PROTOCOL_ERRORS])
def test_a_read_error_is_typed_with_guidance(
    api: FakeApi, status: int, code: str, error_type: type[e.ServerError]
) -> None:
    api.on("POST", "/knowledge/read", error(status, code, "server says no"))
    client = KnowledgeClient(api.base_url, ROUTE, lambda: "token-a")

    with pytest.raises(error_type) as raised:
        client.read("ref-1")

    failure = raised.value
    said = "server says no"
    if code == "knowledge_reference_invalid":  # and which tokens the read sent (next test)
        said += "; this read sent a ref and no cursor: the ref is the one refused"
    assert (failure.status, failure.code, failure.message) == (status, code, said)
    assert failure.search_again is (code in SEARCH_AGAIN_CODES)
    assert failure.describe().startswith(f"{code} (HTTP {status}): {said}. What to do: ")
    if failure.search_again:
        assert "Search again" in failure.guidance and "never retry a read with a substituted" in failure.guidance


def test_a_refused_read_says_whether_it_sent_a_cursor(api: FakeApi) -> None:
    """Issue 24: a bad cursor and a bad ref read alike. The server keeps one message for every
    invalid token (docs/DESIGN.md §5); the host adds which tokens the read sent."""
    api.on(
        "POST",
        "/knowledge/read",
        error(400, "knowledge_reference_invalid", "the knowledge reference or cursor is invalid"),
    )
    client = KnowledgeClient(api.base_url, ROUTE, lambda: "token-a")

    with pytest.raises(e.ReferenceInvalid) as bad_ref:
        client.read("ref-1")
    with pytest.raises(e.ReferenceInvalid) as bad_cursor:
        client.read("ref-1", cursor="cursor-2")

    assert "sent a ref and no cursor: the ref is the one refused" in bad_ref.value.message
    assert "sent a ref and a cursor: either may be the one refused" in bad_cursor.value.message
    assert bad_ref.value.describe() != bad_cursor.value.describe()
    assert "cursor-2" not in bad_cursor.value.describe() and "ref-1" not in bad_ref.value.describe()


def test_an_unknown_code_keeps_what_the_server_said(api: FakeApi) -> None:
    api.on("POST", "/knowledge/search", error(418, "teapot", "short and stout"))
    client = KnowledgeClient(api.base_url, ROUTE, lambda: "token-a")

    with pytest.raises(e.ServerError) as raised:
        client.search("tea")

    assert type(raised.value) is e.ServerError
    assert raised.value.describe().startswith("teapot (HTTP 418): short and stout")


def test_a_missing_token_is_refused_before_any_request(api: FakeApi) -> None:
    client = KnowledgeClient(api.base_url, ROUTE, lambda: "")

    with pytest.raises(e.MissingToken):
        client.search("anything")

    assert api.requests == []


def test_errors_never_echo_the_token(api: FakeApi) -> None:
    api.on("POST", "/knowledge/search", error(401, "unauthorized", "a valid agent bearer token is required"))
    client = KnowledgeClient(api.base_url, ROUTE, lambda: "secret-token-value")

    with pytest.raises(e.Unauthorized) as raised:
        client.search("anything")

    assert "secret-token-value" not in raised.value.describe()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_refused_and_the_bearer_stays_home(api: FakeApi, status: int) -> None:
    with running(FakeApi()) as elsewhere:
        for path in ("/knowledge/capabilities", "/knowledge/search"):
            elsewhere.on("GET", path, (200, {}))
            api.on("GET", path, (status, error(status, "moved")[1], {"Location": elsewhere.base_url + PREFIX + path}))
            api.on("POST", path, (status, error(status, "moved")[1], {"Location": elsewhere.base_url + PREFIX + path}))
        client = KnowledgeClient(api.base_url, ROUTE, lambda: "token-a")

        with pytest.raises(e.ServerError) as by_get:
            client.capabilities()
        with pytest.raises(e.ServerError) as by_post:
            client.search("anything")

        assert by_get.value.status == by_post.value.status == status
        assert elsewhere.requests == []
