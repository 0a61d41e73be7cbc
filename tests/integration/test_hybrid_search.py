"""Hybrid search end to end on moto with the local model (issue 26): the indexer publishes lexical
first, then vectors; search fuses them; dense hits are validated like lexical ones; an embedding
failure leaves documents lexically searchable and loses nothing."""

from __future__ import annotations

import numpy as np
import pytest

from agent_knowledge.errors import EmbeddingFailed
from agent_knowledge.index_format.vectors import VectorFile
from agent_knowledge.indexer import writer as index_writer
from agent_knowledge.indexer.publish import publish_rebuild
from agent_knowledge.indexer.vector_generation import ModelMismatch, embed_unembedded, vector_files
from agent_knowledge.ingest.ingestor import Ingestor
from agent_knowledge.repositories.documents import document_id
from agent_knowledge.settings import SizingSettings
from agent_knowledge_dev.admin import create_knowledge_base
from agent_knowledge_dev.runtime import process_vector_space
from tests.support.knowledge import published
from tests.support.pipeline import Pipeline, start_pipeline
from tests.support.retrieval import scope_of, search

DOCS = {
    "password.md": (
        "Password recovery",
        "# Password recovery\n\nIf you no longer know your password, open the account page and choose "
        "Reset. We e-mail a link that lets you pick a new one within an hour.",
    ),
    "tyre.md": (
        "Changing a flat tyre",
        "# Changing a flat tyre\n\nLoosen the wheel nuts, raise the car with the jack, swap the punctured "
        "wheel for the spare, then tighten the nuts in a star pattern.",
    ),
    "bread.md": (
        "Baking bread",
        "# Baking bread\n\nMix flour, water, yeast and salt, knead the dough for ten minutes, let it rise "
        "until doubled and bake at 220 degrees.",
    ),
    "weather.md": (
        "Storm warnings",
        "# Storm warnings\n\nThe coast guard issues storm warnings when gusts exceed 60 knots; boats "
        "should return to harbour.",
    ),
}
# Unrelated pages beside them (the first paragraph of Python's language reference topics): the dense
# side learns what the model gives unrelated text of a KB from its chunks, which a KB of four
# documents cannot say (retrieval/dense.DenseBackground).
FILLER = {
    f"reference/{name}.md": (name, " ".join(text.split()[:60]))
    for name, text in sorted(__import__("pydoc_data.topics", fromlist=["topics"]).topics.items())[:60]
    if len(text.split()) >= 40
}
CHUNKS = len(DOCS) + len(FILLER)
# It shares one word ("account") with the password document and more with a page of the language
# reference, which BM25 alone ranks first; its meaning is the password document's.
PARAPHRASE = "I forgot my login credentials, how do I get back into my account?"
CROSS_LINGUAL = "汽车轮胎漏气了怎么换备胎"


class FailingEmbedder:
    """The configured model's identity, but every call fails as Bedrock does after its retries."""

    def __init__(self, real, transient: bool = True) -> None:
        self.model_id, self.dimensions, self.transient, self.calls = real.model_id, real.dimensions, transient, 0

    def embed_documents(self, texts):
        self.calls += 1
        raise EmbeddingFailed("throttled", provider="test", model_id=self.model_id, transient=self.transient)

    def embed_query(self, text):
        raise EmbeddingFailed("throttled", provider="test", model_id=self.model_id, transient=self.transient)


@pytest.fixture
def embedder(stack):
    found = stack.dependencies().embedder()
    assert found is not None, "the local stack's environment sets EMBEDDING_PROVIDER=local"
    return found


@pytest.fixture
def ingestor(stack) -> Ingestor:
    create_knowledge_base(stack.repositories, "kb")
    ingestor = Ingestor(stack.repositories, clock=stack.clock)
    for source_key, (title, body) in {**DOCS, **FILLER}.items():
        ingestor.put("kb", source_key, title, body)
    publish_rebuild(stack.repositories, "kb", vector_space=process_vector_space())
    return ingestor


def manifest(stack, kb_id: str = "kb"):
    kb = stack.repositories.knowledge_bases.get(kb_id)
    return index_writer.manifests.get(stack.repositories.bodies, kb_id, kb.index_manifests[0])


def titles(result) -> list[str]:
    return [hit.document.title for hit in result.documents]


