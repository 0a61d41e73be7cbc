"""Figure 4 — peak RSS of a search container with a 10k and a 100k chunk index loaded.

Each measurement is a fresh process (`bench.memory_child`): import the search handler, load
the published index as a cold container does, run queries; the peak resident set (VmHWM) is the
number Lambda bills against `MemorySize`. A process that only imports the handler is the floor.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from bench.child import run_child
from bench.corpus import known_item_queries
from bench.environment import BASE_ENVIRONMENT
from bench.scaling import document_records, synthetic_chunks

ROOT = Path(__file__).resolve().parents[1]
PROFILES = {"full": (10_000, 100_000), "quick": (1_000, 5_000), "smoke": (100,)}
# Lambda's own runtime (bootstrap, runtime client) lives in the same memory; keep this much
# headroom above our process's peak, and the current setting in template.yaml for comparison.
RUNTIME_HEADROOM = 1.3


def _search_memory_mb() -> int:
    """The search function's memory in the template (the `SearchMemorySize` default)."""
    from agent_knowledge_dev.template import template

    return int(template()["Parameters"]["SearchMemorySize"]["Default"])


def _child(objects: str, queries: str) -> dict[str, Any]:
    return run_child("bench.memory_child", [objects, queries], {**os.environ, **BASE_ENVIRONMENT}, timeout=600)


def run(profile: str = "full") -> dict[str, Any]:
    from bench.index_store import DirectoryObjects, publish_chunks

    sizes = PROFILES[profile]
    current_memory_mb = _search_memory_mb()
    result: dict[str, Any] = {"sizes": list(sizes), "current_memory_mb": current_memory_mb}
    with tempfile.TemporaryDirectory(prefix="ak-bench-memory-") as scratch:
        result["handler_only"] = _child("-", "-")
        points = []
        for size in sizes:
            chunks = synthetic_chunks(size)
            _, indexed = document_records(chunks)
            objects = DirectoryObjects(str(Path(scratch) / f"objects-{size}"))
            kb, manifest = publish_chunks(indexed, objects)
            Path(objects.root, "kb.json").write_text(kb.model_dump_json(), encoding="utf-8")
            queries_path = Path(scratch) / f"queries-{size}.json"
            queries = known_item_queries([chunk.text for chunk in chunks], 200, seed=size)
            queries_path.write_text(json.dumps(queries), encoding="utf-8")
            del chunks, indexed
            measured = _child(objects.root, str(queries_path))
            points.append({"chunks": size, "index_bytes": manifest.total_bytes, **measured})
    result["points"] = points
    largest = max(point["peak_rss_mib"] for point in points)
    needed = largest * RUNTIME_HEADROOM
    result["needed_mb"] = round(needed)
    result["current_fits"] = needed <= current_memory_mb
    return result
