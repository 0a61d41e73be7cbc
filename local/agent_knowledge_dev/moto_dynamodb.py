"""moto's DynamoDB for the local runner: one request at a time, no growing memory, and less work
per response. Written for moto 5.2.5 (`moto_pin`); `stack.create_stack` installs it for every moto
backend in this process (tests, `serve`).

Correctness (kept whatever they cost or save):

- `dynamodb.lock`: moto's DynamoDB is not safe for concurrent requests. A projected read iterated
  an item's attributes while an UpdateItem on another thread added one ("dictionary changed size
  during iteration", seen in tests/reliability/test_consistency.py); TransactWriteItems deep-copies
  the tables it touches and restores the copy when a condition fails, losing a write another thread
  made in between; conditional writes check, then write, unlocked, so two writers could both win
  (the index publish and the document writes rely on exactly one winning). One lock around moto's
  request handler (parsing, backend, response) removes all three; the GIL already ran moto's
  Python one thread at a time, so little concurrency is lost.
- `dynamodb.untracked`: every item moto creates, each copy a query returns included, was kept for
  good in a class-level list (`instances_tracked`, for moto's dashboard), so a long `serve` grew by
  every copy it ever made. Items are no longer tracked.

Speed (bench/README.md, "moto patches (issue 37)": together with `s3.listing` they buy more than
10 % of a bulk ingest's CPU; `dynamodb.query`, `dynamodb.item_size` and `s3.listing` grow with the
table, the item and the bucket, so their share grows with the folder):

- `dynamodb.serialize`: moto serializes every response member by member through the botocore
  shape model (~50 µs per attribute; a document record carries lists of hundreds of chunk
  digests). An `AttributeValue` in wire form without binary (which moto base64-codes) is its own
  serialization: emitted as is.
- `dynamodb.query`: Query walked every item of the table (`Table.all_items()`), also for one
  partition or one key of a global secondary index (the indexer's sparse `pending` index). Here a
  table query starts from its partition, an index query from that index key's items: each table
  keeps, for each global secondary index with one hash key, the keys of the items that have the
  index's attributes (built on the first query, added to by PutItem and UpdateItem, dropped when a
  query meets an entry whose item lost them; rebuilt after PartiQL and transactions). moto's own
  code still does the rest (conditions, order, pages, filters).
- `dynamodb.item_size`: moto's `LimitedSizeDict` summed the size of every attribute so far on each
  insert (quadratic in the attributes); the 400 KB check is made once per item. Same limit, same
  error.
- `dynamodb.copy`: a Query deep-copied every item it returns, chunk lists included, before
  projecting it onto the few attributes asked for, and `Item.project` turned the whole item into
  JSON once per projected attribute. A projected query copies only what it returns, and a
  projection of top-level attributes copies just those (nested paths and binary take moto's way).

Answers are unchanged: tests/integration/test_moto_dynamodb.py compares them with moto's own code
(`moto_pin.unpatched`). Development tooling only; never in the layer.
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
# moto's `LimitedSizeDict` limit (DynamoDB's 400 KB, as moto measures it).
ITEM_SIZE_LIMIT = 405000


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
    index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
    projection_expressions = kwargs.get("projection_expressions", args[5] if len(args) > 5 else None)
    conditions = kwargs.get("hash_key_conditions")
    if index_name:
        items = _index_items(self, index_name, conditions) if any(self.global_indexes) else None
        if items is None and conditions and len(conditions) == 1 and conditions[0][0] == self.hash_key_attr:
            items = _partition(self, conditions[0][1])  # a local index: same partition key as the table
    else:
        items = _partition(self, hash_key) if hash_key is not None else None
    candidates = _candidates.set((self, items) if items is not None else None)
    projecting = _projecting.set(_projects(self, projection_expressions, index_name))
    try:
        return _installed["query"](self, hash_key, *args, **kwargs)
    finally:
        _candidates.reset(candidates)
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


def _value_size(value: Any) -> int:
    """`DynamoType.size()` (what moto counts against a Query page's 1 MB and an item's 400 KB),
    without building a DynamoType per set member or map value."""
    kind, member = value.type, value.value
    if kind == "N":
        return len(str(member))
    if kind == "L":
        return sum(_value_size(item) for item in member)
    if kind == "M":
        return sum(len(name.encode("utf-8")) + _value_size(item) for name, item in member.items())
    if kind == "NS":
        return sum(len(str(item)) for item in member)
    if kind in {"SS", "BS"}:
        return sum(len(item if isinstance(item, bytes) else item.encode("utf-8")) for item in member)
    if isinstance(member, bool):
        return 1
    return len(member if isinstance(member, bytes) else member.encode("utf-8"))


def _item_size(self: Any) -> int:
    return sum(len(name.encode("utf-8")) + _value_size(value) for name, value in self.attrs.items())


def _item_init(self: Any, hash_key: Any, range_key: Any, attrs: dict[str, Any]) -> None:
    """`Item.__init__` with the 400 KB check made once for the whole item: moto's `LimitedSizeDict`
    summed the size of every attribute so far on each insert (quadratic in the attributes, and a
    document record carries long chunk lists). Same limit, same error."""
    from moto.dynamodb.exceptions import ItemSizeTooLarge
    from moto.dynamodb.models.dynamo_type import DynamoType, LimitedSizeDict

    self.hash_key = hash_key
    self.range_key = range_key
    values = {key: DynamoType(value) for key, value in attrs.items()}
    if sum(len(key.encode("utf-8")) + _value_size(value) for key, value in values.items()) > ITEM_SIZE_LIMIT:
        raise ItemSizeTooLarge
    self.attrs = LimitedSizeDict.__new__(LimitedSizeDict)
    dict.update(self.attrs, values)


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
    replace("dynamodb.query", table.Table, "query", _query)  # also what `dynamodb.copy` needs
    for owner, name, replacement in (
        (table.Table, "all_items", _all_items),
        (table.Table, "put_item", _put_item),
        (DynamoDBBackend, "update_item", _update_item),
    ):
        replace("dynamodb.query", owner, name, replacement)
    for name in ("execute_statement", "execute_transaction", "batch_execute_statement"):
        _installed[name] = getattr(DynamoDBBackend, name)
        replace("dynamodb.query", DynamoDBBackend, name, _forgetting(name))
    replace("dynamodb.copy", table, "copy", _TableCopy())
    replace("dynamodb.copy", Item, "project", _project)
    replace("dynamodb.item_size", Item, "size", _item_size)
    replace("dynamodb.item_size", Item, "__init__", _item_init)
