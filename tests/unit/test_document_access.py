"""Document-level access (issue 33): the sidecar's strict format, the one `visible` rule, and the same
rule as the search index applies it (terms on every chunk, a filter inside the query)."""

from __future__ import annotations

import json
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_knowledge.identity.document_access import (
    ANONYMOUS,
    AccessSidecarInvalid,
    Viewer,
    document_key,
    index_terms,
    is_sidecar,
    parse_sidecar,
    sidecar_json,
    sidecar_key,
    visible,
    visible_terms,
)
from agent_knowledge.index_format.analyzer import query_tokens
from agent_knowledge.index_format.builder import write_index
from agent_knowledge.index_format.chunks import IndexedChunk, chunk_digest
from agent_knowledge.index_format.kb_index import TERM_SET_FROM, AccessFilter, AnalyzedQuery, KbIndex
from agent_knowledge.records import DocumentAccess, Principal

ALICE = Principal(id="alice", tenant="acme", roles=["analyst", "hr"])


def sidecar(value: object) -> bytes:
    return json.dumps(value).encode()


def test_a_sidecar_declares_allow_and_deny_entries():
    access = parse_sidecar(
        sidecar({"access": {"allow": ["role:hr", "principal:bob", "role:hr"], "deny": ["tenant:x"]}})
    )
    assert access == DocumentAccess(allow=["role:hr", "principal:bob"], deny=["tenant:x"])
    assert parse_sidecar(sidecar({"access": {"deny": ["everyone"]}})) == DocumentAccess(allow=[], deny=["everyone"])
    assert parse_sidecar(sidecar_json(access)) == access
    assert parse_sidecar(b"\xef\xbb\xbf" + sidecar({"access": {"allow": ["everyone"]}})).allow == ["everyone"]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"{", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b'{"access": {"allow": [NaN]}}', "not JSON"),
        (sidecar([]), 'one key, "access"'),
        (sidecar({"access": {"allow": []}, "title": "x"}), 'one key, "access"'),
        (sidecar({"acess": {"allow": []}}), 'one key, "access"'),
        (sidecar({"access": []}), '"allow" and/or "deny"'),
        (sidecar({"access": {}}), '"allow" and/or "deny"'),
        (sidecar({"access": {"allow": [], "owner": "x"}}), '"allow" and/or "deny"'),
        (sidecar({"access": {"allow": "role:hr"}}), '"access.allow" must be a list'),
        (sidecar({"access": {"allow": ["hr"]}}), "'hr' is not principal:<id>"),
        (sidecar({"access": {"allow": ["role:"]}}), "is not principal:<id>"),
        (sidecar({"access": {"allow": ["role:h r"]}}), "without whitespace"),
        (sidecar({"access": {"allow": ["group:x"]}}), "is not principal:<id>"),
        (sidecar({"access": {"deny": [7]}}), "must be a string, not int"),
        (sidecar({"access": {"allow": ["role:" + "x" * 300]}}), "longer than 256"),
        (sidecar({"access": {"allow": [f"role:r{n}" for n in range(1001)]}}), "more than 1000"),
        (b" " * (64 * 1024 + 1), "larger than 65536 bytes"),
    ],
)
def test_a_malformed_sidecar_is_refused_with_its_reason(content, reason):
    with pytest.raises(AccessSidecarInvalid, match=None) as raised:
        parse_sidecar(content)
    assert reason in raised.value.message


def test_sidecar_keys():
    assert is_sidecar("hr/pay.md.metadata.json") and sidecar_key("hr/pay.md") == "hr/pay.md.metadata.json"
    assert document_key("hr/pay.md.metadata.json") == "hr/pay.md"
    assert not is_sidecar("hr/pay.md") and not is_sidecar(".metadata.json")


def test_the_rule():
    alice = Viewer.of(ALICE)
    assert visible(None, "route", alice) and not visible(None, "none", alice)
    assert visible(None, "route", ANONYMOUS) and not visible(None, "none", ANONYMOUS)
    assert visible(DocumentAccess(allow=["role:hr"]), "none", alice)
    assert visible(DocumentAccess(allow=["tenant:acme"]), "none", alice)
    assert visible(DocumentAccess(allow=["principal:alice"]), "none", alice)
    assert not visible(DocumentAccess(allow=["role:hr"], deny=["principal:alice"]), "route", alice)  # deny wins
    assert not visible(DocumentAccess(allow=["everyone"], deny=["tenant:acme"]), "route", alice)
    assert not visible(DocumentAccess(allow=[]), "route", alice)  # an access list: the default no longer applies
    assert visible(DocumentAccess(allow=["everyone"]), "none", ANONYMOUS)
    assert not visible(DocumentAccess(allow=["role:hr"]), "route", ANONYMOUS)
    # On behalf of bob: both must be allowed (bob is known by id only).
    for_bob = Viewer.of(ALICE, on_behalf_of="bob")
    assert not visible(DocumentAccess(allow=["role:hr"]), "route", for_bob)
    assert visible(DocumentAccess(allow=["role:hr", "principal:bob"]), "route", for_bob)
    assert visible(DocumentAccess(allow=["everyone"]), "route", for_bob)
    assert not visible(DocumentAccess(allow=["everyone"], deny=["principal:bob"]), "route", for_bob)
    assert not visible(DocumentAccess(allow=["principal:bob"]), "route", for_bob)  # alice is not allowed


