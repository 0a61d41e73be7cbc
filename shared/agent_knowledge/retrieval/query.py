"""The query API: search every enabled source KB of a scope, validate hits, group by document.

A KB whose served generation has vectors in the query's vector space is searched both ways and its
candidates fused (`retrieval/hybrid.py`); any other KB (lexical-only stack, vectors not there yet,
another model) answers lexically as before. Dense hits are validated exactly like lexical ones.

Document-level access (issue 33, `identity/document_access`): for a `viewer`, each KB's lexical
search filters by the index's access terms inside the query, and its dense candidates by the same
terms of their documents (more are asked for until enough are visible), both before the KB's top-k
cut; then every candidate is checked against its current record's access and the KB's current
default, so a change of access is effective for search as soon as it is for read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import NamedTuple, Protocol

from agent_knowledge.core.observability import logger
from agent_knowledge.embedding.base import Embedder
from agent_knowledge.errors import KnowledgeError, RerankFailed
from agent_knowledge.identity.document_access import Viewer, visible
from agent_knowledge.identity.scope import Scope
from agent_knowledge.index_format.analyzer import query_tokens
from agent_knowledge.index_format.chunk_text import Prefetch
from agent_knowledge.index_format.kb_index import AccessFilter, AnalyzedQuery, IndexHit, KbIndex
from agent_knowledge.index_format.layout import IndexUnavailable, VectorFileCorrupt
from agent_knowledge.index_format.stored_generation import IndexObjects
from agent_knowledge.records import DocumentRecord, KnowledgeConfig
from agent_knowledge.repositories.bodies import BodyMissing
from agent_knowledge.retrieval.hybrid import FUSION_DEPTH, fuse
from agent_knowledge.retrieval.query_vector import QueryVector, searchable
from agent_knowledge.retrieval.reader_cache import IndexCache, ServedIndex
from agent_knowledge.retrieval.rerank import RERANK_CANDIDATES, Reranker


class DocumentRecords(Protocol):
    """What retrieval needs of the document repository: the current records of its hits."""

    def get_many(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], DocumentRecord]: ...


@dataclass(frozen=True)
class RetrievedDocument:
    kb_id: str
    document: DocumentRecord  # the current, validated metadata record
    # Lexical: BM25 divided by the query's attainable BM25 in that KB (comparable across KBs).
    # Hybrid: the fused score in [0, 1] (`retrieval/hybrid.py`). A ranking number either way.
    score: float
    chunk_index: int
    chunk_text: str  # exact text of the best validated chunk of this document
    matched_terms: tuple[str, ...]  # substrings of chunk_text that matched query terms


@dataclass(frozen=True)
class RetrievalResult:
    documents: list[RetrievedDocument]  # ≤ max_docs, distinct parent documents, best first
    answered_kb_ids: list[str]  # sources that answered (possibly with zero hits)
    failed_kb_ids: list[str]  # sources whose index or storage failed
    stale_hits_dropped: int
    # Sources that answered from an older index generation because their newest failed to load:
    # documents published since are missing (search status `partial`, docs/DESIGN.md §8).
    degraded_kb_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _FusedHit:
    """A fused document's chunk: what validation checks, and its text read only if it is returned."""

    doc_id: str
    revision: str
    chunk_index: int
    digest: str
    score: float
    read_text: Callable[[], str | None]
    # The lexical hit shown, if the document had one (its text is read with the others').
    lexical: IndexHit | None = None

    @property
    def text(self) -> str | None:
        return self.read_text()


class _Candidate(NamedTuple):  # one per candidate of a search: a tuple is the cheapest to make
    kb_id: str
    hit: IndexHit | _FusedHit


# A KB searched without its vectors (its vector file is damaged): no embedder, no dense side.
LEXICAL_ONLY = QueryVector(None, "")


def query_vector_for(query: str, embedder: Embedder | None) -> QueryVector:
    """The query's embedding by `embedder` (None: lexical only), not started yet
    (`QueryVector.start_remote` starts a remote call)."""
    return QueryVector(embedder, query)


def _source_limits(config: KnowledgeConfig, kb_id: str) -> tuple[int, float]:
    for source in config.sources:
        if source.kb_id == kb_id:
            top_k = source.top_k if source.top_k is not None else config.top_k
            min_score = source.min_score if source.min_score is not None else config.min_score
            return top_k, min_score
    return config.top_k, config.min_score


def _is_current(record: DocumentRecord | None, candidate: _Candidate, scope_kb_ids: set[str]) -> bool:
    hit = candidate.hit
    return (
        record is not None
        and record.status == "ready"
        and record.kb_id == candidate.kb_id
        and record.kb_id in scope_kb_ids
        and record.revision == hit.revision
        and 0 <= hit.chunk_index < len(record.chunk_digests)
        and record.chunk_digests[hit.chunk_index] == hit.digest
    )


