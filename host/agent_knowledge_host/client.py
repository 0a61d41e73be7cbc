"""`KnowledgeClient`: the spec's host rules, in one place.

- Negotiation: `knowledge_delivery` is sent only after capabilities offered that mode. An old
  server (capabilities 404/405/501) gets a legacy turn with inline bodies — the one allowed
  fallback. Authorization and server errors, network failures, unknown schemas and an
  on_demand turn without the `context.knowledge_delivery` echo raise; nothing pretends success.
- Every error answer becomes a typed error naming its protocol code and what to do
  (`agent_knowledge_host.errors`).
- Caches and late answers: see `agent_knowledge_host.scope`. A new turn or a new token opens a
  new window; answers from an older window are dropped with `StaleResponse`.
- Provenance: every hint and page carries `trust: "reference_only"`, ref, title and revision.

The bearer comes from `token_provider`, called once per request: it must return the current
token quickly (the host refreshes tokens elsewhere).
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from agent_knowledge.mcp.tool_catalog import refused_tokens
from agent_knowledge_host.errors import (
    DeliveryNotConfirmed,
    EndpointMissing,
    KnowledgeHostError,
    MissingToken,
    ProtocolViolation,
    ReferenceInvalid,
    StaleResponse,
    UnknownSchema,
)
from agent_knowledge_host.models import (
    CAPABILITIES_SCHEMA,
    DELIVERY_SCHEMA,
    PROTOCOL,
    READ_SCHEMA,
    REFERENCE_ONLY,
    SEARCH_SCHEMA,
    TURN_SCHEMA,
    Capabilities,
    DeliveryMode,
    Hint,
    Negotiation,
    ReadChain,
    ReadPage,
    SearchResult,
    Turn,
    TurnContext,
)
from agent_knowledge_host.scope import Scope, Ticket
from agent_knowledge_host.transport import DEFAULT_TIMEOUT_SECONDS, HttpTransport

TokenProvider = Callable[[], str]
ModelT = TypeVar("ModelT", bound=BaseModel)
DELIVERY_MODES: tuple[DeliveryMode, ...] = ("inline", "on_demand")


class KnowledgeClient:
    def __init__(
        self,
        base_url: str,
        route: str,
        token_provider: TokenProvider,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        cache: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not route:
            raise ValueError("route must not be empty")
        self.route = route
        self._transport = HttpTransport(base_url, timeout)
        self._token_provider = token_provider
        self._cache = cache
        self._scope = Scope(clock)
        self._prefix = f"/agent-api/v1/workspaces/{urllib.parse.quote(route, safe='')}"

    # -- negotiation and turns -------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        """The route's capabilities; raises `EndpointMissing` on a server that predates them."""
        token = self._token()
        return self._capabilities(self._scope.enter(token), token)

    def negotiate(self) -> Negotiation:
        """Capabilities, with an old server (404/405/501) reported as `legacy_server` instead of raised."""
        token = self._token()
        return self._negotiate(self._scope.enter(token), token)

    def new_turn(self) -> None:
        """Tell the client the host moved to a new turn without starting one through the API.

        Caches are emptied and answers still in flight for the earlier turn will be dropped.
        `start_turn` does this itself.
        """
        self._scope.new_turn(self._token())

    def start_turn(
        self,
        client_conversation_id: str,
        client_turn_id: str,
        user_message_id: str,
        user_input: str,
        *,
        knowledge_delivery: DeliveryMode | None = None,
        page_context: Mapping[str, Any] | None = None,
        renderers: Sequence[str] | None = None,
        task_binding: Mapping[str, Any] | None = None,
    ) -> Turn:
        """Start a turn (POST .../turns). Asking for a delivery mode negotiates first.

        A mode the server does not offer, or an old server, gives a legacy turn (no
        `knowledge_delivery` field, bodies inline) and says why in `Turn.fallback_reason`.
        """
        if knowledge_delivery is not None and knowledge_delivery not in DELIVERY_MODES:
            raise ValueError(f"knowledge_delivery must be one of {DELIVERY_MODES} or None")
        token = self._token()
        ticket = self._scope.new_turn(token)

        sent_mode: DeliveryMode | None = None
        fallback_reason: str | None = None
        if knowledge_delivery is not None:
            negotiation = self._negotiate(ticket, token)
            if negotiation.supports(knowledge_delivery):
                sent_mode = knowledge_delivery
            elif negotiation.legacy_server:
                fallback_reason = "the server has no capabilities endpoint (404/405/501); legacy inline turn"
            else:
                fallback_reason = f"capabilities do not offer {knowledge_delivery!r}; legacy inline turn"

        body: dict[str, Any] = {
            "client_conversation_id": client_conversation_id,
            "client_turn_id": client_turn_id,
            "user_message_id": user_message_id,
            "user_input": user_input,
        }
        optional = {"page_context": page_context, "renderers": renderers, "task_binding": task_binding}
        body.update({name: _plain(value) for name, value in optional.items() if value is not None})
        if sent_mode is not None:
            body["knowledge_delivery"] = sent_mode

        raw = _turn_with_provenance(self._send(ticket, "POST", "/turns", token, body))
        context = _parse(TurnContext, TURN_SCHEMA, raw)
        hints = _checked_delivery(context, sent_mode)
        for hint in hints:
            self._scope.note_reference(ticket, hint.ref, hint.expiry_epoch())
        for reference in context.knowledge_refs:
            self._scope.note_reference(ticket, reference.ref, reference.expiry_epoch())
        return Turn(
            context=context,
            requested=knowledge_delivery,
            delivered=sent_mode or "legacy",
            fallback_reason=fallback_reason,
            hints=hints,
        )

    # -- search and read -------------------------------------------------------------------

    def search(self, query: str, limit: int = 3, run_id: str | None = None) -> SearchResult:
        token = self._token()
        ticket = self._scope.enter(token)
        key = ("search", query, limit, run_id)
        cached = self._cached(ticket, key, SearchResult)
        if cached is not None:
            return cached
        body: dict[str, Any] = {"query": query, "limit": limit}
        if run_id is not None:
            body["run_id"] = run_id
        raw = self._send(ticket, "POST", "/knowledge/search", token, body)
        result = _parse_search(raw)
        expiries = [hint.expiry_epoch() for hint in result.hints]
        for hint, expiry in zip(result.hints, expiries, strict=True):
            self._scope.note_reference(ticket, hint.ref, expiry)
        # Only a complete answer is worth keeping: unavailable/partial may succeed on a retry.
        if self._cache and result.status == "ok" and expiries and None not in expiries:
            self._scope.put(ticket, key, result, min(e for e in expiries if e is not None))
        return result

    def read(
        self, ref: str, run_id: str | None = None, cursor: str | None = None, max_bytes: int | None = None
    ) -> ReadPage:
        """One page. Follow `next_cursor` with the same ref and run (or use `read_all`)."""
        token = self._token()
        ticket = self._scope.enter(token)
        key = ("read", ref, run_id, cursor, max_bytes)
        cached = self._cached(ticket, key, ReadPage)
        if cached is not None:
            return cached
        body: dict[str, Any] = {"ref": ref}
        optional = {"run_id": run_id, "cursor": cursor, "max_bytes": max_bytes}
        body.update({name: value for name, value in optional.items() if value is not None})
        try:
            page = _parse(ReadPage, READ_SCHEMA, self._send(ticket, "POST", "/knowledge/read", token, body))
        except ReferenceInvalid as error:
            # The server's one message for every invalid token, and which tokens this read sent.
            message = f"{error.message}; {refused_tokens(cursor is not None)}"
            raise ReferenceInvalid(message, status=error.status, code=error.reported_code) from None
        if self._cache:
            # A page lives no longer than the reference it was read with (unknown expiry: not kept).
            self._scope.put(ticket, key, page, self._scope.reference_expiry(ticket, ref))
        return page

    def read_all(self, ref: str, run_id: str | None = None, max_bytes: int | None = None) -> ReadChain:
        """Every page of the reference chain, following `next_cursor` until the end or `budget_exhausted`.

        `ReadChain.source_longer_than_chain` is true when the document is longer than the
        chain budget (128 KiB): the content is then a prefix, not the whole source.
        """
        pages: list[ReadPage] = []
        served = 0
        cursor: str | None = None
        while True:
            page = self.read(ref, run_id=run_id, cursor=cursor, max_bytes=max_bytes)
            if pages and (page.revision, page.title) != (pages[0].revision, pages[0].title):
                raise ProtocolViolation("a reference chain changed revision between pages")
            pages.append(page)
            served += len(page.content.encode("utf-8"))
            if served > page.read_chain_max_bytes:
                raise ProtocolViolation("a reference chain served more than its read_chain_max_bytes")
            if page.budget_exhausted or page.next_cursor is None:
                break
            if not page.content:
                raise ProtocolViolation("an empty page offered a next_cursor")
            cursor = page.next_cursor
        last = pages[-1]
        if last.truncated and not last.budget_exhausted:
            raise ProtocolViolation("the last page is truncated but neither continues nor exhausts the budget")
        return ReadChain(
            ref=ref,
            title=pages[0].title,
            revision=pages[0].revision,
            pages=pages,
            source_longer_than_chain=last.budget_exhausted,
        )

    # -- plumbing --------------------------------------------------------------------------

    def _token(self) -> str:
        token = self._token_provider()
        if not token:
            raise MissingToken("no agent bearer token is available")
        return token

    def _cached(self, ticket: Ticket, key: tuple[Any, ...], kind: type[ModelT]) -> ModelT | None:
        value = self._scope.get(ticket, key) if self._cache else None
        return value if isinstance(value, kind) else None

    def _capabilities(self, ticket: Ticket, token: str) -> Capabilities:
        raw = self._send(ticket, "GET", "/knowledge/capabilities", token)
        return _parse(Capabilities, CAPABILITIES_SCHEMA, raw)

    def _negotiate(self, ticket: Ticket, token: str) -> Negotiation:
        try:
            capabilities = self._capabilities(ticket, token)
        except EndpointMissing:
            return Negotiation(capabilities=None, legacy_server=True)
        return Negotiation(capabilities=capabilities, legacy_server=False)

    def _send(
        self, ticket: Ticket, method: str, path: str, token: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """One request; its answer — success or error — is dropped if the window moved meanwhile."""
        try:
            response = self._transport.request(method, self._prefix + path, token, body)
        except KnowledgeHostError as error:
            if not self._scope.is_current(ticket):
                raise StaleResponse(f"{method} {path} answered after the turn or token changed") from None
            if error.search_again:
                # Cached hints may still point at the stale reference; the new search must reach the server.
                self._scope.forget_entries(ticket)
            raise
        if not self._scope.is_current(ticket):
            raise StaleResponse(f"{method} {path} answered after the turn or token changed")
        return response.body


def _parse(model: type[ModelT], schema: str, raw: dict[str, Any]) -> ModelT:
    """Validate an answer: the exact schema_version first, then the shape."""
    found = raw.get("schema_version")
    if found != schema:
        raise UnknownSchema(f"expected schema_version {schema!r}, got {found!r}")
    try:
        return model.model_validate(raw)
    except ValidationError as error:
        # Field names only: values may be document text.
        fields = sorted({".".join(str(part) for part in item["loc"]) for item in error.errors()})
        raise ProtocolViolation(f"{schema} answer does not match its schema (fields: {', '.join(fields)})") from None


def _with_provenance(items: Any, trust: Any) -> list[dict[str, Any]]:
    """Hints, refs and inline bodies inherit the answer's trust; anything but reference_only is refused.

    An item that states its own trust keeps it, so the models refuse one that is not reference_only.
    """
    if trust != REFERENCE_ONLY:
        raise ProtocolViolation(f"knowledge must be marked {REFERENCE_ONLY!r}, got {trust!r}")
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ProtocolViolation("knowledge items must be a list of objects")
    return [{"trust": REFERENCE_ONLY, **item} for item in items]


def _turn_with_provenance(raw: dict[str, Any]) -> dict[str, Any]:
    """Inline bodies and their refs inherit the turn's `governance.knowledge_trust` (reference_only only)."""
    if raw.get("schema_version") != TURN_SCHEMA:
        return raw  # `_parse` reports the unknown schema
    governance = raw.get("governance")
    trust = governance.get("knowledge_trust") if isinstance(governance, dict) else None
    return {
        **raw,
        "knowledge": _with_provenance(raw.get("knowledge"), trust),
        "knowledge_refs": _with_provenance(raw.get("knowledge_refs"), trust),
    }


def _parse_search(raw: dict[str, Any]) -> SearchResult:
    if raw.get("schema_version") == SEARCH_SCHEMA:
        raw = {**raw, "hints": _with_provenance(raw.get("hints"), raw.get("trust"))}
    return _parse(SearchResult, SEARCH_SCHEMA, raw)


def _checked_delivery(context: TurnContext, sent_mode: DeliveryMode | None) -> list[Hint]:
    """Check the delivery echo against what was asked; return the on-demand hints with provenance."""
    echo = context.context.knowledge_delivery
    if sent_mode is None:
        if echo is not None and echo.mode != "inline":
            raise ProtocolViolation(f"a legacy turn came back as {echo.mode!r} delivery")
        return []
    if echo is None:
        raise DeliveryNotConfirmed(f"asked for {sent_mode!r} delivery; the turn has no context.knowledge_delivery")
    if echo.schema_version != DELIVERY_SCHEMA or echo.protocol != PROTOCOL:
        raise UnknownSchema(f"unknown delivery echo {echo.schema_version!r} / {echo.protocol!r}")
    if echo.mode != sent_mode:
        raise DeliveryNotConfirmed(f"asked for {sent_mode!r} delivery; the server echoed {echo.mode!r}")
    if sent_mode == "inline":
        return []
    if context.knowledge or context.knowledge_refs:
        raise ProtocolViolation("an on_demand turn must not carry inline knowledge")
    raw_hints = _with_provenance(echo.hints or [], context.governance.knowledge_trust)
    try:
        return [Hint.model_validate(hint) for hint in raw_hints]
    except ValidationError:
        raise ProtocolViolation("a delivery hint does not have the hint shape") from None


def _plain(value: Any) -> Any:
    """Mappings and sequences as JSON-ready dicts and lists."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Sequence) and not isinstance(value, str):
        return list(value)
    return value
