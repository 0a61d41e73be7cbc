"""The vectors of a KB's index generation: which documents still lack them, and the generation that
adds them (docs/DESIGN.md §10, "Hybrid retrieval").

Vector files (`index_format/vectors.py`) are listed in a generation's manifest beside the tantivy files,
with the role `vectors`, and the manifest names the model that embedded them
(`embedding_model_id`) and the documents of the generation whose chunks have no vectors yet
(`unembedded`). Lexical indexing never waits for embedding: an update or rebuild publishes its
generation with the documents it added appended to `unembedded` (`carry_vectors`), and the
indexer then calls `embed_unembedded`, which embeds those documents' chunks (read back from the
generation's own tantivy index, so what is embedded is exactly what is indexed), writes one new
vector file, and publishes the next generation with it. The state is level-triggered: whatever a
generation lists as unembedded is embedded by the next pass, whether the last one ran out of time,
failed to embed (`EmbeddingFailed`) or lost the publish race. A document's chunks are always
embedded, written and merged together, so a vector file covers a document revision entirely or
not at all.

Vector files are merged by their own small policy (`merge_due`): above MAX_VECTOR_FILES files the
smallest MERGE_FANIN are rewritten as one, without re-embedding (their int8 codes are carried as
they are and streamed to the file: `_merged`), dropping the rows of document revisions the
generation no longer holds; a rebuild merges all of them. A KB is embedded by one model: a pass
whose embedder is another model refuses (`ModelMismatch`) and `kb reindex` starts the KB over with
the configured model, reusing nothing.

A damaged vector file degrades, never blocks: a pass drops every file of its generation that does
not open (`VectorFileCorrupt`, which includes a file of another vector space than the manifest's),
logs it, and lists the documents no remaining file covers as unembedded again, so the same pass
starts embedding them; a rebuild never links such a file into its generation.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

from agent_knowledge.core.observability import logger
from agent_knowledge.embedding.base import Embedder, vector_space
from agent_knowledge.errors import EmbeddingFailed, KnowledgeBaseMissing, KnowledgeUnavailable
from agent_knowledge.index_format.chunks import IndexedChunk
from agent_knowledge.index_format.kb_index import KbIndex
from agent_knowledge.index_format.layout import VECTOR_ROLE, IndexFile, IndexManifest
from agent_knowledge.index_format.local_files import LocalFiles, local_files
from agent_knowledge.index_format.vector_writing import Sink, write_quantised, write_vectors
from agent_knowledge.index_format.vectors import (
    VectorFile,
    VectorFileCorrupt,
    VectorRow,
    name_of,
    open_vector_file,
    vector_files,
)
from agent_knowledge.indexer import writer as index_writer
from agent_knowledge.records import KnowledgeBaseRecord
from agent_knowledge.repositories.bundle import Repositories

# Chunks embedded per generation: a bulk load gets its vectors in generations of this many (about
# 70 s of the local model's CPU, or ~15 s of Titan calls 8 at a time), so each pass fits the
# indexer's time and what it uploads stays one modest file.
CHUNKS_PER_GENERATION = 2000
# Texts per embedding call of the provider (Bedrock: concurrent calls; local: one forward pass).
EMBED_BATCH = 64
MAX_VECTOR_FILES = 8
MERGE_FANIN = 4

ChunkKey = tuple[str, str, int, str]  # doc_id, revision, chunk_index, digest


class ModelMismatch(EmbeddingFailed):
    """The KB's vectors were embedded by another model than the configured one: `kb reindex`."""


def _with_files(manifest: IndexManifest, files: dict[str, IndexFile], **update: object) -> IndexManifest:
    return manifest.model_copy(
        update={"files": files, "index_bytes": sum(entry.size for entry in files.values()), **update}
    )


def carry_vectors(
    manifest: IndexManifest, base: IndexManifest | None, added: Iterable[str], model_id: str
) -> IndexManifest:
    """`manifest` (a new generation described from its tantivy files) with the vectors of `base`
    (the generation it was made from) and `added` (documents whose chunks it added) unembedded.
    `model_id` is the configured vector space (`embedding.base.vector_space`; "" for lexical only:
    nothing is queued for embedding)."""
    files = dict(manifest.files)
    carried_model = ""
    unembedded: list[str] = []
    if base is not None:
        files.update(vector_files(base))
        carried_model = base.embedding_model_id
        unembedded = list(base.unembedded)
    if model_id:
        unembedded = list(dict.fromkeys([*unembedded, *sorted(added)]))
        carried_model = carried_model or model_id
    return _with_files(manifest, files, embedding_model_id=carried_model, unembedded=unembedded)


