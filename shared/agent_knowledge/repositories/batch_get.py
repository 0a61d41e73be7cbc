"""Several records in one round trip: one BatchGetItem across tables (docs/DESIGN.md §2, issue 16).

On AWS a request's latency is the sum of its sequential round trips, so records that do not
depend on each other (a session and a route; a client and the route's knowledge bases) are read
together. Every read is strongly consistent: nothing mutable is cached, each call reads fresh.

Each repository describes a read as a `Lookup` (table, key, how to parse the item, which store to
name when it fails); `batch_get` answers the lookups in order, None for a record that does not
exist.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from agent_knowledge.errors import KnowledgeUnavailable
from agent_knowledge.repositories.aws_errors import storage_errors
from agent_knowledge.repositories.dynamo import from_item

RecordT = TypeVar("RecordT")

# DynamoDB's limit per BatchGetItem, and our bound on re-asking for unprocessed keys (throttling).
MAX_KEYS = 100
MAX_ROUNDS = 5


@dataclass(frozen=True)
class Lookup(Generic[RecordT]):
    table: str
    key: dict[str, Any]  # the item's key as attribute values, e.g. {"pk": {"S": "route#demo"}}
    parse: Callable[[dict[str, Any]], RecordT]  # the deserialized item → record
    store: str  # named in the error when the read fails, e.g. "session storage"
    # Only these attributes are read (key attributes are added); empty reads the whole item.
    projection: tuple[str, ...] = ()


def _identity(table: str, key: dict[str, Any]) -> tuple[str, str]:
    return table, json.dumps(key, sort_keys=True)


def _request(lookups: list[Lookup[Any]]) -> dict[str, Any]:
    """RequestItems: the distinct keys of each table, with the union of the lookups' projections."""
    request: dict[str, Any] = {}
    seen: set[tuple[str, str]] = set()
    projections: dict[str, set[str] | None] = {}
    for lookup in lookups:
        identity = _identity(lookup.table, lookup.key)
        entry = request.setdefault(lookup.table, {"Keys": [], "ConsistentRead": True})
        if identity not in seen:
            seen.add(identity)
            entry["Keys"].append(lookup.key)
        wanted = set(lookup.projection) | set(lookup.key) if lookup.projection else None
        previous = projections.get(lookup.table, set())
        projections[lookup.table] = None if wanted is None or previous is None else previous | wanted
    for table, attributes in projections.items():
        if attributes:
            names = {f"#p{index}": name for index, name in enumerate(sorted(attributes))}
            request[table]["ProjectionExpression"] = ", ".join(names)
            request[table]["ExpressionAttributeNames"] = names
    return request


def batch_get(dynamodb: Any, lookups: Sequence[Lookup[Any] | None]) -> list[Any]:
    """The record of each lookup, in order (None for a lookup that is None or finds nothing)."""
    wanted = [lookup for lookup in lookups if lookup is not None]
    if not wanted:
        return [None] * len(lookups)
    found: dict[tuple[str, str], dict[str, Any]] = {}
    key_names = {lookup.table: tuple(lookup.key) for lookup in wanted}
    store = wanted[0].store
    for start in range(0, len(wanted), MAX_KEYS):
        request = _request(wanted[start : start + MAX_KEYS])
        for _ in range(MAX_ROUNDS):
            with storage_errors(store):
                response = dynamodb.batch_get_item(RequestItems=request)
            for table, items in response.get("Responses", {}).items():
                for item in items:
                    key = {name: item[name] for name in key_names[table]}
                    found[_identity(table, key)] = item
            request = response.get("UnprocessedKeys") or {}
            if not request:
                break
        else:
            raise KnowledgeUnavailable.of(store)
    results: list[Any] = []
    for lookup in lookups:
        item = found.get(_identity(lookup.table, lookup.key)) if lookup is not None else None
        results.append(lookup.parse(from_item(item)) if lookup is not None and item is not None else None)
    return results