NAMES = st.sampled_from(["a", "b", "c"])
ENTRIES = st.one_of(
    st.just("everyone"),
    NAMES.map(lambda name: f"principal:{name}"),
    NAMES.map(lambda name: f"role:{name}"),
    NAMES.map(lambda name: f"tenant:{name}"),
)
ACCESS = st.one_of(
    st.none(),
    st.builds(
        lambda allow, deny: DocumentAccess(allow=list(dict.fromkeys(allow)), deny=list(dict.fromkeys(deny))),
        st.lists(ENTRIES, max_size=4),
        st.lists(ENTRIES, max_size=2),
    ),
)
PRINCIPALS = st.one_of(
    st.none(),
    st.builds(
        lambda id_, tenant, roles: Principal(id=id_, tenant=tenant, roles=roles),
        NAMES,
        st.one_of(st.none(), NAMES),
        st.lists(NAMES, max_size=2, unique=True),
    ),
)
VIEWERS = st.builds(Viewer.of, PRINCIPALS, st.one_of(st.none(), NAMES))
DEFAULTS = st.sampled_from(["route", "none"])


@settings(max_examples=500, deadline=None)
@given(ACCESS, DEFAULTS, VIEWERS)
def test_the_index_terms_keep_the_rule(access, default, viewer):
    assert visible_terms(index_terms(access), default, viewer) == visible(access, default, viewer)


def _chunk(doc_id: str, text: str, access: DocumentAccess | None) -> IndexedChunk:
    return IndexedChunk(doc_id, "r1", 0, chunk_digest(text), text, tuple(index_terms(access)))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(ACCESS, st.booleans()), min_size=1, max_size=12), DEFAULTS, VIEWERS)
def test_the_lexical_filter_finds_exactly_the_visible_matching_documents(documents, default, viewer):
    """Documents that hold the query word or not, under random access lists: the filtered search
    finds every visible matching document and nothing else, ranked as without the filter."""
    chunks = [
        _chunk(f"doc{n}", f"note {n} about {'zebras' if matching else 'lions'}", access)
        for n, (access, matching) in enumerate(documents)
    ]
    with tempfile.TemporaryDirectory() as directory:
        write_index(directory, chunks)
        index = KbIndex.open(directory, 1)
        query = AnalyzedQuery.of(query_tokens("zebras"))
        found = index.best_per_document(query, 100, AccessFilter(default, viewer))
        everything = {hit.doc_id: hit.score for hit in index.best_per_document(query, 100)}
        expected = {
            f"doc{n}" for n, (access, matching) in enumerate(documents) if matching and visible(access, default, viewer)
        }
        assert {hit.doc_id for hit in found} == expected
        assert all(hit.score == pytest.approx(everything[hit.doc_id]) for hit in found)  # the filter scores nothing
        for n, (access, _) in enumerate(documents):
            terms = index.access_of(f"doc{n}")
            assert terms is not None and visible_terms(terms, default, viewer) == visible(access, default, viewer)


def test_a_filter_down_to_a_small_visible_share_still_fills_the_top_k():
    """60 documents match, the 57 best are hidden: the three visible ones are the top 3."""
    chunks = []
    for n in range(60):
        words = " ".join(["zebras"] * (60 - n))  # doc0 scores highest
        access = DocumentAccess(allow=["role:hr"]) if n >= 57 else DocumentAccess(allow=["role:exec"])
        chunks.append(_chunk(f"doc{n}", f"{words} and other words of note {n}", access))
    with tempfile.TemporaryDirectory() as directory:
        write_index(directory, chunks)
        index = KbIndex.open(directory, 1)
        query = AnalyzedQuery.of(query_tokens("zebras"))
        hits = index.best_per_document(query, 3, AccessFilter("route", Viewer.of(ALICE)))
        assert [hit.doc_id for hit in hits] == ["doc57", "doc58", "doc59"]
        unfiltered = index.best_per_document(query, 3)  # without the filter: three hidden ones
        assert len(unfiltered) == 3 and all(int(hit.doc_id[3:]) < 57 for hit in unfiltered)


def test_a_chunk_indexed_without_access_terms_is_seen_by_nobody():
    text = "zebras everywhere"
    chunk = IndexedChunk("doc0", "r1", 0, chunk_digest(text), text)  # no terms at all
    with tempfile.TemporaryDirectory() as directory:
        write_index(directory, [chunk])
        index = KbIndex.open(directory, 1)
        query = AnalyzedQuery.of(query_tokens("zebras"))
        assert index.best_per_document(query, 3, AccessFilter("route", ANONYMOUS)) == []
        assert not AccessFilter("route", ANONYMOUS).admits(index.access_of("doc0") or ())


@pytest.mark.parametrize("roles", [3, TERM_SET_FROM + 50])
def test_the_filter_is_the_same_for_few_and_very_many_entries(roles):
    """Below TERM_SET_FROM terms a disjunction of term queries, above it one term set: the same chunks."""
    chunks = [
        _chunk("doc0", "zebras one", DocumentAccess(allow=["role:r1"])),
        _chunk("doc1", "zebras two", DocumentAccess(allow=["role:other"])),
        _chunk("doc2", "zebras three", DocumentAccess(allow=["role:r2"], deny=["role:r0"])),
        _chunk("doc3", "zebras four", None),
    ]
    viewer = Viewer.of(Principal(id="v", roles=[f"r{n}" for n in range(roles)]))
    with tempfile.TemporaryDirectory() as directory:
        write_index(directory, chunks)
        index = KbIndex.open(directory, 1)
        query = AnalyzedQuery.of(query_tokens("zebras"))
        for default, expected in (("route", {"doc0", "doc3"}), ("none", {"doc0"})):
            assert {hit.doc_id for hit in index.best_per_document(query, 10, AccessFilter(default, viewer))} == expected