def carry_vectors_into_rebuild(
    manifest: IndexManifest,
    previous: IndexManifest | None,
    previous_directory: str | None,
    directory: str,
    indexed: Iterable[str],
    model_id: str,
) -> IndexManifest:
    """A rebuild's manifest: every document it indexed is unembedded; the previous generation's
    vector files of the same model are linked into `directory` and listed, so that the embedding
    pass reuses their rows instead of embedding again (and merges them, dropping what is gone). A
    file that does not open (`VectorFileCorrupt`) is left behind: its documents are embedded again."""
    if not model_id:
        return manifest
    files = dict(manifest.files)
    if previous is not None and previous_directory is not None and previous.embedding_model_id == model_id:
        usable, _ = _open_vector_files(previous_directory, previous, model_id)  # never a corrupt file
        for name, entry in vector_files(previous).items():
            if name not in usable:
                continue
            target = os.path.join(directory, name)
            if not os.path.exists(target):
                os.link(os.path.join(previous_directory, name), target)
            files[name] = entry
    return _with_files(manifest, files, embedding_model_id=model_id, unembedded=sorted(indexed))


def needs_pass(manifest: IndexManifest) -> bool:
    return bool(manifest.unembedded) or merge_due(manifest)


def merge_due(manifest: IndexManifest) -> bool:
    return len(vector_files(manifest)) > MAX_VECTOR_FILES or (
        manifest.kind == "rebuild" and len(vector_files(manifest)) > 1
    )


def _merge_inputs(manifest: IndexManifest) -> list[str]:
    files = vector_files(manifest)
    if manifest.kind == "rebuild":
        return sorted(files)
    if len(files) <= MAX_VECTOR_FILES:
        return []
    by_size = sorted(files, key=lambda name: (files[name].size, name))
    return by_size[: max(MERGE_FANIN, len(files) - MAX_VECTOR_FILES + 1)]


@dataclass(frozen=True)
class VectorPass:
    kb_id: str
    generation: int  # the generation published by the pass, or the current one if none was
    embedded_chunks: int
    reused_chunks: int
    remaining_documents: int  # still unembedded in that generation: another pass is due


@dataclass
class _Work:
    """What a pass carries over a lost publish race: vectors are never computed twice."""

    vectors: dict[ChunkKey, npt.NDArray[np.float32]] = field(default_factory=dict)
    uploaded: set[str] = field(default_factory=set)


def embed_unembedded(
    repositories: Repositories,
    kb_id: str,
    embedder: Embedder,
    files: LocalFiles = local_files,
    max_chunks: int = CHUNKS_PER_GENERATION,
) -> VectorPass:
    """Embed up to `max_chunks` chunks of the current generation's unembedded documents (whole
    documents, in the order they were added) and merge vector files if due; publish the result as
    the next generation. EmbeddingFailed leaves the documents unembedded: the next pass tries again.
    Documents embedded before a failure are published first, so a failure loses no finished work."""
    work = _Work()
    space = vector_space(embedder)
    for _ in range(index_writer.MAX_PUBLISH_ATTEMPTS):
        kb = repositories.knowledge_bases.get(kb_id)
        if kb is None:
            raise KnowledgeBaseMissing(f"knowledge base {kb_id!r} does not exist", kb_id=kb_id)
        if kb.generation <= 0 or not kb.index_manifests:
            return VectorPass(kb_id, kb.generation, 0, 0, 0)
        base = index_writer.manifests.get(repositories.bodies, kb_id, kb.index_manifests[0])
        if not needs_pass(base):
            return VectorPass(kb_id, kb.generation, 0, 0, 0)
        if base.embedding_model_id and base.embedding_model_id != space:
            raise ModelMismatch(
                f"the index was embedded with {base.embedding_model_id}, the configured model is "
                f"{space}: run `kb reindex` to embed it again",
                model_id=space, transient=False,
            )  # fmt: skip
        directory, _ = files.materialize(repositories.bodies, base, index_writer.writer_owner(kb_id))
        try:
            outcome = _pass(repositories, kb, base, directory, embedder, space, max_chunks, work)
            if outcome is not None:
                published, result, failure = outcome
                if published is not None:
                    index_writer.keep_local_copy(files, directory, published)
                if failure is not None:
                    raise failure
                return result
        finally:
            files.discard(directory)
    raise KnowledgeUnavailable("the knowledge base index is being updated too often; try again")


