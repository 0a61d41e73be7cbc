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

The largest index the deployment serves is the smaller of the two. The sizes are the settings'
sizing section (`settings.SizingSettings`: the template's `SearchEphemeralStorageSize` and
`IndexerEphemeralStorageSize`). Containers never trust these numbers for the guard itself:
`local_files` checks the free space it actually has before downloading.
"""

from __future__ import annotations

import json

from agent_knowledge.settings import SizingSettings

# Free space kept beyond a generation's files: the one value of local_files.ROOM_MARGIN_BYTES.
MARGIN_BYTES = 16 * 1024 * 1024
MB = 1024 * 1024


def largest_index_bytes(sizing: SizingSettings) -> int:
    """The largest index both the search functions and the indexer's rebuild can hold."""
    search = sizing.search_storage_mb * MB - MARGIN_BYTES
    indexer = (sizing.indexer_storage_mb * MB - MARGIN_BYTES) // 2
    return max(0, min(search, indexer))


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
