"""Negotiation and turns against fake servers: what is sent, what falls back, what raises."""

from __future__ import annotations

import socket

import pytest

from agent_knowledge_host import KnowledgeClient
from agent_knowledge_host import errors as e
from agent_knowledge_host.models import DeliveryMode, Turn
from tests.host.fakes import ROUTE, FakeApi, Request, capabilities_body, error, turn_body

TOKEN = "token-a"


def client_for(api: FakeApi) -> KnowledgeClient:
    return KnowledgeClient(api.base_url, ROUTE, lambda: TOKEN)


def start(client: KnowledgeClient, mode: DeliveryMode | None = "on_demand") -> Turn:
    return client.start_turn("conv-1", "turn-1", "msg-1", "What is the leave policy?", knowledge_delivery=mode)


def test_on_demand_is_requested_after_capabilities_offer_it(api: FakeApi) -> None:
    api.on("GET", "/knowledge/capabilities", (200, capabilities_body()))
    api.on("POST", "/turns", lambda request: (200, turn_body(request)))

    turn = start(client_for(api))

    (sent,) = api.calls("/turns")
    assert sent.body is not None and sent.body["knowledge_delivery"] == "on_demand"
    assert sent.authorization == f"Bearer {TOKEN}"
    assert [request.path.rsplit("/", 1)[-1] for request in api.requests] == ["capabilities", "turns"]
    assert turn.delivered == "on_demand" and turn.fallback_reason is None
    assert turn.context.knowledge == [] and turn.run_id == "run-turn-1"
    (hint,) = turn.hints
    assert (hint.trust, hint.ref, hint.title, hint.revision) == ("reference_only", "ref-turn", "Handbook", "rev-1")


def test_inline_mode_is_echoed_and_keeps_bodies(api: FakeApi) -> None:
    api.on("GET", "/knowledge/capabilities", (200, capabilities_body()))
    api.on("POST", "/turns", lambda request: (200, turn_body(request)))

    turn = start(client_for(api), "inline")

    assert turn.delivered == "inline" and turn.hints == []
    (item,) = turn.context.knowledge
    assert (item.trust, item.title, item.revision) == ("reference_only", "Handbook", "rev-1")
    assert item.content == "Inline body." and not item.content_truncated
    (reference,) = turn.context.knowledge_refs
    assert (reference.trust, reference.ref, reference.revision) == ("reference_only", "ref-inline", "rev-1")


def test_a_turn_whose_governance_is_not_reference_only_is_refused(api: FakeApi) -> None:
    api.on("POST", "/turns", lambda request: (200, turn_body(request, governance={"knowledge_trust": "instructions"})))

    with pytest.raises(e.ProtocolViolation):
        start(client_for(api), None)


def test_a_turn_without_a_delivery_mode_skips_negotiation(api: FakeApi) -> None:
    api.on("POST", "/turns", lambda request: (200, turn_body(request)))

    turn = start(client_for(api), None)

    assert api.calls("/knowledge/capabilities") == []
    (sent,) = api.calls("/turns")
    assert sent.body is not None and "knowledge_delivery" not in sent.body
    assert turn.delivered == "legacy" and turn.fallback_reason is None


@pytest.mark.parametrize(
    "answer",
    [
        error(404, "not_found", "no such endpoint"),
        (404, b"<html>Not Found</html>"),
        error(405, "method_not_allowed"),
        error(501, "not_implemented"),
    ],
    ids=["404-json", "404-html", "405", "501"],
)
def test_an_old_server_gets_a_legacy_inline_turn(api: FakeApi, answer: tuple[int, object]) -> None:
    api.on("GET", "/knowledge/capabilities", answer)
    api.on("POST", "/turns", lambda request: (200, turn_body(request)))

    turn = start(client_for(api))

    (sent,) = api.calls("/turns")
    assert sent.body is not None and "knowledge_delivery" not in sent.body
    assert turn.delivered == "legacy" and turn.requested == "on_demand"
    assert turn.fallback_reason is not None and "404/405/501" in turn.fallback_reason
    assert [item.content for item in turn.context.knowledge] == ["Inline body."]


@pytest.mark.parametrize(
    "capabilities",
    [capabilities_body(supported=False), capabilities_body(delivery_modes=["inline"])],
    ids=["unsupported", "inline-only"],
)
def test_a_mode_not_offered_is_not_requested(api: FakeApi, capabilities: dict[str, object]) -> None:
    api.on("GET", "/knowledge/capabilities", (200, capabilities))
    api.on("POST", "/turns", lambda request: (200, turn_body(request)))

    turn = start(client_for(api))

    (sent,) = api.calls("/turns")
    assert sent.body is not None and "knowledge_delivery" not in sent.body
    assert turn.delivered == "legacy"
    assert turn.fallback_reason == "capabilities do not offer 'on_demand'; legacy inline turn"


