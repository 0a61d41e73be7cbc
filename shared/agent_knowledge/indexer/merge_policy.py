"""Which segments of a KB's index to merge, and when: size tiers with a bounded count per tier.

A segment's tier is set by its live chunks: tier 0 below TIER_BASE_CHUNKS (one update's segment),
tier t in [TIER_BASE_CHUNKS · FAN_IN^(t-1), TIER_BASE_CHUNKS · FAN_IN^t). When a tier holds
FAN_IN segments, its FAN_IN smallest are merged into one, which lands a tier higher (merges are
checked again after each, lowest tier first). So a merge rewrites chunks of one size class only,
and each chunk is rewritten about once per tier it climbs, never once per update.

Two budgets decide who merges (`agent_knowledge.indexer.segment_passes` runs the merges):

- an incremental update merges only while the merged segment stays under UPDATE_MERGE_MAX_BYTES,
  so what one update uploads stays small whatever came before;
- a merge above that waits for compaction (`indexer/update.compact_kb_index`), which the writer
  starts as its own generation right after the update that made one due, so the update is
  searchable before the larger upload begins. With one-document updates of ~12 chunks that is a
  merge of ~6,000 chunks every 512 updates, then one of ~50,000 every 4,096.

Bound: after every publish (an update and the compaction it may trigger) each tier holds at most
FAN_IN - 1 segments, so a KB of N chunks has at most (FAN_IN - 1) × (tiers(N) + 1) segments, with
tiers(N) = the tier of an N-chunk segment (`segment_bound`): 35 at 10k chunks, 42 at 100k, 49 at
1M, whatever the number of updates. A rebuild's own segments count in their tiers like any other.

FAN_IN is tantivy's: tantivy-py runs tantivy's LogMergePolicy (8 segments per level, every segment
under 10,000 chunks in one level) on every commit and offers no other. A merge is done by showing
tantivy's writer exactly the FAN_IN chosen segments, which its policy then merges natively; every
other commit shows it fewer than FAN_IN segments, so it never merges on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

FAN_IN = 8
TIER_BASE_CHUNKS = 16
# What one incremental update may rewrite by merging (the merged segment's estimated bytes); the
# update also uploads its own segment, delete bitsets and the manifest (~50 KB at 1M chunks).
UPDATE_MERGE_MAX_BYTES = 900_000


@dataclass(frozen=True)
class SegmentSize:
    segment_id: str  # 32 hex digits, as in the segment's file names
    max_doc: int
    alive: int  # chunks not deleted
    size: int  # bytes of its files (delete bitset included)

    @property
    def live_bytes(self) -> int:
        """The bytes a merge would write for it: its size less the deleted chunks' share."""
        return self.size * self.alive // self.max_doc if self.max_doc else 0


def tier(alive: int) -> int:
    level, bound = 0, TIER_BASE_CHUNKS
    while alive >= bound:
        level += 1
        bound *= FAN_IN
    return level


def next_merge(segments: Sequence[SegmentSize], max_bytes: int | None) -> tuple[str, ...] | None:
    """The segments to merge next (FAN_IN of the lowest full tier), or None. A merge whose result
    would exceed `max_bytes` is not proposed, nor any above it (they are larger still)."""
    tiers: dict[int, list[SegmentSize]] = {}
    for segment in segments:
        tiers.setdefault(tier(segment.alive), []).append(segment)
    for level in sorted(tiers):
        members = tiers[level]
        if len(members) < FAN_IN:
            continue
        chosen = sorted(members, key=lambda s: (s.alive, s.segment_id))[:FAN_IN]
        if max_bytes is not None and sum(s.live_bytes for s in chosen) > max_bytes:
            return None
        return tuple(s.segment_id for s in chosen)
    return None


def compaction_due(segments: Sequence[SegmentSize]) -> bool:
    return next_merge(segments, None) is not None


def segment_bound(chunks: int) -> int:
    """The most segments a KB of `chunks` chunks holds after any publish (module docstring)."""
    return (FAN_IN - 1) * (tier(max(chunks, 1)) + 1)
