"""What document-level access costs search (issue 33): warm lexical search CPU and index size of a KB
whose every document carries an access list, against the same KB without.

`python -m bench.access_filter [--profile full|quick|smoke]` (full: 100,000 chunks, 1,000 roles).

Two indexes of the same chunks (`bench.segments`' corpus, chunked by the product's chunker) are
written with the product's `write_index`: one with no access terms (searched without a filter, as
before issue 33), one where every document allows 1-3 of ROLES roles (`role:r<n>`) and every tenth
also denies one principal. Queries are known-item queries of the corpus (2-4 words of a chunk). Each
query is searched by `KbIndex.best_per_document(query, 30)` — 30 is FUSION_DEPTH, what a KB with
vectors asks its lexical side for — without a filter on the plain index, and on the access index for
two viewers: a session with 5 roles (~1 % of the documents visible) and one with 300 roles (~40 %).
Rounds alternate the three (A, B, C, A, B, C, ...), after one warm-up round; per query the median of
`time.process_time` and wall over the rounds, then the median and the sum over queries. Index bytes
are the files of each index directory.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import random
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PROFILES: dict[str, dict[str, int]] = {
    "full": {"chunks": 100_000, "roles": 1000, "queries": 200, "rounds": 5},
    "quick": {"chunks": 10_000, "roles": 1000, "queries": 60, "rounds": 3},
    "smoke": {"chunks": 400, "roles": 50, "queries": 6, "rounds": 2},
}
DEPTH = 30
ROOT = Path(__file__).resolve().parents[1]


def _with_access(chunks: Iterator[Any], roles: int, seed: int = 33) -> Iterator[Any]:
    from agent_knowledge.identity.document_access import access_list, index_terms

    rng = random.Random(seed)
    terms: dict[str, tuple[str, ...]] = {}
    for chunk in chunks:
        if chunk.doc_id not in terms:
            allow = [f"role:r{rng.randrange(roles)}" for _ in range(rng.randint(1, 3))]
            deny = [f"principal:p{rng.randrange(roles)}"] if rng.random() < 0.1 else []
            terms[chunk.doc_id] = tuple(index_terms(access_list(allow, deny)))
        yield dataclasses.replace(chunk, access=terms[chunk.doc_id])


def _bytes(directory: str) -> int:
    return sum(os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory))


def _timed(search: Any) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    search()
    return time.process_time() - cpu, time.perf_counter() - wall


def run(profile: str = "full") -> dict[str, Any]:
    from agent_knowledge.identity.document_access import Viewer
    from agent_knowledge.index_format.analyzer import query_tokens
    from agent_knowledge.index_format.builder import write_index
    from agent_knowledge.index_format.kb_index import AccessFilter, AnalyzedQuery, KbIndex
    from agent_knowledge.records import Principal
    from bench.segments import _chunks, _queries

    settings = PROFILES[profile]
    count, roles = settings["chunks"], settings["roles"]
    with tempfile.TemporaryDirectory(prefix="bench-access-") as scratch:
        plain_dir, access_dir = os.path.join(scratch, "plain"), os.path.join(scratch, "access")
        os.makedirs(plain_dir)
        os.makedirs(access_dir)
        write_index(plain_dir, _chunks(count))
        write_index(access_dir, _with_access(_chunks(count), roles))
        plain, guarded = KbIndex.open(plain_dir, 1), KbIndex.open(access_dir, 1)
        rng = random.Random(34)
        few = Viewer.of(Principal(id="u", roles=[f"r{n}" for n in rng.sample(range(roles), 5)]))
        many = Viewer.of(Principal(id="u", roles=[f"r{n}" for n in rng.sample(range(roles), min(300, roles))]))
        queries = [AnalyzedQuery.of(query_tokens(text)) for text in _queries("en", False, settings["queries"], 35)]
        modes = {
            "no_access_lists": lambda query: plain.best_per_document(query, DEPTH),
            "access_5_roles": lambda query: guarded.best_per_document(query, DEPTH, AccessFilter("route", few)),
            "access_300_roles": lambda query: guarded.best_per_document(query, DEPTH, AccessFilter("route", many)),
        }
        hits = {name: [len(search(query)) for query in queries] for name, search in modes.items()}  # warm-up
        samples: dict[str, list[list[tuple[float, float]]]] = {name: [[] for _ in queries] for name in modes}
        for _ in range(settings["rounds"]):
            for name, search in modes.items():
                for number, query in enumerate(queries):
                    samples[name][number].append(_timed(lambda s=search, q=query: s(q)))
        figures: dict[str, Any] = {}
        for name, per_query in samples.items():
            cpu = [statistics.median(cpu for cpu, _ in runs) for runs in per_query]
            wall = [statistics.median(wall for _, wall in runs) for runs in per_query]
            figures[name] = {
                "cpu_median_ms": round(statistics.median(cpu) * 1000, 3),
                "cpu_total_ms": round(sum(cpu) * 1000, 2),
                "wall_median_ms": round(statistics.median(wall) * 1000, 3),
                "hits_median": statistics.median(hits[name]),
            }
        base = figures["no_access_lists"]["cpu_total_ms"]
        for name in ("access_5_roles", "access_300_roles"):
            figures[name]["cpu_ratio"] = round(figures[name]["cpu_total_ms"] / base, 3) if base else None
        plain_bytes, access_bytes = _bytes(plain_dir), _bytes(access_dir)
        return {
            "profile": profile,
            "chunks": plain.chunk_count,
            "roles": roles,
            "queries": len(queries),
            "rounds": settings["rounds"],
            "depth": DEPTH,
            "search": figures,
            "index_bytes": {
                "no_access_lists": plain_bytes,
                "access": access_bytes,
                "per_chunk_no_access_lists": round(plain_bytes / plain.chunk_count, 1),
                "per_chunk_access": round(access_bytes / guarded.chunk_count, 1),
                "per_chunk_growth": round((access_bytes - plain_bytes) / guarded.chunk_count, 1),
            },
        }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.access_filter", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), default="full")
    parser.add_argument("--output", type=Path, help="write the result as JSON here too")
    arguments = parser.parse_args()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    result = {
        "commit": commit,
        "load_average": os.getloadavg(),
        "python": platform.python_version(),
        "result": run(arguments.profile),
        "load_average_after": os.getloadavg(),
    }
    text = json.dumps(result, indent=2)
    if arguments.output:
        arguments.output.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
