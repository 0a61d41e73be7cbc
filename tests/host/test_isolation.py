"""Caches are isolated by authorization and turn; answers that arrive late are dropped."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from agent_knowledge_host import KnowledgeClient
from agent_knowledge_host import errors as e
from agent_knowledge_host.models import epoch_of
from tests.host.fakes import ROUTE, Answer, Document, FakeApi, FakeKnowledge, Request, hint_body, turn_body

WAIT_SECONDS = 10  # only a safety net so a broken test fails instead of hanging


@dataclass
class Tokens:
    """The host's current bearer; tests switch it."""

    current: str = "token-a"

    def __call__(self) -> str:
        return self.current


@dataclass
class Gate:
    """Holds a fake server's answer until the test lets it go."""

    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def hold(self, handler: Callable[[Request], Answer]) -> Callable[[Request], Answer]:
        def held(request: Request) -> Answer:
            self.arrived.set()
            assert self.release.wait(WAIT_SECONDS)
            return handler(request)

        return held


def in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except Exception as error:  # the test inspects what was raised
            outcome["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def finish(thread: threading.Thread) -> None:
    thread.join(WAIT_SECONDS)
    assert not thread.is_alive()


@pytest.fixture
def knowledge(api: FakeApi) -> FakeKnowledge:
    fake = FakeKnowledge({"handbook": Document("Employee handbook", "Leave requests go to HR. " * 40)})
    fake.install(api)
    api.on("POST", "/turns", lambda request: (200, turn_body(request)))
    return fake


# -- cache isolation -------------------------------------------------------------------------


def test_repeated_search_in_one_turn_is_answered_from_the_cache(api: FakeApi, knowledge: FakeKnowledge) -> None:
    client = KnowledgeClient(api.base_url, ROUTE, Tokens())

    first = client.search("leave")
    second = client.search("leave")

    assert second == first
    assert len(api.calls("/knowledge/search")) == 1


def test_switching_token_never_shows_the_earlier_tokens_entries(api: FakeApi, knowledge: FakeKnowledge) -> None:
    tokens = Tokens("token-a")
    client = KnowledgeClient(api.base_url, ROUTE, tokens)
    ref_a = client.search("leave").hints[0].ref
    page_a = client.read(ref_a)

    tokens.current = "token-b"
    ref_b = client.search("leave").hints[0].ref
    with pytest.raises(e.ReferenceInvalid):  # the server, not a cached page, answers for token B
        client.read(ref_a)
    tokens.current = "token-a"
    again_a = client.search("leave").hints[0].ref

    assert (ref_a, ref_b, again_a) == ("ref:handbook:token-a", "ref:handbook:token-b", "ref:handbook:token-a")
    searches = api.calls("/knowledge/search")
    assert [request.token for request in searches] == ["token-a", "token-b", "token-a"]
    reads = api.calls("/knowledge/read")
    assert [request.token for request in reads] == ["token-a", "token-b"]
    assert page_a.ref == ref_a


def test_a_new_turn_never_shows_the_earlier_turns_entries(api: FakeApi, knowledge: FakeKnowledge) -> None:
    client = KnowledgeClient(api.base_url, ROUTE, Tokens())
    ref = client.search("leave").hints[0].ref
    client.read(ref)
    client.read(ref)
    assert len(api.calls("/knowledge/read")) == 1  # the page was cached within the turn

    client.start_turn("conv-1", "turn-2", "msg-2", "next question")
    client.search("leave")
    client.read(ref)

    assert len(api.calls("/knowledge/search")) == 2
    assert len(api.calls("/knowledge/read")) == 2


def test_cache_keys_hold_a_token_digest_never_the_token(api: FakeApi, knowledge: FakeKnowledge) -> None:
    secret = "very-secret-bearer"
    client = KnowledgeClient(api.base_url, ROUTE, lambda: secret)
    client.read(client.search("leave").hints[0].ref)

    keys = list(client._scope._entries)  # white-box: nothing else exposes the keys
    assert [key[2] for key in keys] == ["search", "read"]
    assert {key[0] for key in keys} == {hashlib.sha256(secret.encode()).hexdigest()}


def test_entries_do_not_outlive_their_references(api: FakeApi, knowledge: FakeKnowledge) -> None:
    now = [time.time()]
    client = KnowledgeClient(api.base_url, ROUTE, Tokens(), clock=lambda: now[0])
    client.search("leave")

    now[0] += 301  # references live 300 seconds
    client.search("leave")

    assert len(api.calls("/knowledge/search")) == 2


@pytest.mark.parametrize(
    ("expires_at", "epoch"),
    [
        ("2026-12-02T16:59:52Z", 1796230792.0),
        ("2026-12-02T17:59:52+01:00", 1796230792.0),
        (1796230792, 1796230792.0),
        ("2026-12-02T16:59:52", None),  # no zone: not trusted, so nothing is cached on it
        ("soon", None),
        (None, None),
    ],
)
def test_expiry_is_understood_or_unknown(expires_at: str | int | None, epoch: float | None) -> None:
    assert epoch_of(expires_at) == epoch


def test_pages_of_a_turns_references_are_cached_within_that_turn(api: FakeApi, knowledge: FakeKnowledge) -> None:
    reference = {**hint_body("ref:handbook:token-a"), "score": 1.0}
    del reference["summary"]
    api.on("POST", "/turns", lambda request: (200, turn_body(request, knowledge_refs=[reference])))
    client = KnowledgeClient(api.base_url, ROUTE, Tokens())

    turn = client.start_turn("conv-1", "turn-1", "msg-1", "question")
    first = client.read(turn.context.knowledge_refs[0].ref, run_id=turn.run_id)
    again = client.read(turn.context.knowledge_refs[0].ref, run_id=turn.run_id)
    client.start_turn("conv-1", "turn-2", "msg-2", "next question")
    client.read(turn.context.knowledge_refs[0].ref, run_id=turn.run_id)

    assert again == first
    assert len(api.calls("/knowledge/read")) == 2


def test_a_stale_reference_empties_the_cache_so_search_again_asks_the_server(
    api: FakeApi, knowledge: FakeKnowledge
) -> None:
    client = KnowledgeClient(api.base_url, ROUTE, Tokens())
    ref = client.search("leave").hints[0].ref
    client.read(ref)
    knowledge.changed.add(ref)

    with pytest.raises(e.KnowledgeChanged):
        client.read(ref, cursor=None, max_bytes=8192)
    client.search("leave")
    with pytest.raises(e.KnowledgeChanged):
        client.read(ref)  # the page cached before the change is gone too

    assert len(api.calls("/knowledge/search")) == 2
    assert len(api.calls("/knowledge/read")) == 3


def test_a_page_of_an_unknown_reference_is_not_cached(api: FakeApi, knowledge: FakeKnowledge) -> None:
    client = KnowledgeClient(api.base_url, ROUTE, Tokens())

    client.read("ref:handbook:token-a")
    client.read("ref:handbook:token-a")

    assert len(api.calls("/knowledge/read")) == 2


def test_caching_can_be_switched_off(api: FakeApi, knowledge: FakeKnowledge) -> None:
    client = KnowledgeClient(api.base_url, ROUTE, Tokens(), cache=False)

    client.search("leave")
    client.search("leave")

    assert len(api.calls("/knowledge/search")) == 2


# -- late answers ----------------------------------------------------------------------------


def test_a_search_answered_after_a_new_turn_is_dropped(api: FakeApi, knowledge: FakeKnowledge) -> None:
    gate = Gate()
    api.on("POST", "/knowledge/search", gate.hold(knowledge.search))
    client = KnowledgeClient(api.base_url, ROUTE, Tokens())

    thread, outcome = in_thread(lambda: client.search("leave"))
    assert gate.arrived.wait(WAIT_SECONDS)
    client.start_turn("conv-1", "turn-2", "msg-2", "next question")
    gate.release.set()
    finish(thread)

    assert isinstance(outcome.get("error"), e.StaleResponse) and "value" not in outcome
    # Nothing of the late answer was kept: the next search in the new turn asks the server.
    assert client.search("leave").hints
    assert len(api.calls("/knowledge/search")) == 2


def test_a_late_error_is_dropped_too(api: FakeApi, knowledge: FakeKnowledge) -> None:
    gate = Gate()
    knowledge.expired.add("ref:handbook:token-a")
    api.on("POST", "/knowledge/read", gate.hold(knowledge.read))
    client = KnowledgeClient(api.base_url, ROUTE, Tokens())

    thread, outcome = in_thread(lambda: client.read("ref:handbook:token-a"))
    assert gate.arrived.wait(WAIT_SECONDS)
    client.new_turn()
    gate.release.set()
    finish(thread)

    assert isinstance(outcome.get("error"), e.StaleResponse)


def test_an_answer_for_an_earlier_token_is_dropped(api: FakeApi, knowledge: FakeKnowledge) -> None:
    gate = Gate()
    tokens = Tokens("token-a")
    held = gate.hold(knowledge.search)
    api.on(
        "POST",
        "/knowledge/search",
        lambda request: held(request) if request.token == "token-a" else knowledge.search(request),
    )
    client = KnowledgeClient(api.base_url, ROUTE, tokens)

    thread, outcome = in_thread(lambda: client.search("leave"))
    assert gate.arrived.wait(WAIT_SECONDS)
    tokens.current = "token-b"
    answer_b = client.search("leave")
    gate.release.set()
    finish(thread)

    assert isinstance(outcome.get("error"), e.StaleResponse)
    assert answer_b.hints[0].ref == "ref:handbook:token-b"


def test_an_earlier_turn_answered_after_a_newer_one_started_is_dropped(api: FakeApi, knowledge: FakeKnowledge) -> None:
    gate = Gate()
    held = gate.hold(lambda request: (200, turn_body(request)))

    def turns(request: Request) -> Answer:
        assert request.body is not None
        return held(request) if request.body["client_turn_id"] == "turn-1" else (200, turn_body(request))

    api.on("POST", "/turns", turns)
    client = KnowledgeClient(api.base_url, ROUTE, Tokens())

    thread, outcome = in_thread(lambda: client.start_turn("conv-1", "turn-1", "msg-1", "first"))
    assert gate.arrived.wait(WAIT_SECONDS)
    second = client.start_turn("conv-1", "turn-2", "msg-2", "second")
    gate.release.set()
    finish(thread)

    assert isinstance(outcome.get("error"), e.StaleResponse)
    assert second.run_id == "run-turn-2"
