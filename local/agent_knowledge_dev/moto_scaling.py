"""moto's DynamoDB and S3 without work that grows with the table or the bucket on every call.

The local pipeline and `--wait` call moto thousands of times while a folder of thousands of
documents goes in; in moto 5.2.5 each of those calls paid for the whole table or bucket:

1. DynamoDB Query walks every item of the table (`Table.all_items()`), also to answer one
   partition (`kb_id = :kb`) or one key of a global secondary index (the indexer's `pending`
   index, read on every batch). Here a table query starts from its partition and an index query
   from that index's key: each table keeps, for each global secondary index with one hash key, the
   keys of the items that have the index's key attributes (`_IndexKeys`: built from the items on
   the first query of the index, then added to by every PutItem and UpdateItem; an entry whose
   item lost the attributes or is gone is dropped when a query meets it, so it may hold too much
   but never too little). moto's own code still does the rest (conditions, order, pages, filters).
2. A Query deep-copies every item it returns, chunk lists included, before projecting it onto the
   few attributes asked for; and `Item.project` turns the whole item into plain JSON once per
   projected attribute. Here a projected query copies only what it returns, and a projection of
   top-level attributes copies just those (nested paths and binary values take moto's way).
3. Every DynamoDB item and SQS message moto creates — each item copy a query returns included —
   was kept for good in a class-level list (`BaseModel.instances_tracked`, for moto's dashboard),
   so `serve` grew by every copy it ever made. Items and messages are no longer tracked (S3 keys
   still are: moto disposes of their temporary files through that list).
4. S3 ListObjects(V2) with a prefix walks every key of the bucket (and again for each page).
   Here each bucket's key names are kept sorted (`bisect`) and a listing reads the prefix's range.
5. In-process moto (tests, benchmarks) re-imports `moto.s3.urls` on every S3 request, to pick
   up `MOTO_S3_CUSTOM_ENDPOINTS`; it is re-imported only when that variable changes.

Answers are unchanged (tests/integration/test_moto_scaling.py compares them with moto's own
paths). Installed with the other patches by `stack.create_stack`, for every moto backend in
this process (tests, `serve`); DynamoDB requests are already one at a time (`moto_threads`).
Development tooling only; never in the layer.
"""

from __future__ import annotations

import bisect
import contextvars
import copy
import os
import threading
from typing import Any

from agent_knowledge_dev.moto_pin import require_pinned_moto

_INDEX_KEYS = "_agent_knowledge_index_keys"
_NAMES = "_agent_knowledge_sorted_names"
_installed: dict[str, Any] = {}
# The items a Table.query in progress starts from (table, items), and whether it may skip copying
# its results because it projects them (every projection builds new items).
_candidates: contextvars.ContextVar[tuple[Any, list[Any]] | None] = contextvars.ContextVar("candidates", default=None)
_projecting: contextvars.ContextVar[bool] = contextvars.ContextVar("projecting", default=False)
_names_lock = threading.Lock()
_UNSET = object()
# moto's `LimitedSizeDict` limit (DynamoDB's 400 KB, as moto measures it).
ITEM_SIZE_LIMIT = 405000


class _Untracked(list[Any]):
    """A class's `instances_tracked` that keeps nothing."""

    def append(self, item: Any) -> None:
        pass


# -- DynamoDB -----------------------------------------------------------------------------------


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


# -- S3 -----------------------------------------------------------------------------------------


def _sorted_names(store: Any) -> list[str]:
    """The key names of a bucket, sorted (call with `_names_lock` held); rebuilt when the count
    says a name came or went some way the patches below do not see."""
    names = store.__dict__.get(_NAMES)
    if names is None or len(names) != dict.__len__(store):
        names = store.__dict__[_NAMES] = sorted(dict.keys(store))
    return names


def _name_added(store: Any, key: str, new: bool) -> None:
    if new:
        with _names_lock:
            names = store.__dict__.get(_NAMES)
            if names is not None:
                bisect.insort(names, key)


def _name_removed(store: Any, key: str) -> None:
    with _names_lock:
        names = store.__dict__.get(_NAMES)
        if names is not None:
            index = bisect.bisect_left(names, key)
            if index < len(names) and names[index] == key:
                del names[index]


def _store_setitem(self: Any, key: str, value: Any) -> Any:
    new = not dict.__contains__(self, key)
    result = _installed["setitem"](self, key, value)
    _name_added(self, key, new)
    return result


