"""moto's DynamoDB for the local runner (moto 5.2.5, `moto_pin`): what each patch fixes: docs/DESIGN.md,
"moto's patches"; tests/integration/test_moto_dynamodb.py. Development tooling only; never in the layer.
"""

from __future__ import annotations

import contextvars
import copy
import functools
import threading
from typing import Any

from agent_knowledge_dev.moto_pin import Untracked, replace, require_pinned_moto

_LOCK = threading.RLock()
_SCALARS = {"S": str, "N": str, "BOOL": bool, "NULL": bool}
_installed: dict[str, Any] = {}
# The items a Table.query in progress starts from (table, items), and whether it may skip copying
# its results because it projects them (every projection builds new items).
_candidates: contextvars.ContextVar[tuple[Any, list[Any]] | None] = contextvars.ContextVar("candidates", default=None)
_projecting: contextvars.ContextVar[bool] = contextvars.ContextVar("projecting", default=False)


def _wire_form(value: Any) -> bool:
    """True for an AttributeValue dict made only of JSON-native members (recursively)."""
    if not isinstance(value, dict) or len(value) != 1:
        return False
    ((kind, member),) = value.items()
    if kind in _SCALARS:
        return isinstance(member, _SCALARS[kind])
    if kind in {"SS", "NS"}:
        return isinstance(member, list) and all(isinstance(item, str) for item in member)
    if kind == "L":
        return isinstance(member, list) and all(_wire_form(item) for item in member)
    if kind == "M":
        return isinstance(member, dict) and all(
            isinstance(name, str) and _wire_form(item) for name, item in member.items()
        )
    return False


def _serialize_structure(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
    if key and shape.name == "AttributeValue" and _wire_form(value):
        self._default_serialize(serialized, value, shape, key)
        return
    _installed["serialize"](self, serialized, value, shape, key)


def _candidates_of(table: Any, index_name: str | None, hash_key: Any, conditions: Any) -> list[Any] | None:
    """The items moto's Query must look at: the partition's, or for an index the items whose index
    hash attribute has the value asked for (moto evaluated the key condition on every item of the
    table). None: not a query by one hash value (moto's walk)."""
    if not index_name:
        partition = table.items.get(hash_key) if hash_key is not None else None
        return [] if partition is None else list(partition.values()) if table.range_key_attr else [partition]
    index = next((index for index in table.all_indexes() if index.name == index_name), None)
    hashes = [key["AttributeName"] for key in index.schema if key["KeyType"] == "HASH"] if index else []
    if not conditions or len(conditions) != 1 or [conditions[0][0]] != hashes:
        return None
    attribute, value = conditions[0]
    parts = table.items.values()
    items = (item for part in parts for item in (part.values() if table.range_key_attr else [part]))
    return [item for item in items if item.attrs.get(attribute) == value]  # unsorted: moto sorts results


def _projects(table: Any, projection_expressions: Any, index_name: str | None) -> bool:
    """Whether moto's query builds new items for its results (so copying them first is waste)."""
    if projection_expressions:
        return True
    if not index_name:
        return False
    index = next((index for index in table.all_indexes() if index.name == index_name), None)
    kind = (index.projection or {}).get("ProjectionType") if index is not None else None
    return kind in {"KEYS_ONLY", "INCLUDE"}


def _query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
    """`dynamodb.query`: moto's Query, on the candidates only (`_all_items`)."""
    index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
    items = _candidates_of(self, index_name, hash_key, kwargs.get("hash_key_conditions"))
    candidates = _candidates.set((self, items) if items is not None else None)
    try:
        return _installed["query_next"](self, hash_key, *args, **kwargs)
    finally:
        _candidates.reset(candidates)


def _query_projecting(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
    """`dynamodb.copy`: a query that projects its results does not copy them first."""
    index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
    projection_expressions = kwargs.get("projection_expressions", args[5] if len(args) > 5 else None)
    projecting = _projecting.set(_projects(self, projection_expressions, index_name))
    try:
        return _installed["query"](self, hash_key, *args, **kwargs)
    finally:
        _projecting.reset(projecting)


def _all_items(self: Any) -> list[Any]:
    override = _candidates.get()
    if override is not None and override[0] is self:
        return list(override[1])
    return _installed["all_items"](self)


class _TableCopy:
    """`copy` as moto's table module sees it: a query that projects its results skips copying them."""

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    @staticmethod
    def deepcopy(value: Any, memo: Any = None) -> Any:
        if _projecting.get() and type(value) is list:
            return list(value)
        return copy.deepcopy(value, memo)


def _binary(value: Any) -> bool:
    if value.type in {"B", "BS"}:
        return True
    if value.type == "L":
        return any(_binary(member) for member in value.value)
    if value.type == "M":
        return any(_binary(member) for member in value.value.values())
    return False


def _project(self: Any, projection_expressions: list[list[str]]) -> Any:
    from moto.dynamodb.models.dynamo_type import Item, LimitedSizeDict

    names = []
    for expression in projection_expressions:
        if len(expression) != 1 or "[" in expression[0]:
            return _installed["project"](self, projection_expressions)
        names.append(expression[0])
    selected = [(name, self.attrs[name]) for name in dict.fromkeys(names) if name in self.attrs]
    if any(_binary(value) for _, value in selected):
        return _installed["project"](self, projection_expressions)
    projected: Any = Item.__new__(Item)
    projected.hash_key = self.hash_key
    projected.range_key = self.range_key
    # A projection of a stored item is never larger than it: no size check (as Item.__deepcopy__).
    attrs = LimitedSizeDict.__new__(LimitedSizeDict)
    dict.__init__(attrs, ((name, copy.deepcopy(value)) for name, value in selected))
    projected.attrs = attrs
    return projected


def install() -> None:
    """Idempotent. Call after a mock starts (moto's reset tracks instances again)."""
    require_pinned_moto()
    from moto.core.serialize import JSONSerializer
    from moto.dynamodb.models import table
    from moto.dynamodb.models.dynamo_type import Item
    from moto.dynamodb.responses import DynamoHandler

    replace("dynamodb.untracked", Item, "instances_tracked", Untracked())
    if _installed:
        return
    _installed.update(
        call_action=DynamoHandler.call_action,
        serialize=JSONSerializer._serialize_type_structure,
        query=table.Table.query,
        all_items=table.Table.all_items,
        project=Item.project,
    )

    @functools.wraps(_installed["call_action"])
    def call_action(self: Any) -> Any:
        with _LOCK:
            return _installed["call_action"](self)

    replace("dynamodb.lock", DynamoHandler, "call_action", call_action)
    replace("dynamodb.serialize", JSONSerializer, "_serialize_type_structure", _serialize_structure)
    replace("dynamodb.copy", table.Table, "query", _query_projecting)
    _installed["query_next"] = table.Table.query  # `_query_projecting`, unless the bench skips it
    replace("dynamodb.query", table.Table, "query", _query)
    replace("dynamodb.query", table.Table, "all_items", _all_items)
    replace("dynamodb.copy", table, "copy", _TableCopy())  # what `_query_projecting` switches
    replace("dynamodb.copy", Item, "project", _project)
