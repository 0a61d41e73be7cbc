"""A KB's search index in the bodies bucket: immutable files and one small manifest per generation.

    indexes/{kb_id}/files/{sha256}.{name}                       a tantivy file (segment component or
                                                                delete bitset), never overwritten
    indexes/{kb_id}/manifests/{generation:012d}-{token}.json    what generation g is made of

A manifest lists every file of the generation (name, SHA-256, size), tantivy's own `meta.json`
(segments, their delete files, the schema), the schema/tokenizer version, the tantivy version
that wrote it, and the document and chunk counts. The KB record names the manifests of the kept
generations, newest first; a generation becomes visible only by the conditional write that puts
its manifest at the head of that list, after every file and the manifest itself were uploaded
(docs/DESIGN.md §10). The token makes each writer's manifest key its own, so a writer that loses
the race never overwrites the winner's.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from agent_knowledge.errors import IndexUnavailable
from agent_knowledge.index_format.versions import FORMAT_VERSION, SCHEMA_VERSION, tantivy_version, versions_of

# How many generations the KB record keeps (the newest and the ones a reader or writer may fall
# back to); files referenced by none of them are deleted.
KEEP_GENERATIONS = 3
MANIFEST_CONTENT_TYPE = "application/json"
FILE_CONTENT_TYPE = "application/octet-stream"

# tantivy's file names: a segment id (32 hex digits), an optional delete opstamp, an extension.
# Anything else (a path, "..", a lock file) is refused: names become local file names.
_FILE_NAME = r"^[0-9a-f]{32}(\.[0-9]{1,20})?\.[a-z]{1,16}$"
FileName = Annotated[str, StringConstraints(pattern=_FILE_NAME)]


class IndexCorrupt(IndexUnavailable):
    """A manifest or an index file is unreadable, truncated or not what the manifest says."""


class IndexIncompatible(IndexUnavailable):
    """The generation was written in a format, schema or tantivy version this code cannot read."""


class IndexFile(BaseModel):
    """One file of a generation: its content address, its size, and what it is for — `tantivy`
    for a segment component or delete bitset; other per-segment files (named after their
    segment like tantivy's) get their own role."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
    size: Annotated[int, Field(ge=0)]
    role: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,31}$")] = "tantivy"


# A segment's chunk texts (`index_format/chunk_text`): `{segment_id}.chunks`, role `text` in the manifest.
TEXT_ROLE = "text"
TEXT_EXTENSION = "chunks"


class VectorFileCorrupt(IndexUnavailable):
    """A vector file is truncated, of an unknown format, of another model, or inconsistent with its
    header (`index_format/vectors`; defined here so that search can catch it without importing numpy)."""


@runtime_checkable
class RangeReads(Protocol):
    """What reading part of an index object takes of the bodies bucket (`BodyStore`)."""

    def read_range(self, key: str, start: int, end: int, etag: str | None = None) -> tuple[bytes, dict[str, str]]: ...


def read_object_range(
    objects: RangeReads, key: str, start: int, end: int, corrupt: type[IndexUnavailable], what: str
) -> bytes:
    """Bytes [start, end) of the index object `key`, exactly. The manifest named the object and its
    size, so a missing or replaced object, or fewer bytes, is `corrupt` (chunk texts, vector files)."""
    from agent_knowledge.repositories.bodies import BodyMissing, BodyReplaced

    try:
        data, _ = objects.read_range(key, start, end)
    except (BodyMissing, BodyReplaced) as exc:
        raise corrupt(f"{what} is missing from the index storage") from exc
    if len(data) != end - start:
        raise corrupt(f"{what} is shorter than its manifest says")
    return data


# A vector file's role in a generation's manifest (beside the tantivy files; `index_format/vectors`).
VECTOR_ROLE = "vectors"
# While more than this share of a KB's documents still wait for their vectors (a bulk load being
# embedded), the KB is searched lexically: fusing then would rank the embedded documents above the
# others merely because they have vectors (measured on a 876-document folder: the best lexical
# matches fell below embedded documents that did not contain the query's words).
MAX_UNEMBEDDED_SHARE = 0.02


class IndexManifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format_version: int
    schema_version: int
    tantivy_version: str
    kb_id: str
    generation: Annotated[int, Field(ge=1)]
    documents: Annotated[int, Field(ge=0)]
    chunks: Annotated[int, Field(ge=0)]
    # The bytes of every file: what a container must hold in its ephemeral storage to serve it.
    index_bytes: Annotated[int, Field(ge=0)]
    files: dict[FileName, IndexFile]
    # tantivy's meta.json, written as is into the directory the generation is opened from.
    meta: dict[str, Any]
    kind: Literal["rebuild", "update", "compaction", "vectors"] = "update"
    # Hybrid retrieval (indexer/vector_generation.py): the vector space of the generation's vector
    # files (role `vectors`; "" if it has none), and the documents whose chunks have no vectors yet.
    embedding_model_id: str = ""
    unembedded: list[str] = Field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return self.index_bytes

    @property
    def has_vectors(self) -> bool:
        return any(entry.role == VECTOR_ROLE for entry in self.files.values())

    @property
    def vectors_cover_documents(self) -> bool:
        """The generation has vector files and nearly every document has its vectors (at most
        MAX_UNEMBEDDED_SHARE still waiting): search may fuse dense results for it."""
        return self.has_vectors and len(self.unembedded) <= MAX_UNEMBEDDED_SHARE * self.documents

    def file_key(self, name: str) -> str:
        return file_key(self.kb_id, name, self.files[name])

    def object_keys(self) -> set[str]:
        return {self.file_key(name) for name in self.files}

    def to_bytes(self) -> bytes:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":")).encode("utf-8")


def prefix(kb_id: str) -> str:
    return f"indexes/{kb_id}/"


def file_key(kb_id: str, name: str, entry: IndexFile) -> str:
    return f"{prefix(kb_id)}files/{entry.sha256}.{name}"


def file_keys(kb_id: str, files: Mapping[str, IndexFile | dict[str, Any]]) -> dict[str, str]:
    """The object key of each of a generation's files, by name, in one call (a writer maps every
    file of every kept manifest; `files` as parsed or as a manifest's raw JSON holds them).
    ValueError if an entry is not an index file."""
    base = f"{prefix(kb_id)}files/"
    keys = {}
    for name, entry in files.items():
        sha256 = (entry if isinstance(entry, IndexFile) else IndexFile.model_validate(entry)).sha256
        keys[name] = f"{base}{sha256}.{name}"
    return keys


def manifest_key(kb_id: str, generation: int) -> str:
    return f"{prefix(kb_id)}manifests/{generation:012d}-{uuid.uuid4().hex}.json"


def parse_manifest(data: bytes, kb_id: str) -> IndexManifest:
    """The manifest in `data`, checked: IndexIncompatible for another format, schema or tantivy
    version; IndexCorrupt for anything unreadable or inconsistent."""
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise IndexCorrupt("index manifest is not JSON") from exc
    if not isinstance(raw, dict):
        raise IndexCorrupt("index manifest is not an object")
    versions = versions_of(raw)
    if versions != (FORMAT_VERSION, SCHEMA_VERSION, tantivy_version()):
        raise IndexIncompatible(f"index written as format/schema/tantivy {versions}")
    try:
        manifest = IndexManifest.model_validate(raw)
    except ValidationError as exc:
        raise IndexCorrupt("index manifest does not validate") from exc
    if manifest.kb_id != kb_id:
        raise IndexCorrupt("index manifest belongs to another knowledge base")
    if manifest.index_bytes != sum(entry.size for entry in manifest.files.values()):
        raise IndexCorrupt("index manifest's size is not the sum of its files")
    tantivy_files = {name for name, entry in manifest.files.items() if entry.role == "tantivy"}
    if set(segment_files(manifest.meta, tantivy_files)) != tantivy_files:
        raise IndexCorrupt("index manifest files do not match its segments")
    text_files = {name for name, entry in manifest.files.items() if entry.role == TEXT_ROLE}
    segment_ids = [str(segment["segment_id"]).replace("-", "") for segment in manifest.meta.get("segments", [])]
    if text_files != {f"{segment_id}.{TEXT_EXTENSION}" for segment_id in segment_ids}:
        raise IndexCorrupt("index manifest does not list one chunk text file per segment")
    return manifest


def segment_files(meta: dict[str, Any], names: Any) -> list[str]:
    """The files among `names` that the segments of tantivy's `meta` use: each segment's
    components, and its current delete file if it has deletions."""
    wanted: list[str] = []
    for segment in meta.get("segments", []):
        segment_id = str(segment["segment_id"]).replace("-", "")
        deletes = segment.get("deletes")
        current_delete = f"{segment_id}.{deletes['opstamp']}.del" if deletes else None
        for name in names:
            if not name.startswith(f"{segment_id}."):
                continue
            if name.endswith(".del") and name != current_delete:
                continue  # an older delete file of this segment
            wanted.append(name)
        if current_delete is not None and current_delete not in names:
            raise IndexCorrupt("a segment's delete file is missing")
    return sorted(wanted)


def file_name_ok(name: str) -> bool:
    return re.match(_FILE_NAME, name) is not None


def sha256_of_file(path: str) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as source:
        while piece := source.read(1024 * 1024):
            digest.update(piece)
            size += len(piece)
    return digest.hexdigest(), size