def test_dense_evidence_lifts_the_page_that_means_the_query(stack, ingestor, embedder):
    assert manifest(stack).unembedded  # lexical first: the rebuild's documents wait for vectors
    lexical_only = search(stack, ["kb"], PARAPHRASE)  # no vectors yet: lexical, as before
    assert titles(lexical_only)[0] != "Password recovery"

    done = embed_unembedded(stack.repositories, "kb", embedder)
    assert (done.embedded_chunks, done.remaining_documents) == (CHUNKS, 0)
    published = manifest(stack)
    assert published.kind == "vectors" and published.unembedded == []
    assert published.embedding_model_id == f"{embedder.model_id}/{embedder.dimensions}"
    (entry,) = vector_files(published).values()
    assert published.index_bytes == sum(f.size for f in published.files.values()) and entry.size > 0

    found = search(stack, ["kb"], PARAPHRASE)
    best = found.documents[0]
    assert best.document.title == "Password recovery" and found.stale_hits_dropped == 0
    assert best.chunk_text in DOCS["password.md"][1]  # an excerpt of real chunk text
    assert 0.0 < best.score <= 1.0


def test_a_question_that_shares_no_word_with_the_kb_gets_no_hints(stack, ingestor, embedder):
    # However near the nearest neighbour looks (the tyre page, for this Chinese question), a KB none
    # of whose words the query uses answers nothing: no match, no hints.
    embed_unembedded(stack.repositories, "kb", embedder)
    assert titles(search(stack, ["kb"], CROSS_LINGUAL)) == []


def test_route_min_score_applies_to_the_score_that_is_returned(stack, ingestor, embedder):
    embed_unembedded(stack.repositories, "kb", embedder)
    found = search(stack, ["kb"], PARAPHRASE)
    assert titles(found)[:1] == ["Password recovery"]
    score = found.documents[0].score
    assert titles(search(stack, ["kb"], PARAPHRASE, min_score=score - 0.001))[:1] == ["Password recovery"]
    above = search(stack, ["kb"], PARAPHRASE, min_score=score + 0.001)
    assert "Password recovery" not in titles(above)
    assert all(hit.score >= score + 0.001 for hit in above.documents)


def test_dense_hits_of_a_replaced_revision_are_never_returned(stack, ingestor, embedder, monkeypatch):
    from agent_knowledge.index_format import layout

    monkeypatch.setattr(layout, "MAX_UNEMBEDDED_SHARE", 1.0)  # fused even with a document waiting
    embed_unembedded(stack.repositories, "kb", embedder)
    published(
        stack.repositories,
        ingestor.put("kb", "password.md", "Gardening", "# Gardening\n\nWater tomatoes early in the morning."),
    )
    # The update is published lexically; its vectors are not there yet: the old revision's rows
    # still match the paraphrase, but a document waiting for vectors competes on its lexical
    # evidence only (and validation would drop the old rows).
    assert manifest(stack).unembedded == [document_id("password.md")]
    result = search(stack, ["kb"], PARAPHRASE)
    assert "Gardening" not in titles(result) and "Password recovery" not in titles(result)

    embed_unembedded(stack.repositories, "kb", embedder)
    assert search(stack, ["kb"], "when should I water my vegetables").documents[0].document.title == "Gardening"
    assert search(stack, ["kb"], PARAPHRASE).stale_hits_dropped == 0


def test_an_embedding_failure_leaves_documents_searchable_and_loses_nothing(stack, ingestor, embedder):
    failing = FailingEmbedder(embedder)
    generation = stack.repositories.knowledge_bases.get("kb").generation
    with pytest.raises(EmbeddingFailed):
        embed_unembedded(stack.repositories, "kb", failing)
    assert failing.calls == 1 and stack.repositories.knowledge_bases.get("kb").generation == generation
    assert len(manifest(stack).unembedded) == CHUNKS
    assert titles(search(stack, ["kb"], "knead dough", max_docs=1)) == ["Baking bread"]  # lexical meanwhile

    done = embed_unembedded(stack.repositories, "kb", embedder)  # the next indexer run
    assert done.embedded_chunks == CHUNKS and manifest(stack).unembedded == []
    assert titles(search(stack, ["kb"], PARAPHRASE))[0] == "Password recovery"


