"""How large a KB's index the deployed functions can hold, and how large an index is (no tantivy here:
`kb status` reads it without opening an index).

The hard ceiling is each function's ephemeral storage (/tmp), where `local_files` keeps the index:

- a search (or turns, MCP) container holds one copy of the index of every KB it serves, plus the
  new files of a generation while it syncs (an update's few; a rebuild's all, but then the old
  copy is let go of first), and `local_files.ROOM_MARGIN_BYTES` left free: one KB of up to
  storage − margin;
- the indexer holds the KB's current generation and writes the next beside it: an update adds a
  segment and what it merges, a compaction at most the tier it merges, but a full rebuild (a schema
  change, `kb reindex`) a whole second copy: up to (storage − margin) / 2.

The largest index the deployment serves is the smaller of the two. The sizes come from the
template's parameters (`SearchEphemeralStorageSize`, `IndexerEphemeralStorageSize`), passed to every
function as SEARCH_EPHEMERAL_STORAGE_MB and INDEXER_EPHEMERAL_STORAGE_MB; a process without them
(the local runner) assumes the template's defaults. Containers never trust these numbers for the
guard itself: `local_files` checks the free space it actually has before downloading.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

DEFAULT_EPHEMERAL_STORAGE_MB = 2048  # template.yaml's default for search, turns and the indexer
# Free space kept beyond a generation's files: the one value of local_files.ROOM_MARGIN_BYTES.
MARGIN_BYTES = 16 * 1024 * 1024
MB = 1024 * 1024


@dataclass(frozen=True)
class Sizing:
    search_storage_mb: int
    indexer_storage_mb: int

    @property
    def largest_index_bytes(self) -> int:
        search = self.search_storage_mb * MB - MARGIN_BYTES
        indexer = (self.indexer_storage_mb * MB - MARGIN_BYTES) // 2
        return max(0, min(search, indexer))


def _storage_mb(name: str) -> int:
    raw = os.environ.get(name, "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_EPHEMERAL_STORAGE_MB


def deployed_sizing() -> Sizing:
    return Sizing(_storage_mb("SEARCH_EPHEMERAL_STORAGE_MB"), _storage_mb("INDEXER_EPHEMERAL_STORAGE_MB"))


def manifest_index_bytes(data: bytes) -> int | None:
    """The bytes of the generation a manifest describes (its `index_bytes`, or the sum of its files'
    sizes for a manifest of an earlier format); None if it cannot be read."""
    try:
        raw = json.loads(data)
        if isinstance(raw.get("index_bytes"), int):
            return int(raw["index_bytes"])
        return sum(int(entry["size"]) for entry in raw["files"].values())
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