def _store_setlist(self: Any, key: str, list_: Any) -> Any:
    new = not dict.__contains__(self, key)
    result = _installed["setlist"](self, key, list_)
    _name_added(self, key, new)
    return result


def _store_pop(self: Any, key: str) -> Any:
    result = _installed["pop"](self, key)
    _name_removed(self, key)
    return result


def _store_delitem(self: Any, key: str) -> None:
    dict.__delitem__(self, key)
    _name_removed(self, key)


def _list_objects(
    self: Any, bucket: Any, prefix: str | None, delimiter: str | None, marker: str | None, max_keys: int | None
) -> Any:
    from moto.s3.models import FakeDeleteMarker, FakeTableStorageBucket

    if not prefix or isinstance(bucket, FakeTableStorageBucket):
        return _installed["list_objects"](self, bucket, prefix, delimiter, marker, max_keys)
    store = bucket.keys
    with _names_lock:
        names = _sorted_names(store)
        start = bisect.bisect_left(names, prefix)
        matching = []
        for name in names[start:]:
            if not name.startswith(prefix):
                break
            matching.append(name)
    # From here on, moto's `list_objects` for a prefix.
    key_results = set()
    folder_results = set()
    for key_name in matching:
        key = store.get(key_name)
        if key is None:
            continue
        key_without_prefix = key_name.replace(prefix, "", 1)
        if delimiter and delimiter in key_without_prefix:
            folder_results.add(f"{prefix}{key_without_prefix.split(delimiter)[0]}{delimiter}")
        else:
            key_results.add(key)
    results = sorted((key for key in key_results if not isinstance(key, FakeDeleteMarker)), key=lambda key: key.name)
    folders = sorted(folder_results)
    if marker:
        limit = self._pagination_tokens.get(marker) or marker
        results = self._get_results_from_token(results, limit)
    if max_keys is not None:
        results, is_truncated, next_marker = self._truncate_result(results, max_keys)
    else:
        is_truncated, next_marker = False, None
    return results, folders, is_truncated, next_marker


def _url_module(self: Any) -> Any:
    import importlib

    import moto.s3.urls as module

    endpoints = os.environ.get("MOTO_S3_CUSTOM_ENDPOINTS")
    if _installed.get("urls_for", _UNSET) != endpoints:
        importlib.reload(module)
        _installed["urls_for"] = endpoints
    return module


# -- install ------------------------------------------------------------------------------------


def install() -> None:
    """Idempotent. Call after a mock starts (moto's reset tracks instances again)."""
    require_pinned_moto()
    from moto.dynamodb.models import DynamoDBBackend, table
    from moto.dynamodb.models.dynamo_type import Item
    from moto.s3.models import S3Backend
    from moto.s3.utils import _VersionedKeyStore
    from moto.sqs.models import Message

    Item.instances_tracked = _Untracked()  # type: ignore[attr-defined]
    Message.instances_tracked = _Untracked()  # type: ignore[attr-defined]
    if _installed:
        return
    Table = table.Table
    _installed.update(
        query=Table.query,
        all_items=Table.all_items,
        put_item=Table.put_item,
        update_item=DynamoDBBackend.update_item,
        project=Item.project,
        size=Item.size,
        item_init=Item.__init__,
        setitem=_VersionedKeyStore.__setitem__,
        setlist=_VersionedKeyStore.setlist,
        pop=_VersionedKeyStore.pop,
        list_objects=S3Backend.list_objects,
    )
    for name in ("execute_statement", "execute_transaction", "batch_execute_statement"):
        _installed[name] = getattr(DynamoDBBackend, name)
        setattr(DynamoDBBackend, name, _forgetting(name))
    patches: list[tuple[Any, str, Any]] = [
        (Table, "query", _query),
        (Table, "all_items", _all_items),
        (Table, "put_item", _put_item),
        (DynamoDBBackend, "update_item", _update_item),
        (Item, "project", _project),
        (Item, "size", _item_size),
        (Item, "__init__", _item_init),
        (table, "copy", _TableCopy()),
        (_VersionedKeyStore, "__setitem__", _store_setitem),
        (_VersionedKeyStore, "setlist", _store_setlist),
        (_VersionedKeyStore, "pop", _store_pop),
        (_VersionedKeyStore, "__delitem__", _store_delitem),
        (S3Backend, "list_objects", _list_objects),
        (S3Backend, "_url_module", property(_url_module)),
    ]
    for owner, name, replacement in patches:
        setattr(owner, name, replacement)
