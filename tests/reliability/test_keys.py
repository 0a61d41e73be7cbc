"""Key handling beyond tests/integration/test_read.py: what rotation does to cursors and to
containers that still hold the old key, binding to route and client even when every other input is
identical, and expiry exactly at the second with a fractional clock.
"""

from __future__ import annotations

import pytest

from agent_knowledge.knowledge.hints import iso_utc
from agent_knowledge.records import KnowledgeConfig, SourceConfig
from agent_knowledge.references.server_token import reset_codec
from agent_knowledge.repositories import aws
from agent_knowledge_dev import admin
from agent_knowledge_dev.demo import DEMO_CLIENT, DEMO_KB, DEMO_ROUTE, DEMO_TOKEN
from agent_knowledge_dev.handlers import load_event, with_changes
from tests.support.knowledge import bearer, new_session, put_documents

TWIN_ROUTE = "demo-twin"
BODY = "# Travel\n\n" + "".join(f"Rule {n}: keep the travel receipt for the expense report.\n\n" for n in range(300))


@pytest.fixture
def library(demo):
    put_documents(demo.repositories, DEMO_KB, {"travel.md": ("Travel", BODY)}, demo.clock())
    return demo


def search(call, token: str = DEMO_TOKEN, route: str = DEMO_ROUTE):
    event = with_changes(load_event("search-english-query"), route=route, authorization=bearer(token))
    return call("search", with_changes(event, body={"query": "travel receipt"}))


def read(call, body: dict, token: str = DEMO_TOKEN, route: str = DEMO_ROUTE):
    event = with_changes(load_event("read-first-page"), route=route, authorization=bearer(token))
    return call("read", with_changes(event, body=body))


def first_hint(call, **kwargs) -> dict:
    result = search(call, **kwargs)
    assert result.status == 200, result.body
    return result.json()["hints"][0]


def error(result) -> tuple[int, str]:
    return result.status, result.json().get("error", "")


def rotate(library, value: str) -> None:
    aws.client("secretsmanager").put_secret_value(
        SecretId=library.environment["SERVER_TOKEN_SECRET_ID"], SecretString=value
    )


def test_rotation_invalidates_outstanding_cursors_mid_chain(call, library):
    ref = first_hint(call)["ref"]
    cursor = read(call, {"ref": ref, "max_bytes": 4096}).json()["next_cursor"]
    rotate(library, "rotated-server-token-for-cursor-test-01")
    reset_codec()  # a container that picked up the new key
    assert error(read(call, {"ref": ref, "cursor": cursor, "max_bytes": 4096})) == (400, "knowledge_reference_invalid")
    # A new search under the new key starts a chain that reads to the end.
    fresh = first_hint(call)["ref"]
    page = read(call, {"ref": fresh, "max_bytes": 32768}).json()
    while page["next_cursor"]:
        page = read(call, {"ref": fresh, "cursor": page["next_cursor"], "max_bytes": 32768}).json()
    assert page["truncated"] is False


def test_rotation_takes_effect_per_container(call, library):
    """The key is read once per container: until a container reloads it, it keeps accepting the
    references it (and its peers) signed with the old key, and refuses the new key's."""
    old_ref = first_hint(call)["ref"]
    rotate(library, "rotated-server-token-per-container-02")
    assert read(call, {"ref": old_ref}).status == 200  # this container still holds the old key
    reset_codec()  # the container is recycled (or a new one starts)
    assert error(read(call, {"ref": old_ref})) == (400, "knowledge_reference_invalid")
    new_ref = first_hint(call)["ref"]
    assert read(call, {"ref": new_ref}).status == 200


def test_containers_sharing_the_key_accept_each_others_references(call, library):
    ref = first_hint(call)["ref"]
    reset_codec()  # another container, same secret
    assert read(call, {"ref": ref}).status == 200


@pytest.fixture
def twin_route(library):
    """A second route with exactly the same knowledge configuration, so the same scope revision:
    only the route bound into the reference tells them apart."""
    knowledge = KnowledgeConfig(
        enabled=True, sources=[SourceConfig(kb_id=DEMO_KB)], top_k=10, min_score=0.0, max_docs=3
    )
    admin.put_route(library.repositories, DEMO_ROUTE, knowledge)
    admin.put_route(library.repositories, TWIN_ROUTE, knowledge)
    admin.put_client(library.repositories, DEMO_CLIENT, [DEMO_ROUTE, TWIN_ROUTE])
    _, token = new_session(library.repositories, library.clock(), routes=[DEMO_ROUTE, TWIN_ROUTE])
    return token


def test_a_reference_is_useless_on_another_route_with_the_same_scope(call, library, twin_route):
    token = twin_route
    on_demo = search(call, token=token, route=DEMO_ROUTE).json()
    on_twin = search(call, token=token, route=TWIN_ROUTE).json()
    assert on_demo["knowledge_scope_revision"] == on_twin["knowledge_scope_revision"]
    ref = on_demo["hints"][0]["ref"]
    assert read(call, {"ref": ref}, token=token, route=DEMO_ROUTE).status == 200
    assert error(read(call, {"ref": ref}, token=token, route=TWIN_ROUTE)) == (400, "knowledge_reference_invalid")
    cursor = read(call, {"ref": ref, "max_bytes": 4096}, token=token).json()["next_cursor"]
    moved = read(call, {"ref": ref, "cursor": cursor}, token=token, route=TWIN_ROUTE)
    assert error(moved) == (400, "knowledge_reference_invalid")


def test_a_reference_and_its_cursor_are_useless_to_another_client(call, library):
    ref = first_hint(call)["ref"]
    cursor = read(call, {"ref": ref, "max_bytes": 4096}).json()["next_cursor"]
    admin.put_client(library.repositories, "other-agent", [DEMO_ROUTE])
    _, token = new_session(library.repositories, library.clock(), client_app_id="other-agent")
    assert search(call, token=token).status == 200  # the other client may use the route itself
    assert error(read(call, {"ref": ref}, token=token)) == (400, "knowledge_reference_invalid")
    assert error(read(call, {"ref": ref, "cursor": cursor}, token=token)) == (400, "knowledge_reference_invalid")


def test_a_cursor_is_useless_to_another_session_of_the_same_principal(call, library):
    ref = first_hint(call)["ref"]
    cursor = read(call, {"ref": ref, "max_bytes": 4096}).json()["next_cursor"]
    _, token = new_session(library.repositories, library.clock())
    assert error(read(call, {"ref": ref, "cursor": cursor}, token=token)) == (400, "knowledge_reference_invalid")


def test_expiry_is_exact_at_the_second_with_a_fractional_clock(call, library):
    library.clock.now = 1_800_000_000.75
    hint = first_hint(call)
    assert hint["expires_at"] == iso_utc(1_800_000_300)  # floor(issued) + 300
    library.clock.now = 1_800_000_299.999
    assert read(call, {"ref": hint["ref"]}).status == 200
    library.clock.now = 1_800_000_300.0
    assert error(read(call, {"ref": hint["ref"]})) == (410, "knowledge_reference_expired")


def test_a_stolen_expired_reference_says_expired_before_cross_identity(call, library):
    ref = first_hint(call)["ref"]
    _, token = new_session(library.repositories, library.clock())
    assert error(read(call, {"ref": ref}, token=token)) == (400, "knowledge_reference_invalid")
    library.clock.advance(300)
    assert error(read(call, {"ref": ref}, token=token)) == (410, "knowledge_reference_expired")
