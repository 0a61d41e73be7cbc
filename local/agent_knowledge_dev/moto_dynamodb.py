"""moto's DynamoDB for the local runner, written for moto 5.2.5 (`moto_pin`): `dynamodb.lock`,
`dynamodb.untracked`, `dynamodb.serialize`, `dynamodb.query`, `dynamodb.copy`. What each fixes and
its test: docs/DESIGN.md, "moto's patches"; tests/integration/test_moto_dynamodb.py (answers compared
with moto's own, `moto_pin.unpatched`). Development tooling only; never in the layer.
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
_INDEX_KEYS = "_agent_knowledge_index_keys"
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


def _index_shape(index: Any) -> tuple[str, tuple[str, ...]] | None:
    """(hash attribute, range attributes) of a global secondary index with one hash key."""
    hashes = [key["AttributeName"] for key in index.schema if key["KeyType"] == "HASH"]
    ranges = tuple(key["AttributeName"] for key in index.schema if key["KeyType"] == "RANGE")
    return (hashes[0], ranges) if len(hashes) == 1 else None


class _IndexKeys:
    """For each global secondary index of a table: index hash value → keys of the items in it."""

    def __init__(self, table: Any) -> None:
        self.signature = _signature(table)
        self.shapes = {
            index.name: shape for index in table.global_indexes if (shape := _index_shape(index)) is not None
        }
        self.keys: dict[str, dict[Any, set[tuple[Any, Any]]]] = {name: {} for name in self.shapes}
        for item in table.all_items():
            self.add(item)

    def add(self, item: Any) -> None:
        for name, (hash_attribute, range_attributes) in self.shapes.items():
            value = item.attrs.get(hash_attribute)
            if value is not None and all(item.attrs.get(attribute) for attribute in range_attributes):
                self.keys[name].setdefault(value, set()).add((item.hash_key, item.range_key))


def _signature(table: Any) -> tuple[Any, ...]:
    return tuple((index.name, repr(index.schema)) for index in table.global_indexes)


def _index_keys(table: Any) -> _IndexKeys:
    found = table.__dict__.get(_INDEX_KEYS)
    if found is None or found.signature != _signature(table):
        found = table.__dict__[_INDEX_KEYS] = _IndexKeys(table)
    return found


def _stored(table: Any, key: tuple[Any, Any]) -> Any:
    hash_key, range_key = key
    partition = table.items.get(hash_key)
    if partition is None:
        return None
    return partition.get(range_key) if table.range_key_attr else partition


def _partition(table: Any, hash_key: Any) -> list[Any]:
    partition = table.items.get(hash_key)
    if partition is None:
        return []
    return list(partition.values()) if table.range_key_attr else [partition]


def _index_items(table: Any, index_name: str, conditions: list[tuple[str, Any]] | None) -> list[Any] | None:
    """The items of the index key the query names; None when this is not such a query."""
    registry = _index_keys(table)
    shape = registry.shapes.get(index_name)
    if shape is None or not conditions or len(conditions) != 1 or conditions[0][0] != shape[0]:
        return None
    hash_attribute, range_attributes = shape
    value = conditions[0][1]
    keys = registry.keys[index_name].get(value, set())
    items = []
    for key in list(keys):
        item = _stored(table, key)
        if (
            item is None
            or item.attrs.get(hash_attribute) != value
            or not all(item.attrs.get(attribute) for attribute in range_attributes)
        ):
            keys.discard(key)
        else:
            items.append(item)
    return items


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
    """`dynamodb.query`: the items moto's query walks are the partition's or the index key's."""
    index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
    conditions = kwargs.get("hash_key_conditions")
    if index_name:
        items = _index_items(self, index_name, conditions) if any(self.global_indexes) else None
        if items is None and conditions and len(conditions) == 1 and conditions[0][0] == self.hash_key_attr:
            items = _partition(self, conditions[0][1])  # a local index: same partition key as the table
    else:
        items = _partition(self, hash_key) if hash_key is not None else None
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


def _put_item(self: Any, *args: Any, **kwargs: Any) -> Any:
    item = _installed["put_item"](self, *args, **kwargs)
    registry = self.__dict__.get(_INDEX_KEYS)
    if registry is not None and item is not None:
        registry.add(item)
    return item


def _update_item(self: Any, table_name: str, *args: Any, **kwargs: Any) -> Any:
    item = _installed["update_item"](self, table_name, *args, **kwargs)
    registry = self.get_table(table_name).__dict__.get(_INDEX_KEYS)
    if registry is not None and item is not None:
        registry.add(item)
    return item


def _forgetting(name: str) -> Any:
    """A backend method that may change items some other way: every table's index keys are rebuilt
    on their next query."""
    original = _installed[name]

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, *args, **kwargs)
        finally:
            for table in list(self.tables.values()):
                table.__dict__.pop(_INDEX_KEYS, None)

    return method


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
    from moto.dynamodb.models import DynamoDBBackend, table
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
        put_item=table.Table.put_item,
        update_item=DynamoDBBackend.update_item,
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
    for owner, name, replacement in (
        (table.Table, "all_items", _all_items),
        (table.Table, "put_item", _put_item),
        (DynamoDBBackend, "update_item", _update_item),
    ):
        replace("dynamodb.query", owner, name, replacement)
    for name in ("execute_statement", "execute_transaction", "batch_execute_statement"):
        _installed[name] = getattr(DynamoDBBackend, name)
        replace("dynamodb.query", DynamoDBBackend, name, _forgetting(name))
    replace("dynamodb.copy", table, "copy", _TableCopy())  # what `_query_projecting` switches
    replace("dynamodb.copy", Item, "project", _project)
