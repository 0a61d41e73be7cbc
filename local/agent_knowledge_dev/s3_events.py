"""S3 event notifications on moto, complete enough for the ingestion pipeline.

moto 5.2.5 delivers a bucket's notifications to SQS from the bucket's notification configuration
(which `stack.create_stack` sets from template.yaml), but its events lack what the pipeline
relies on, as S3 sends it:

- `s3.object.sequencer`, which orders the events of one key (moto sends none to SQS);
- `s3.object.versionId` in a versioned bucket;
- `ObjectRemoved:DeleteMarkerCreated`: deleting a key of a versioned bucket (the normal delete,
  `aws s3 rm`, `aws s3 sync --delete`) sends no event at all in moto.

`install()` fills these in, in moto's own process (in-process `mock_aws` or the moto server that
`serve` runs): delivery stays moto's, through the same configuration. Sequencers come from one
counter, taken when the event is built, just after moto stored the object. Development tooling
only; never in the layer.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from agent_knowledge_dev.moto_pin import require_pinned_moto

_lock = threading.Lock()
_counter = itertools.count(1)
_original: dict[str, Any] = {}


def next_sequencer() -> str:
    with _lock:
        return f"{next(_counter):018X}"


def install() -> None:
    """Idempotent; patches moto's S3 notification builder and delete-marker creation."""
    require_pinned_moto()
    from moto.s3 import models, notifications

    if _original:
        return
    _original["get_s3_event"] = notifications._get_s3_event
    _original["set_delete_marker"] = models.S3Backend._set_delete_marker

    def get_s3_event(event_name: str, bucket: Any, key: Any, notification_id: str) -> dict[str, Any]:
        event = _original["get_s3_event"](event_name, bucket, key, notification_id)
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

    def set_delete_marker(self: Any, bucket_name: str, key_name: str) -> Any:
        marker = _original["set_delete_marker"](self, bucket_name, key_name)
        notifications.send_event(
            self.account_id,
            notifications.S3NotificationEvent.OBJECT_REMOVED_DELETE_MARKER_CREATED_EVENT,
            self.get_bucket(bucket_name),
            _DeleteMarkerKey(key_name, marker.version_id),
        )
        return marker

    notifications._get_s3_event = get_s3_event
    models.S3Backend._set_delete_marker = set_delete_marker


class _DeleteMarkerKey:
    """What moto's event builder reads of a key, for a delete marker."""

    def __init__(self, name: str, version_id: str) -> None:
        self.name = name
        self.version_id = version_id
        self.size = 0
        self.etag = ""