def retrieve(
    bodies: IndexObjects,
    documents: DocumentRecords,
    scope: Scope,
    query: str,
    max_docs: int,
    *,
    cache: IndexCache,
    embedder: Embedder | None,
    reranker: Reranker | None,
    query_vector: QueryVector | None = None,
    viewer: Viewer | None = None,
) -> RetrievalResult:
    """Search the scope's enabled KBs (`bodies` holds their index files, `cache` the ones this
    container opened), validate the hits against the current records in `documents`. `embedder`
    embeds the query for KBs with vectors (None: lexical only); a caller that started the query's
    embedding earlier (`query_vector_for`, to overlap it with the caller's identity reads) passes
    it as `query_vector` too. `reranker` reorders the fused top RERANK_CANDIDATES before the cut to
    `max_docs` (None: off). A search takes all three from its `Dependencies`. Documents with the
    same body (digest) are one: the best-scoring. `viewer`: who the search is for; only documents
    it may see are candidates (None: every document, for the operator's own tools — `kb eval`,
    benchmarks — never a session's search)."""
    wanted = max(max_docs, RERANK_CANDIDATES) if reranker is not None else max_docs
    if query_vector is None:
        query_vector = query_vector_for(query, embedder)
        query_vector.start_remote()
    elif query_vector.query != query:
        raise ValueError("the query vector was made for another query")
    tokens = query_tokens(query)
    analyzed = AnalyzedQuery.of(tokens)
    config = scope.config
    kb_ids = scope.enabled_kb_ids()
    answered: list[str] = []
    failed: list[str] = []
    degraded: list[str] = []
    candidates: list[_Candidate] = []
    for kb_id in kb_ids:
        top_k, min_score = _source_limits(config, kb_id)
        if reranker is not None:  # the reranker sees the fused top RERANK_CANDIDATES
            top_k = max(top_k, RERANK_CANDIDATES)
        try:
            kb = scope.knowledge_bases[kb_id]
            access = AccessFilter(kb.default_access, viewer) if viewer is not None else None
            served = cache.serve(bodies, kb)
            hits = _kb_candidates(served, analyzed, query_vector, top_k, min_score, access) if served else []
        except VectorFileCorrupt as exc:
            # A damaged vector file costs the KB its dense side only: its lexical index answers
            # (status `partial`), and the indexer drops and re-embeds the file (indexer/vector_generation).
            logger.warning("vector file unreadable: searched lexically", extra={"kb_id": kb_id, "error": str(exc)})
            try:
                hits = _kb_candidates(served, analyzed, LEXICAL_ONLY, top_k, min_score, access) if served else []
            except (KnowledgeError, IndexUnavailable, BodyMissing, OSError, ValueError):
                failed.append(kb_id)
                continue
            degraded.append(kb_id)
        except (KnowledgeError, IndexUnavailable, BodyMissing, OSError, ValueError) as exc:
            logger.warning("knowledge source failed", extra={"kb_id": kb_id, "error": type(exc).__name__})
            failed.append(kb_id)
            continue
        answered.append(kb_id)
        if served is not None and served.stale and kb_id not in degraded:
            degraded.append(kb_id)
        candidates.extend(_Candidate(kb_id, hit) for hit in hits)
    # Ties by document id: which of two documents with the same body is shown must not depend on
    # the order of the index's segments (an incremental update and a rebuild give the same answer).
    candidates.sort(key=lambda candidate: (-candidate.hit.score, candidate.hit.doc_id))
    candidates = candidates[: max(config.top_k, wanted) if reranker is not None else config.top_k]
    if not candidates:
        return RetrievalResult([], answered, failed, 0, degraded)

    # The texts of the candidates most likely shown are read while their records are: a block this
    # container lacks costs one ranged GET, overlapped with the records' round trip (DESIGN §10).
    prefetches = _prefetch_texts(candidates[:wanted])
    try:
        records = documents.get_many([(c.kb_id, c.hit.doc_id) for c in candidates])
    except KnowledgeError:
        # Without current records no hit can be validated: every source that had hits failed.
        lost = list(dict.fromkeys(c.kb_id for c in candidates))
        kept = [k for k in answered if k not in lost]
        return RetrievalResult([], kept, failed + lost, 0, [k for k in degraded if k in kept])

    scope_kb_ids = set(kb_ids)
    stale = 0
    eligible: list[tuple[_Candidate, DocumentRecord]] = []
    for candidate in candidates:
        record = records.get((candidate.kb_id, candidate.hit.doc_id))
        if not _is_current(record, candidate, scope_kb_ids):
            stale += 1
            continue
        assert record is not None
        default = scope.knowledge_bases[record.kb_id].default_access
        if viewer is not None and not visible(record.access, default, viewer):
            continue  # its access changed since the served index was written: not counted, not shown
        eligible.append((candidate, record))

    for prefetch in prefetches.values():  # before reading: a block in flight is not fetched twice
        if prefetch.reading is not None:
            prefetch.reading.result()
    found: list[RetrievedDocument] = []
    seen: set[tuple[str, str]] = set()
    bodies_seen: set[str] = set()
    text_failed: set[str] = set()
    position = 0
    while position < len(eligible) and len(found) < wanted:
        # The next candidates that would be shown, their texts read together (index_format/chunk_text).
        batch: list[tuple[_Candidate, DocumentRecord]] = []
        while position < len(eligible) and len(found) + len(batch) < wanted:
            candidate, record = eligible[position]
            position += 1
            key = (candidate.kb_id, candidate.hit.doc_id)
            # The same page stored twice (as .html and .docx, or in two KBs) would take two hints.
            duplicate = bool(record.body_sha256) and record.body_sha256 in bodies_seen
            if key in seen or duplicate or candidate.kb_id in text_failed:
                continue
            seen.add(key)
            bodies_seen.add(record.body_sha256)
            batch.append((candidate, record))
        texts = _read_texts([candidate for candidate, _ in batch], text_failed, prefetches)
        for (candidate, record), text in zip(batch, texts, strict=True):
            if text is None:  # a dense row whose chunk the served index no longer holds, or a failed read
                seen.discard((candidate.kb_id, candidate.hit.doc_id))
                bodies_seen.discard(record.body_sha256)
                stale += candidate.kb_id not in text_failed
                continue
            hit = candidate.hit
            found.append(
                RetrievedDocument(
                    candidate.kb_id, record, hit.score, hit.chunk_index, text, analyzed.matched_terms(text)
                )
            )
    if text_failed:
        answered = [kb_id for kb_id in answered if kb_id not in text_failed]
        failed = failed + sorted(text_failed)
        degraded = [kb_id for kb_id in degraded if kb_id not in text_failed]
    if reranker is not None:
        found = _reranked(reranker, query, found, max_docs)
    return RetrievalResult(found[:max_docs], answered, failed, stale, degraded)