def test_a_failing_query_embedding_answers_lexically(stack, ingestor, embedder):
    from agent_knowledge.retrieval.query import retrieve

    embed_unembedded(stack.repositories, "kb", embedder)
    scope = scope_of(stack, ["kb"])
    result = retrieve(
        stack.repositories.bodies, stack.repositories.documents, scope, "knead dough", 3,
        cache=stack.dependencies().index_cache(), embedder=FailingEmbedder(embedder), reranker=None,
    )  # fmt: skip
    assert titles(result)[:1] == ["Baking bread"] and result.failed_kb_ids == []


def test_another_model_is_refused_until_reindex_and_reindex_reuses_vectors(stack, ingestor, embedder):
    embed_unembedded(stack.repositories, "kb", embedder)

    published(
        stack.repositories,
        ingestor.put("kb", "new.md", "New", "# New\n\nA document the other model would have to embed."),
    )
    other = FailingEmbedder(embedder)
    other.model_id = "another-model"
    with pytest.raises(ModelMismatch):
        embed_unembedded(stack.repositories, "kb", other)
    assert other.calls == 0 and manifest(stack).unembedded == [document_id("new.md")]
    embed_unembedded(stack.repositories, "kb", embedder)
    assert len(vector_files(manifest(stack))) == 2
    # A rebuild of the same model reuses every row (no embedding) and merges to one file.
    publish_rebuild(stack.repositories, "kb", vector_space=process_vector_space())
    counting = CountingEmbedder(embedder)
    done = embed_unembedded(stack.repositories, "kb", counting)
    assert counting.texts == 0 and done.reused_chunks == CHUNKS + 1 and manifest(stack).unembedded == []
    assert len(vector_files(manifest(stack))) == 1
    assert titles(search(stack, ["kb"], PARAPHRASE))[0] == "Password recovery"


class CountingEmbedder:
    def __init__(self, real) -> None:
        self.real, self.model_id, self.dimensions, self.texts = real, real.model_id, real.dimensions, 0

    def embed_documents(self, texts):
        self.texts += len(texts)
        return self.real.embed_documents(texts)

    def embed_query(self, text):
        return self.real.embed_query(text)


def test_vector_files_merge_without_embedding_again_and_drop_replaced_revisions(stack, ingestor, embedder, monkeypatch):
    from agent_knowledge.indexer import vector_generation

    monkeypatch.setattr(vector_generation, "MAX_VECTOR_FILES", 2)
    embed_unembedded(stack.repositories, "kb", embedder)  # file 1: the four documents
    counting = CountingEmbedder(embedder)
    for round_number in range(3):  # files 2, 3, then the three merged into one beside file 4
        published(
            stack.repositories,
            ingestor.put("kb", "bread.md", "Baking bread", DOCS["bread.md"][1] + f"\n\nVariation {round_number}."),
        )
        embed_unembedded(stack.repositories, "kb", counting)
    assert counting.texts == 3  # one new chunk per round: merging embeds nothing
    current = manifest(stack)
    files = vector_files(current)
    rows = [
        row for name in files for row in VectorFile(stack.repositories.bodies.read(current.file_key(name))).rows_of()
    ]
    assert len(files) == 2 and len(rows) == CHUNKS  # the three replaced revisions of bread are gone
    bread = stack.repositories.documents.get("kb", document_id("bread.md"))
    assert {row.revision for row in rows if row.doc_id == bread.doc_id} == {bread.revision}


@pytest.fixture
def pipeline(stack) -> Pipeline:
    create_knowledge_base(stack.repositories, "kb")
    return start_pipeline(stack.environment)


def test_the_indexer_publishes_lexical_first_then_vectors(stack, pipeline, embedder):
    title, body = DOCS["password.md"]
    pipeline.put("kb/password.md", body)
    pipeline.run()
    kb = stack.repositories.knowledge_bases.get("kb")
    kinds = [index_writer.manifests.get(stack.repositories.bodies, "kb", key).kind for key in kb.index_manifests]
    assert kinds[:2] == ["vectors", "rebuild"] or kinds[:2] == ["vectors", "update"]
    assert manifest(stack).unembedded == []
    assert titles(search(stack, ["kb"], PARAPHRASE))[:1] == [title]
    assert titles(search(stack, ["kb"], "reset my password"))[:1] == [title]


def test_vectors_round_trip_through_the_reader_cache(stack, ingestor, embedder):
    embed_unembedded(stack.repositories, "kb", embedder)
    from agent_knowledge.retrieval.reader_cache import index_cache

    served = index_cache.serve(stack.repositories.bodies, stack.repositories.knowledge_bases.get("kb"))
    assert served is not None and served.manifest is not None and served.directory is not None
    (name,) = vector_files(served.manifest)
    with open(f"{served.directory}/{name}", "rb") as source:
        opened = VectorFile(source.read())
    assert opened.rows == CHUNKS and np.isclose(np.linalg.norm(opened.vectors()[0]), 1.0, atol=0.02)