def _pass(
    repositories: Repositories,
    kb: KnowledgeBaseRecord,
    base: IndexManifest,
    directory: str,
    embedder: Embedder,
    space: str,
    max_chunks: int,
    work: _Work,
) -> tuple[index_writer.Published | None, VectorPass, EmbeddingFailed | None] | None:
    """None if another writer published first (the caller starts again from its generation)."""
    index = KbIndex.open(directory, base.generation)
    opened, dropped = _open_vector_files(directory, base, space)
    covered = {document for vectors in opened.values() for document in vectors.documents}
    if dropped:
        base = _without_corrupt_files(repositories, kb.kb_id, base, dropped, covered)
    taken: list[str] = []
    chunks: list[IndexedChunk] = []
    reused = 0
    for doc_id in base.unembedded:
        if len(chunks) >= max_chunks:
            break
        taken.append(doc_id)
        stored = index.stored_chunks(doc_id)
        if not stored:
            continue  # deleted (or never indexed) since it was queued
        if (doc_id, stored[0].revision) in covered:
            reused += len(stored)  # a rebuild's document: its rows are in a carried vector file
            continue
        chunks.extend(stored)
    failure: EmbeddingFailed | None = None
    try:
        _embed(embedder, chunks, work.vectors)
    except EmbeddingFailed as exc:
        failure = exc
    unfinished = {chunk.doc_id for chunk in chunks if _key(chunk) not in work.vectors}
    finished = [doc_id for doc_id in taken if doc_id not in unfinished]  # all chunks embedded, or none needed
    finished_set = set(finished)
    embedded = [chunk for chunk in chunks if chunk.doc_id in finished_set]
    merging = _merge_inputs(base)
    if not finished and not merging and not dropped:
        nothing = VectorPass(kb.kb_id, kb.generation, 0, 0, len(base.unembedded))
        return None, nothing, failure

    files = {name: entry for name, entry in base.files.items() if name not in merging}
    if embedded:
        rows = [VectorRow(c.doc_id, c.revision, c.chunk_index, c.digest) for c in embedded]
        matrix = np.stack([work.vectors[_key(c)] for c in embedded])
        files.update(_write(directory, write_vectors(space, rows, matrix)))
    if merging:
        files.update(_merged(directory, space, [opened[name] for name in merging], index))
    manifest = _with_files(
        base,
        files,
        generation=kb.generation + 1,
        kind="vectors",
        embedding_model_id=space,
        unembedded=[doc_id for doc_id in base.unembedded if doc_id not in finished_set],
    )
    published = index_writer.publish(repositories, kb, manifest, directory, base, work.uploaded)
    if published is None:
        return None
    logger.info(
        "index vectors published",
        extra={
            "kb_id": kb.kb_id,
            "generation": published.generation,
            "embedded_chunks": len(embedded),
            "reused_chunks": reused,
            "merged_vector_files": len(merging),
            "unembedded_documents": len(manifest.unembedded),
        },
    )
    result = VectorPass(kb.kb_id, published.generation, len(embedded), reused, len(manifest.unembedded))
    return published, result, failure


def _open_vector_files(directory: str, base: IndexManifest, space: str) -> tuple[dict[str, VectorFile], list[str]]:
    """The generation's vector files that open, and the names of those that are corrupt (damaged,
    or of another vector space than the generation's), each logged: the pass drops them."""
    opened: dict[str, VectorFile] = {}
    dropped: list[str] = []
    for name in vector_files(base):
        try:
            opened[name] = open_vector_file(os.path.join(directory, name), base.embedding_model_id or space)
        except VectorFileCorrupt as exc:
            logger.error(
                "corrupt vector file dropped: its documents are embedded again",
                extra={"kb_id": base.kb_id, "generation": base.generation, "file": name, "reason": str(exc)},
            )
            dropped.append(name)
    return opened, dropped


def _without_corrupt_files(
    repositories: Repositories,
    kb_id: str,
    base: IndexManifest,
    dropped: Sequence[str],
    covered: set[tuple[str, str]],
) -> IndexManifest:
    """`base` without the vector files `dropped`, and with the documents they may have held waiting
    for vectors: every ready document whose revision no remaining file covers (a corrupt file's own
    list of documents cannot be trusted). One that the index does not hold is skipped by the pass;
    its update queues it again."""
    waiting = set(base.unembedded)
    lost = sorted(
        record.doc_id
        for record in repositories.documents.list(kb_id, with_chunks=False)
        if record.status == "ready" and record.doc_id not in waiting and (record.doc_id, record.revision) not in covered
    )
    files = {name: entry for name, entry in base.files.items() if name not in dropped}
    logger.info("documents waiting for vectors again", extra={"kb_id": kb_id, "documents": len(lost)})
    return _with_files(base, files, unembedded=[*base.unembedded, *lost])


