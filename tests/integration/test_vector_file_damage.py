"""A damaged vector file degrades, never blocks (issue 35, finding 2): the indexer drops it, embeds
its documents again and carries on, with nothing retried as a defect or dead-lettered; `kb reindex`
never carries it into the rebuild. Through the pipeline on moto with the local model, the file
damaged in the index bucket as the outside review did (same size, so the download accepts it), and
read by a new container (no local copy of the healthy file)."""

from __future__ import annotations

import hashlib
import io
import json
import struct

import pytest

from agent_knowledge.index_format.vectors import MAGIC, VectorFile
from agent_knowledge.indexer import writer as index_writer
from agent_knowledge.indexer.vector_generation import vector_files
from agent_knowledge.retrieval.reader_cache import reset_local_state
from agent_knowledge_dev.admin import create_knowledge_base
from agent_knowledge_dev.runtime import process_vector_space
from tests.support.pipeline import Pipeline, start_pipeline

DOCS = {
    "kb/tyre.md": "# Changing a flat tyre\n\nLoosen the wheel nuts, raise the car with the jack, swap the wheel.",
    "kb/bread.md": "# Baking bread\n\nMix flour, water, yeast and salt, knead the dough and let it rise.",
    "kb/storm.md": "# Storm warnings\n\n" + "The coast guard warns of gusts above 60 knots. " * 200,
}


@pytest.fixture
def pipeline(stack) -> Pipeline:
    create_knowledge_base(stack.repositories, "kb")
    started = start_pipeline(stack.environment)
    for key, body in DOCS.items():
        started.put(key, body)
    started.run()
    return started


def manifest(stack):
    kb = stack.repositories.knowledge_bases.get("kb")
    return index_writer.manifests.get(stack.repositories.bodies, "kb", kb.index_manifests[0])


def covered(stack) -> set[tuple[str, str]]:
    """The (doc_id, revision) pairs the current generation's vector files hold rows of."""
    current = manifest(stack)
    return {
        document
        for name in vector_files(current)
        for document in VectorFile(stack.repositories.bodies.read(current.file_key(name))).documents
    }


def ready(stack) -> set[tuple[str, str]]:
    return {(r.doc_id, r.revision) for r in stack.repositories.documents.list("kb") if r.status == "ready"}


def damage(stack, header: bytes, rest: bytes = b"") -> str:
    """Overwrite the KB's one vector file in the index bucket with a file of the same size: `header`
    then `rest`, or `header` padded with spaces to fill it; a new container then reads it. Its name."""
    current = manifest(stack)
    ((name, entry),) = vector_files(current).items()
    if rest:
        data = MAGIC + struct.pack("<I", len(header)) + header + rest
    else:
        filler = entry.size - len(MAGIC) - 4 - len(header)
        assert filler >= 0, "the file is too small for this damage"
        data = MAGIC + struct.pack("<I", len(header) + filler) + header + b" " * filler
    assert len(data) == entry.size
    stack.repositories.bodies.put_file(
        current.file_key(name), io.BytesIO(data), hashlib.sha256(data).hexdigest(), "application/octet-stream"
    )
    reset_local_state()
    return name