def test_a_kb_mostly_waiting_for_vectors_is_searched_lexically():
    # Fusing a KB whose vectors cover few of its documents would rank those few first whatever the
    # words say: until nearly all are embedded, the KB answers lexically.
    from agent_knowledge.index_format.layout import MAX_UNEMBEDDED_SHARE, VECTOR_ROLE, IndexFile, IndexManifest
    from agent_knowledge.retrieval.query_vector import searchable

    vectors = IndexFile.model_construct(sha256="0" * 64, size=1, role=VECTOR_ROLE)

    def manifest(unembedded: int) -> IndexManifest:
        return IndexManifest.model_construct(
            embedding_model_id="space", documents=100, unembedded=[f"d{n}" for n in range(unembedded)],
            files={"a" * 32 + ".vectors": vectors},
        )  # fmt: skip

    allowed = int(MAX_UNEMBEDDED_SHARE * 100)
    assert [searchable(manifest(n), "space") for n in (0, allowed, allowed + 1, 100)] == [True, True, False, False]


def test_kb_status_says_how_many_documents_wait_for_vectors(stack, ingestor, embedder):
    from agent_knowledge.ingest.status import kb_status

    space = f"{embedder.model_id}/{embedder.dimensions}"
    waiting = kb_status(stack.repositories, "kb", sizing=SizingSettings()).vectors
    assert waiting is not None and (waiting.model, waiting.documents_waiting, waiting.covers_documents) == (
        space, CHUNKS, False,
    )  # fmt: skip
    embed_unembedded(stack.repositories, "kb", embedder)
    done = kb_status(stack.repositories, "kb", sizing=SizingSettings()).vectors
    assert done is not None and (done.model, done.documents_waiting, done.covers_documents) == (space, 0, True)
    published(
        stack.repositories, ingestor.put("kb", "new.md", "New", "# New\n\nA fresh note about kites.")
    )  # lexical first
    one_waiting = kb_status(stack.repositories, "kb", sizing=SizingSettings()).vectors
    assert one_waiting is not None and (one_waiting.model, one_waiting.documents_waiting) == (space, 1)
    # 1 of 65 documents is less than 2 %: fused, the waiting one competing on its words
    assert one_waiting.covers_documents


def test_a_search_container_reads_a_partitioned_vector_file_by_need(stack, ingestor, embedder, monkeypatch):
    # Issue 36: the file written partitioned (format 3, as files of more than EXACT_ROWS rows are), a
    # new container's reader cache leaves it out of the generation's download and search reads its
    # head and lists by ranged GETs: the same answers as from the whole file, the access filter and
    # validation unchanged.
    import functools

    from agent_knowledge.index_format.vector_writing import write_vectors
    from agent_knowledge.index_format.vectors import LISTS_FORMAT
    from agent_knowledge.indexer import vector_generation
    from agent_knowledge.retrieval.reader_cache import index_cache, reset_local_state

    monkeypatch.setattr(vector_generation, "write_vectors", functools.partial(write_vectors, partition_rows=0))
    embed_unembedded(stack.repositories, "kb", embedder)
    ((name, entry),) = vector_files(manifest(stack)).items()
    assert VectorFile(stack.repositories.bodies.read(manifest(stack).file_key(name))).format == LISTS_FORMAT
    whole = [titles(search(stack, ["kb"], query)) for query in (PARAPHRASE, "reset my password")]

    reset_local_state()  # a new container
    monkeypatch.setattr(index_cache.files, "by_need_bytes", 0)  # this file is small; real ones are > 26 MB
    by_need = [titles(search(stack, ["kb"], query)) for query in (PARAPHRASE, "reset my password")]
    assert by_need == whole and by_need[0][0] == "Password recovery"
    kb = stack.repositories.knowledge_bases.get("kb")
    served = index_cache.serve(stack.repositories.bodies, kb)
    assert served is not None and served.directory is not None
    assert name not in __import__("os").listdir(served.directory)
    # The vector file was not downloaded with the generation (nor anything else it does not need).
    assert index_cache.last_sync["kb"].downloaded_bytes <= manifest(stack).index_bytes - entry.size
