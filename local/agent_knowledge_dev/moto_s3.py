"""moto's S3 for the local runner: events complete enough for the ingestion pipeline, and prefix
listings that read only the prefix. Written for moto 5.2.5 (`moto_pin`); `stack.create_stack`
installs it for every moto backend in this process.

- `s3.events` (correctness): moto delivers a bucket's notifications to SQS from the bucket's
  notification configuration (which `stack.create_stack` sets from template.yaml), but its events lack what the
  pipeline relies on, as S3 sends it: `s3.object.sequencer`, which orders the events of one key
  (moto sends none to SQS); `s3.object.versionId` in a versioned bucket; and
  `ObjectRemoved:DeleteMarkerCreated`: deleting a key of a versioned bucket (the normal delete,
  `aws s3 rm`, `aws s3 sync --delete`) sends no event at all in moto. These are filled in, in
  moto's own process; delivery stays moto's. Sequencers come from one counter, taken when the
  event is built, just after moto stored the object. Without them the ingest function cannot
  order a key's events, and no delete of a versioned key ever reaches the index.

- `s3.ranges` (speed): moto answered a ranged GET by reading the whole object and slicing it: an
  18 KB range of a 28 MB object took 12 ms on an idle machine, and a cold search's ranged reads
  of a 541 MB vector file 12 s (bench/README.md, "The cold path (issue 36)"). A GET of one byte
  range (`bytes=A-` or `bytes=A-B`, B >= A) now hands moto's range code the object as a view that
  reads only the slice it asks for; any other GET (whole, suffix, several ranges, a part number)
  is moto's own.

- `s3.listing` (speed, bench/README.md "moto patches (issue 37)"): ListObjects(V2) with a prefix
  walked every key of the bucket (and again for each page). Each bucket's key names are kept
  sorted (`bisect`) and a listing reads the prefix's range; without a prefix, moto's own code.

Tests: tests/integration/test_moto_s3.py. Development tooling only; never in the layer.
"""

from __future__ import annotations

import bisect
import contextvars
import itertools
import re
import threading
from typing import Any

from agent_knowledge_dev.moto_pin import replace, require_pinned_moto

_NAMES = "_agent_knowledge_sorted_names"
_names_lock = threading.Lock()
_sequencer_lock = threading.Lock()
_counter = itertools.count(1)
_installed: dict[str, Any] = {}


def next_sequencer() -> str:
    with _sequencer_lock:
        return f"{next(_counter):018X}"


# -- events -------------------------------------------------------------------------------------


def _get_s3_event(event_name: str, bucket: Any, key: Any, notification_id: str) -> dict[str, Any]:
    from moto.s3 import notifications

    event = _installed["get_s3_event"](event_name, bucket, key, notification_id)
    for record in event["Records"]:
        found = record["s3"]["object"]
        found["sequencer"] = next_sequencer()
        version_id = getattr(key, "version_id", None)
        if bucket.is_versioned and version_id and version_id != "null":
            found["versionId"] = str(version_id)
        if event_name == notifications.S3NotificationEvent.OBJECT_REMOVED_DELETE_MARKER_CREATED_EVENT:
            found.pop("size", None)
            found.pop("eTag", None)
    return event


def _set_delete_marker(self: Any, bucket_name: str, key_name: str) -> Any:
    from moto.s3 import notifications

    marker = _installed["set_delete_marker"](self, bucket_name, key_name)
    notifications.send_event(
        self.account_id,
        notifications.S3NotificationEvent.OBJECT_REMOVED_DELETE_MARKER_CREATED_EVENT,
        self.get_bucket(bucket_name),
        _DeleteMarkerKey(key_name, marker.version_id),
    )
    return marker


class _DeleteMarkerKey:
    """What moto's event builder reads of a key, for a delete marker."""

    def __init__(self, name: str, version_id: str) -> None:
        self.name = name
        self.version_id = version_id
        self.size = 0
        self.etag = ""


# -- listing by prefix -------------------------------------------------------------------------


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


# -- ranged reads -----------------------------------------------------------------------------

# The ranges moto's `_handle_range_header` answers by slicing the body (others it answers whole).
_ONE_RANGE = re.compile(r"bytes=(\d+)-(\d*)")
_ranged_read = contextvars.ContextVar("agent_knowledge_ranged_read", default=False)


class _KeyBytes:
    """A stored object as moto's range code reads its body: a length and one slice."""

    def __init__(self, key: Any) -> None:
        self.key = key

    def __len__(self) -> int:
        return int(self.key.size)

    def __getitem__(self, part: slice) -> bytes:
        start, stop, _ = part.indices(len(self))
        with self.key.lock:
            self.key._value_buffer.seek(start)
            return bytes(self.key._value_buffer.read(max(0, stop - start)))


def _key_value(self: Any) -> Any:
    """`FakeKey.value`: the bytes, or a view of them while a one-range GET is answered."""
    if _ranged_read.get():
        return _KeyBytes(self)
    return _installed["value"].fget(self)


def _get_object(self: Any) -> Any:
    match = _ONE_RANGE.fullmatch(self.headers.get("range") or "")
    one_range = match is not None and (not match.group(2) or int(match.group(2)) >= int(match.group(1)))
    if not one_range or "partNumber" in self.querystring:
        return _installed["get_object"](self)
    token = _ranged_read.set(True)
    try:
        return _installed["get_object"](self)
    finally:
        _ranged_read.reset(token)


# -- install ------------------------------------------------------------------------------------


def install() -> None:
    """Idempotent."""
    require_pinned_moto()
    from moto.s3 import models, notifications, responses
    from moto.s3.utils import _VersionedKeyStore

    if _installed:
        return
    _installed.update(
        get_s3_event=notifications._get_s3_event,
        set_delete_marker=models.S3Backend._set_delete_marker,
        setitem=_VersionedKeyStore.__setitem__,
        setlist=_VersionedKeyStore.setlist,
        pop=_VersionedKeyStore.pop,
        list_objects=models.S3Backend.list_objects,
        value=models.FakeKey.value,
        get_object=responses.S3Response.get_object,
    )
    replace("s3.events", notifications, "_get_s3_event", _get_s3_event)
    replace("s3.events", models.S3Backend, "_set_delete_marker", _set_delete_marker)
    for owner, name, replacement in (
        (_VersionedKeyStore, "__setitem__", _store_setitem),
        (_VersionedKeyStore, "setlist", _store_setlist),
        (_VersionedKeyStore, "pop", _store_pop),
        (_VersionedKeyStore, "__delitem__", _store_delitem),
        (models.S3Backend, "list_objects", _list_objects),
    ):
        replace("s3.listing", owner, name, replacement)
    replace("s3.ranges", models.FakeKey, "value", property(_key_value, _installed["value"].fset))
    replace("s3.ranges", responses.S3Response, "get_object", _get_object)