def _key(chunk: IndexedChunk) -> ChunkKey:
    return (chunk.doc_id, chunk.revision, chunk.chunk_index, chunk.digest)


def _embed(embedder: Embedder, chunks: Sequence[IndexedChunk], into: dict[ChunkKey, npt.NDArray[np.float32]]) -> None:
    """Embed the chunks not in `into` yet, EMBED_BATCH at a time (a failure keeps earlier batches)."""
    missing = [chunk for chunk in chunks if _key(chunk) not in into]
    for start in range(0, len(missing), EMBED_BATCH):
        batch = missing[start : start + EMBED_BATCH]
        vectors = embedder.embed_documents([chunk.text for chunk in batch])
        for chunk, vector in zip(batch, vectors, strict=True):
            into[_key(chunk)] = vector


def _write(directory: str, data: bytes) -> dict[str, IndexFile]:
    # Through a partial file and a rename, like a merge: a file of the same content may already be
    # in the directory as a hard link to the reader's copy (a rebuild links the previous vector
    # files in), and opening it for writing would truncate that shared copy.
    return _write_streamed(directory, lambda target: target.write(data))


def _merged(directory: str, model_id: str, inputs: list[VectorFile], index: KbIndex) -> dict[str, IndexFile]:
    """One file with the rows of `inputs` whose document revision `index` still holds. Their int8
    codes are carried as they are (no float copy, no second quantisation) and streamed to the file:
    merging a million rows holds their 512 MB of codes once (at 512 dimensions)."""
    revisions: dict[str, str | None] = {}

    def current(doc_id: str) -> str | None:
        if doc_id not in revisions:
            stored = index.stored_chunks(doc_id)
            revisions[doc_id] = stored[0].revision if stored else None
        return revisions[doc_id]

    rows: list[VectorRow] = []
    kept: list[tuple[VectorFile, npt.NDArray[np.intp]]] = []
    for vectors in inputs:
        found = [(number, row) for number, row in enumerate(vectors.rows_of()) if current(row.doc_id) == row.revision]
        if found:
            rows.extend(row for _, row in found)
            kept.append((vectors, np.fromiter((number for number, _ in found), np.intp, len(found))))
    if not rows:
        return {}
    codes = np.empty((len(rows), kept[0][0].dimensions), dtype=np.int8)
    scales = np.empty(len(rows), dtype=np.float32)
    filled = 0
    for vectors, numbers in kept:
        codes[filled : filled + len(numbers)], scales[filled : filled + len(numbers)] = vectors.quantised(numbers)
        filled += len(numbers)
    return _write_streamed(directory, lambda target: write_quantised(target, model_id, rows, codes, scales))


class _HashingFile:
    """A file being written, hashed as it goes: its name and digest need no second read of it."""

    def __init__(self, target: BinaryIO) -> None:
        self._target = target
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, data: Any, /) -> int:
        self.sha256.update(data)
        self.size += memoryview(data).nbytes
        return self._target.write(data)


def _write_streamed(directory: str, write: Callable[[Sink], object]) -> dict[str, IndexFile]:
    """`write` into a file of `directory`, named by its content once written (`vectors.file_name`)."""
    partial = os.path.join(directory, f".vectors-{os.getpid()}-{threading.get_ident()}.partial")
    try:
        with open(partial, "wb") as target:
            hashing = _HashingFile(target)
            write(hashing)
        sha256 = hashing.sha256.hexdigest()
        name = name_of(sha256)
        os.replace(partial, os.path.join(directory, name))
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return {name: IndexFile(sha256=sha256, size=hashing.size, role=VECTOR_ROLE)}


def backlog_passes(
    pass_once: Callable[[], VectorPass], budget_seconds: float, clock: Callable[[], float] = time.monotonic
) -> VectorPass:
    """Run passes while documents remain unembedded and the budget lasts; the last pass's result."""
    deadline = clock() + budget_seconds
    result = pass_once()
    while result.remaining_documents and result.embedded_chunks + result.reused_chunks and clock() < deadline:
        result = pass_once()
    return result