def _lexical_groups(candidates: list[_Candidate]) -> dict[int, tuple[str, list[tuple[int, IndexHit]]]]:
    """The lexical hits of `candidates` (a fused hit's lexical side) grouped by the index whose
    chunk texts hold them: (KB id, [(position in `candidates`, hit)])."""
    groups: dict[int, tuple[str, list[tuple[int, IndexHit]]]] = {}
    for number, candidate in enumerate(candidates):
        hit = candidate.hit
        lexical = hit if isinstance(hit, IndexHit) else hit.lexical
        if lexical is not None and lexical.texts is not None:
            groups.setdefault(id(lexical.texts), (candidate.kb_id, []))[1].append((number, lexical))
    return groups


def _prefetch_texts(candidates: list[_Candidate]) -> dict[int, Prefetch]:
    """What this container holds of the texts `candidates` need, by text source (`id`), and the
    background reads of the blocks it lacks."""
    prefetches = {}
    for key, (_, hits) in _lexical_groups(candidates).items():
        source = hits[0][1].texts
        assert source is not None
        prefetches[key] = source.prefetch([(hit.segment_id, hit.doc, hit.digest) for _, hit in hits])
    return prefetches


def _read_texts(candidates: list[_Candidate], failed: set[str], prefetches: dict[int, Prefetch]) -> list[str | None]:
    """The chunk texts of `candidates`: lexical hits of one index in one call (their missing blocks
    fetched in parallel, what `prefetches` found in memory not looked up again), a dense row's on
    its own; None for a row the index no longer holds. A KB whose texts cannot be read is added to
    `failed` (its candidates get None)."""
    texts: list[str | None] = [None] * len(candidates)
    for key, (kb_id, hits) in _lexical_groups(candidates).items():
        source = hits[0][1].texts
        prefetched = prefetches.get(key)
        try:
            assert source is not None
            wanted = [(hit.segment_id, hit.doc, hit.digest) for _, hit in hits]
            read = source.texts(wanted, prefetched.held if prefetched is not None else None)
        except (KnowledgeError, IndexUnavailable, BodyMissing, OSError, ValueError) as exc:
            logger.warning("chunk texts unreadable", extra={"kb_id": kb_id, "error": type(exc).__name__})
            failed.add(kb_id)
            continue
        for (number, _), text in zip(hits, read, strict=True):
            texts[number] = text
    for number, candidate in enumerate(candidates):
        hit = candidate.hit
        if (
            texts[number] is None
            and candidate.kb_id not in failed
            and isinstance(hit, _FusedHit)
            and hit.lexical is None
        ):
            try:
                texts[number] = hit.text
            except (KnowledgeError, IndexUnavailable, BodyMissing, OSError, ValueError) as exc:
                logger.warning("chunk texts unreadable", extra={"kb_id": candidate.kb_id, "error": type(exc).__name__})
                failed.add(candidate.kb_id)
    return texts


