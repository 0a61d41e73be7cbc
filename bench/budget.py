"""Figure 5 — how full the byte budgets are: search responses (bytes / 4096) and read pages
(bytes / max_bytes) for an ASCII and a Chinese corpus, through the handlers against moto.

A read chain stops at the protocol's 128 KiB per reference (`read_chain_max_bytes`), so a
chain's last page is short by design; the target counts every page but the last.
"""

from __future__ import annotations

import json
import random
import statistics
from typing import Any

from bench import handlers
from bench.corpus import SyntheticDocument, documents, known_item_queries
from bench.environment import local_stack, quiet
from bench.workspace import ingest, seed_demo_workspace

SEARCH_MAX_BYTES = 4096
PAGE_SIZES = (4096, 16384, 32768)
TARGETS = {"en": 0.95, "zh": 0.90}
# Characters per document: long enough that most chains reach 128 KiB at every page size.
DOCUMENT_CHARS = {"en": (20_000, 150_000), "zh": (8_000, 50_000)}


def _corpus(language: str, count: int, seed: int) -> list[SyntheticDocument]:
    low, high = DOCUMENT_CHARS[language]
    corpus = []
    for number, size in enumerate(random.Random(seed).sample(range(low, high), count)):
        document = next(documents(language, 1, size, seed=seed + number))
        corpus.append(SyntheticDocument(f"{language}/{number:04d}.md", document.title, document.body))
    return corpus


def _read_chain(ref: str, max_bytes: int) -> list[int]:
    sizes, cursor = [], None
    while True:
        body = {"ref": ref, "max_bytes": max_bytes, **({"cursor": cursor} if cursor else {})}
        status, text = handlers.invoke("read", handlers.event("read", body))
        assert status == 200, text
        sizes.append(len(text.encode("utf-8")))
        cursor = json.loads(text)["next_cursor"]
        if cursor is None:
            return sizes


def _fills(values: list[float]) -> dict[str, Any]:
    return {"n": len(values), "mean": round(statistics.fmean(values), 4), "min": round(min(values), 4)}


def measure(language: str, document_count: int, query_count: int, chains: int) -> dict[str, Any]:
    docs = _corpus(language, document_count, seed=41 if language == "en" else 43)
    queries = known_item_queries([doc.body for doc in docs], query_count, seed=44)
    figure: dict[str, Any] = {"documents": document_count, "queries": len(queries)}
    with local_stack() as repositories, quiet():
        seed_demo_workspace(repositories)
        ingest(repositories, "handbook", docs)
        search_fill, refs = [], {}
        for query in queries:
            status, text = handlers.invoke("search", handlers.event("search", {"query": query}))
            assert status == 200, text
            response = json.loads(text)
            if response["hints"]:
                search_fill.append(len(text.encode("utf-8")) / SEARCH_MAX_BYTES)
            for hint in response["hints"]:
                refs.setdefault(hint["title"], hint["ref"])
        figure["search"] = _fills(search_fill)
        chosen = list(refs.values())[:chains]
        figure["chains"] = len(chosen)
        for max_bytes in PAGE_SIZES:
            pages = [_read_chain(ref, max_bytes) for ref in chosen]
            all_but_last = [size / max_bytes for chain in pages for size in chain[:-1]]
            last = [chain[-1] / max_bytes for chain in pages]
            figure[f"read_{max_bytes}"] = {
                "all_but_last": _fills(all_but_last) if all_but_last else None,
                "last": _fills(last),
                "pages": sum(len(chain) for chain in pages),
            }
    target = TARGETS[language]
    figure["target"] = target
    figure["met"] = all(
        figure[f"read_{size}"]["all_but_last"] is not None and figure[f"read_{size}"]["all_but_last"]["min"] >= target
        for size in PAGE_SIZES
    )
    return figure


PROFILES = {"full": (24, 40, 8), "quick": (6, 10, 2), "smoke": (2, 2, 1)}


def run(profile: str = "full") -> dict[str, Any]:
    count, queries, chains = PROFILES[profile]
    result = {language: measure(language, count, queries, chains) for language in ("en", "zh")}
    return {**result, "met": all(result[language]["met"] for language in result)}
