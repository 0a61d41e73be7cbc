"""The one way a writer composes a new generation: the segment files it left in a directory, the
vectors it carries, and the manifest that lists both (docs/DESIGN.md §10).

An update and a compaction edit the current generation (`base`) in place: the files `base` already
has are listed without hashing them again, its vector files and its documents waiting for vectors
are carried, and the documents the generation added wait for vectors after them. A rebuild writes
every segment anew (no `base`): every document it indexed waits for vectors, and the vector files of
a kept generation it read (`previous`) are linked in if they are of the configured model, so the
next embedding pass reuses their rows instead of embedding again (`vector_generation`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any, Literal, NamedTuple

from agent_knowledge.embedding.factory import configured_vector_space
from agent_knowledge.index_format.layout import (
    TEXT_EXTENSION,
    TEXT_ROLE,
    IndexFile,
    IndexManifest,
    file_name_ok,
    segment_files,
    sha256_of_file,
)
from agent_knowledge.index_format.versions import FORMAT_VERSION, SCHEMA_VERSION, tantivy_version
from agent_knowledge.indexer.segment_passes import alive_chunks
from agent_knowledge.indexer.vector_generation import carry_vectors, carry_vectors_into_rebuild

Kind = Literal["rebuild", "update", "compaction"]


class LocalGeneration(NamedTuple):
    """A kept generation and the directory holding its files."""

    manifest: IndexManifest
    directory: str


def compose_generation(
    directory: str,
    kb_id: str,
    generation: int,
    documents: int,
    kind: Kind,
    added: Iterable[str],
    base: IndexManifest | None = None,
    previous: LocalGeneration | None = None,
) -> IndexManifest:
    """The manifest of the index in `directory` as generation `generation`, with its vectors.
    `added`: the documents whose chunks it added (a rebuild: every document it indexed). `base`:
    the generation an update or a compaction edited. `previous`: for a rebuild, a kept generation
    whose vector files may be reused."""
    manifest = describe(directory, kb_id, generation, documents, base, kind)
    vector_space = configured_vector_space()
    if base is None:
        previous_manifest, previous_directory = previous if previous is not None else (None, None)
        return carry_vectors_into_rebuild(
            manifest, previous_manifest, previous_directory, directory, added, vector_space
        )
    return carry_vectors(manifest, base, added, vector_space)


def describe(
    directory: str,
    kb_id: str,
    generation: int,
    documents: int,
    base: IndexManifest | None,
    kind: Kind,
) -> IndexManifest:
    """The manifest of the segment files in `directory` alone (no vectors). Files the base already
    has are immutable, so only new ones are hashed."""
    with open(os.path.join(directory, "meta.json"), encoding="utf-8") as source:
        meta: dict[str, Any] = json.load(source)
    names = [name for name in os.listdir(directory) if file_name_ok(name)]
    files: dict[str, IndexFile] = {}
    for name in segment_files(meta, names):
        if base is not None and name in base.files:
            files[name] = base.files[name]
        else:
            sha256, size = sha256_of_file(os.path.join(directory, name))
            role = TEXT_ROLE if name.endswith(f".{TEXT_EXTENSION}") else "tantivy"
            files[name] = IndexFile(sha256=sha256, size=size, role=role)
    chunks = sum(alive_chunks(segment) for segment in meta.get("segments", []))
    return IndexManifest(
        format_version=FORMAT_VERSION,
        schema_version=SCHEMA_VERSION,
        tantivy_version=tantivy_version(),
        kb_id=kb_id,
        generation=generation,
        documents=documents,
        chunks=chunks,
        index_bytes=sum(entry.size for entry in files.values()),
        files=files,
        meta=meta,
        kind=kind,
    )
