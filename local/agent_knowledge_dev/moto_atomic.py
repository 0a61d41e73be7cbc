"""DynamoDB's conditional writes are atomic; moto's are not across threads (it checks the condition,
then writes, with no lock). The index publish (`KnowledgeBaseRepository.publish_index`) and the
document writes rely on that atomicity, so the local stack serializes moto's DynamoDB writes with
one lock: concurrent writers then see what they would see on AWS (one wins, the other's condition
fails). Installed for every moto backend running in this process; idempotent.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

WRITES = ("put_item", "update_item", "delete_item", "batch_write_item", "transact_write_items")
_lock = threading.RLock()
_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    from moto.dynamodb.models import DynamoDBBackend

    for name in WRITES:
        original = getattr(DynamoDBBackend, name)

        @functools.wraps(original)
        def locked(self: Any, *args: Any, __original: Any = original, **kwargs: Any) -> Any:
            with _lock:
                return __original(self, *args, **kwargs)

        setattr(DynamoDBBackend, name, locked)
    _installed = True