@pytest.mark.parametrize(
    "damaged_header",
    [
        # "arrays" that is not an object: AttributeError in the reader before; the indexer's pass
        # raised, the KB's messages were retried as a defect and dead-lettered.
        lambda header: {**header, "arrays": ["codes"]},
        # A whole file of another vector space than the manifest's: its rows were ranked against
        # this model's queries before.
        lambda header: {**header, "model_id": "another-model/" + str(header["dimensions"])},
    ],
)
def test_a_damaged_vector_file_is_dropped_and_its_documents_embedded_again(stack, pipeline, caplog, damaged_header):
    assert covered(stack) == ready(stack) and len(ready(stack)) == len(DOCS)
    healthy = manifest(stack)
    ((name, _),) = vector_files(healthy).items()
    original = stack.repositories.bodies.read(healthy.file_key(name))
    (length,) = struct.unpack_from("<I", original, len(MAGIC))
    header = json.loads(original[len(MAGIC) + 4 : len(MAGIC) + 4 + length])
    arrays = original[len(MAGIC) + 4 + length :]  # the padding, then the arrays
    changed = json.dumps(damaged_header(header), separators=(",", ":")).encode()
    assert len(changed) <= length  # the header keeps its length (spaces after it): arrays stay put
    damaged = damage(stack, changed + b" " * (length - len(changed)), arrays)

    pipeline.put("kb/kites.md", "# Kites\n\nA kite flies on a line against the wind.")
    pipeline.run()

    assert pipeline.dead_letters("IndexDeadLetterQueue") == []
    current = manifest(stack)
    assert damaged not in current.files and current.unembedded == []
    assert covered(stack) == ready(stack) and len(ready(stack)) == len(DOCS) + 1  # embedded again
    assert any(r.getMessage().startswith("corrupt vector file dropped") for r in caplog.records)


def test_kb_reindex_never_carries_a_damaged_vector_file(stack, pipeline, caplog):
    from agent_knowledge.indexer.rebuild import rebuild_kb_index
    from agent_knowledge.indexer.vector_backlog import request_embedding_after_rebuild

    # A header nested thousands of lists deep: RecursionError in the reader before.
    ((name, entry),) = vector_files(manifest(stack)).items()
    original, size = stack.repositories.bodies.read(manifest(stack).file_key(name)), entry.size
    depth = (size - len(MAGIC) - 4) // 2 - 1
    damaged = damage(stack, b"[" * depth + b"]" * depth)

    # What `kb reindex` does: rebuild, then hand the KB to the indexer for its vectors.
    generation = rebuild_kb_index(stack.repositories, "kb", vector_space=process_vector_space())
    rebuilt = manifest(stack)
    assert rebuilt.generation == generation and rebuilt.kind == "rebuild" and damaged not in rebuilt.files
    assert request_embedding_after_rebuild("kb", generation, stack.dependencies().settings)
    pipeline.run()

    assert pipeline.dead_letters("IndexDeadLetterQueue") == []
    current = manifest(stack)
    assert current.generation > generation and current.unembedded == []
    assert covered(stack) == ready(stack) and len(ready(stack)) == len(DOCS)  # every file read back
    # Embedded again, the file has the damaged one's content address: this container's copy is the
    # healthy file now, so the next change finds nothing corrupt.
    assert damaged in current.files and stack.repositories.bodies.read(current.file_key(damaged)) == original
    caplog.clear()
    pipeline.put("kb/kites.md", "# Kites\n\nA kite flies on a line against the wind.")
    pipeline.run()
    assert not [r for r in caplog.records if r.getMessage().startswith("corrupt vector file")]
    assert covered(stack) == ready(stack) and len(ready(stack)) == len(DOCS) + 1


@pytest.mark.parametrize(
    "damaged_header",
    [
        lambda header: {**header, "arrays": ["codes"]},
        lambda header: {**header, "model_id": "another-model/" + str(header["dimensions"])},
    ],
)
def test_search_answers_lexically_with_partial_while_a_vector_file_is_damaged(stack, pipeline, damaged_header):
    """The search side of finding 3: the KB's lexical index still answers (status `partial`), on the
    plain route's domain call as on MCP, which shares it; never an HTTP 500, never `unavailable`."""
    from tests.support.retrieval import search

    current = manifest(stack)
    ((name, _),) = vector_files(current).items()
    data = stack.repositories.bodies.read(current.file_key(name))
    (length,) = struct.unpack_from("<I", data, len(MAGIC))
    header = json.loads(data[len(MAGIC) + 4 : len(MAGIC) + 4 + length])
    damage(stack, json.dumps(damaged_header(header)).encode())
    result = search(stack, ["kb"], "knead the dough")
    assert result.failed_kb_ids == [] and result.degraded_kb_ids == ["kb"]
    assert [hit.document.source_key for hit in result.documents][:1] == ["bread.md"]