@pytest.mark.parametrize(
    ("answer", "raised"),
    [
        (error(401, "unauthorized"), e.Unauthorized),
        ((401, b""), e.Unauthorized),
        ((403, b"Forbidden"), e.Forbidden),
        (error(404, "workspace_not_found"), e.WorkspaceNotFound),
        (error(500, "internal_error", "internal error (request id 7)"), e.InternalError),
        ((502, b"Bad Gateway"), e.InternalError),
        (error(503, "knowledge_unavailable"), e.KnowledgeUnavailable),
        ((200, capabilities_body(schema_version="bailing.agent-knowledge-capabilities.v2")), e.UnknownSchema),
        ((200, capabilities_body(protocol="bailing.agent-knowledge.v2")), e.ProtocolViolation),
        ((200, b"not json"), e.ProtocolViolation),
    ],
    ids=["401", "401-empty", "403", "404-workspace", "500", "502", "503", "schema", "protocol", "not-json"],
)
def test_failed_negotiation_raises_and_sends_no_turn(
    api: FakeApi, answer: tuple[int, object], raised: type[Exception]
) -> None:
    api.on("GET", "/knowledge/capabilities", answer)
    api.on("POST", "/turns", lambda request: (200, turn_body(request)))

    with pytest.raises(raised):
        start(client_for(api))

    assert api.calls("/turns") == []


def test_an_unreachable_server_raises_a_transport_error() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens on it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = KnowledgeClient(f"http://127.0.0.1:{port}", ROUTE, lambda: TOKEN, timeout=5)

    with pytest.raises(e.TransportError):
        client.capabilities()
    with pytest.raises(e.TransportError):
        start(client)


def test_an_on_demand_turn_without_the_echo_raises(api: FakeApi) -> None:
    def without_echo(request: Request) -> tuple[int, object]:
        body = turn_body(request)
        body["context"] = {}
        return 200, body

    api.on("GET", "/knowledge/capabilities", (200, capabilities_body()))
    api.on("POST", "/turns", without_echo)

    with pytest.raises(e.DeliveryNotConfirmed):
        start(client_for(api))


@pytest.mark.parametrize(
    ("change", "raised"),
    [
        ({"mode": "inline"}, e.DeliveryNotConfirmed),
        ({"schema_version": "bailing.agent-knowledge-delivery.v2"}, e.UnknownSchema),
        ({"protocol": "other"}, e.UnknownSchema),
    ],
)
def test_a_wrong_echo_raises(api: FakeApi, change: dict[str, str], raised: type[Exception]) -> None:
    def wrong_echo(request: Request) -> tuple[int, object]:
        body = turn_body(request)
        body["context"]["knowledge_delivery"].update(change)
        return 200, body

    api.on("GET", "/knowledge/capabilities", (200, capabilities_body()))
    api.on("POST", "/turns", wrong_echo)

    with pytest.raises(raised):
        start(client_for(api))


def test_an_on_demand_turn_carrying_bodies_raises(api: FakeApi) -> None:
    api.on("GET", "/knowledge/capabilities", (200, capabilities_body()))
    api.on(
        "POST",
        "/turns",
        lambda request: (200, turn_body(request, knowledge=[{"title": "T", "content": "body"}])),
    )

    with pytest.raises(e.ProtocolViolation):
        start(client_for(api))


def test_a_turn_with_an_unknown_schema_raises(api: FakeApi) -> None:
    api.on("POST", "/turns", lambda request: (200, turn_body(request, schema_version="bailing.agent-turn-context.v9")))

    with pytest.raises(e.UnknownSchema):
        start(client_for(api), None)


def test_a_turn_conflict_is_typed(api: FakeApi) -> None:
    api.on("POST", "/turns", error(409, "turn_conflict", "the turn was already started with another payload"))

    with pytest.raises(e.TurnConflict) as raised:
        start(client_for(api), None)

    assert raised.value.status == 409
    assert "never alter a replay" in raised.value.describe()


def test_optional_turn_fields_are_sent_as_given(api: FakeApi) -> None:
    api.on("POST", "/turns", lambda request: (200, turn_body(request)))
    binding = {"schema_version": "bailing.agent-task-binding.v1", "task_id": "t-1", "scope_hash": "h"}

    client_for(api).start_turn(
        "conv-1", "turn-1", "msg-1", "hello", page_context={"url": "/x"}, renderers=("markdown",), task_binding=binding
    )

    (sent,) = api.calls("/turns")
    assert sent.body == {
        "client_conversation_id": "conv-1",
        "client_turn_id": "turn-1",
        "user_message_id": "msg-1",
        "user_input": "hello",
        "page_context": {"url": "/x"},
        "renderers": ["markdown"],
        "task_binding": binding,
    }