def _reranked(reranker: Reranker, query: str, found: list[RetrievedDocument], max_docs: int) -> list[RetrievedDocument]:
    """The fused top RERANK_CANDIDATES in the reranker's order (each keeps its fused score, which is
    what `min_score` was applied to); the fused order when the model fails (logged)."""
    pool = found[:RERANK_CANDIDATES]
    if len(pool) < 2:
        return found
    try:
        order = reranker.rerank(query, [document.chunk_text for document in pool], top_n=max_docs)
    except RerankFailed as exc:
        logger.warning("rerank failed; fused order kept", extra=exc.context())
        return found
    return [pool[index] for index, _ in order]


def _kb_candidates(
    served: ServedIndex,
    analyzed: AnalyzedQuery,
    query_vector: QueryVector,
    top_k: int,
    min_score: float,
    access: AccessFilter | None = None,
) -> list[IndexHit] | list[_FusedHit]:
    """The KB's `top_k` best documents (that `access` admits): fused if its generation has vectors
    of the query's space."""
    vector = query_vector.get() if searchable(served.manifest, query_vector.space) else None
    if vector is None or served.manifest is None or served.directory is None:
        return [hit for hit in served.index.best_per_document(analyzed, top_k, access) if hit.score >= min_score]
    # Both retrievers propose FUSION_DEPTH documents, and the KB keeps its top_k fused ones.
    from agent_knowledge.retrieval.dense import dense_search  # numpy: only for a KB with vectors (query_vector)

    depth = max(top_k, FUSION_DEPTH)
    lexical = served.index.best_per_document(analyzed, depth, access)
    asked = depth
    seen: dict[str, bool] = {}  # doc_id → admitted, across the rounds below
    # Vector files the served directory lacks are read by need from the bucket (index_format/vector_ranges).
    remote = (served.objects, served.files) if served.objects is not None and served.files is not None else None
    while True:
        dense = dense_search(
            served.manifest, served.directory, vector, asked, lambda doc_id: _revision(served.index, doc_id),
            remote=remote,  # a store without ranges downloads every file
        )  # fmt: skip
        if access is None:
            break
        for hit in dense.hits:
            if hit.doc_id not in seen:
                seen[hit.doc_id] = _admitted(served.index, access, hit.doc_id)
        admitted = [hit for hit in dense.hits if seen[hit.doc_id]]
        if len(admitted) >= depth or len(dense.hits) < asked or asked >= served.manifest.documents:
            # The best `depth` visible documents: the filter comes before the cut, as lexically.
            dense = replace(dense, hits=admitted[:depth])
            break
        asked *= 4
    fused: list[_FusedHit] = []
    for document in fuse(lexical, dense.hits, dense.background, top_k, min_score, served.manifest.unembedded):
        if document.lexical is not None:
            shown = document.lexical
            fused.append(
                _FusedHit(
                    shown.doc_id,
                    shown.revision,
                    shown.chunk_index,
                    shown.digest,
                    document.score,
                    _shown_text(shown),
                    shown,
                )  # fmt: skip
            )
        elif document.dense is not None:
            row = document.dense
            fused.append(
                _FusedHit(
                    row.doc_id, row.revision, row.chunk_index, row.chunk_digest, document.score,
                    _indexed_text(served.index, row.doc_id, row.revision, row.chunk_index, row.chunk_digest),
                )
            )  # fmt: skip
    return fused


def _admitted(index: KbIndex, access: AccessFilter, doc_id: str) -> bool:
    """Whether the viewer may see a dense hit's document, by its terms in the served index (a
    document the index does not hold is not admitted)."""
    terms = index.access_of(doc_id)
    return terms is not None and access.admits(terms)


def _revision(index: KbIndex, doc_id: str) -> str | None:
    first = index.chunk(doc_id, 0, with_text=False)
    return first.revision if first is not None else None


def _shown_text(hit: IndexHit) -> Callable[[], str | None]:
    return lambda: hit.text


def _indexed_text(
    index: KbIndex, doc_id: str, revision: str, chunk_index: int, digest: str
) -> Callable[[], str | None]:
    """The text of a dense hit's chunk, from the tantivy index it was embedded from: None unless the
    index holds exactly that chunk (same revision and digest), so a summary is always real chunk text."""

    def read() -> str | None:
        chunk = index.chunk(doc_id, chunk_index)
        if chunk is None or chunk.revision != revision or chunk.digest != digest:
            return None
        return chunk.text

    return read
