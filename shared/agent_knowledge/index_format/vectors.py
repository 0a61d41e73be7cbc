"""Immutable, content-addressed files of chunk vectors: their format, how they are read, and their
search (a file is written by `vector_writing`).

A vector file holds the embeddings of a set of chunks (a segment's, in the index generation) and,
per row, what a hit is validated with exactly like a lexical hit: the document id, the revision
that was embedded, the chunk number and the chunk's digest (`index_format/chunks.chunk_digest`). It is
written once and never changed; its name is derived from its SHA-256 (`file_name`), so it can be
listed in a generation's manifest and synced by the reader cache like a tantivy file.

Storage per row (d = dimensions, 512 for the local model): d bytes of int8 codes with one float32
scale (symmetric per-row quantisation: cosine error ~1e-3), the document number and chunk number
(uint32 each) and the 8-byte digest: 532 bytes at d = 512 (1,044 at Titan's 1024), plus, in a
partitioned file, d float32 per list (~2 bytes per row at 1M rows at d = 512), and the header's list
of documents: a file of 1M chunks of 4 per document measured 538 MB (bench/README.md).

Search: up to `EXACT_ROWS` rows the int8 codes are scored exactly (one float32 matrix-vector product
per block). A file of more rows is written partitioned (an inverted file): a spherical k-means of
~sqrt(rows) centroids is trained at write time, each row belongs to its most similar centroid, and
the rows are stored grouped by list. A query scores the centroids, then scans exactly (int8) the
rows of its `PROBES` most similar lists only: contiguous slices, no gather. docs/retrieval.md
("Hybrid retrieval", Storage) gives the recall@10 against exact float cosine and the query CPU at
1M rows. A file's rows are in the file's order, which for a partitioned file is not the order
they were given in (rows are identified by their document, chunk and digest, never by position).

    MAGIC (8 bytes) | header length (uint32 LE) | header (JSON) | zero padding to 64 | arrays

The header names the model, the dimensions, the row count, the documents (id, revision) and each
array's offset, dtype and shape; arrays are little-endian and 64-byte aligned, so a loaded file is
used in place (`np.frombuffer` over the bytes or a memory map), never copied. Format 1 (sign bits
of the centred vectors for a Hamming preselection, rows unpartitioned) is still read: its files are
scanned exactly until a merge or a rebuild writes them again in format 2.
"""

from __future__ import annotations

import hashlib
import json
import math
import mmap
import os
import re
import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from agent_knowledge.index_format.layout import VECTOR_ROLE, VectorFileCorrupt

if TYPE_CHECKING:
    from agent_knowledge.index_format.layout import IndexFile, IndexManifest

MAGIC = b"AKVEC\x00\x01\x00"
# Format of a file scanned whole (up to `partition_rows` rows): flat arrays. 2: inverted-file
# partition (centroids, list offsets) instead of format 1's sign bits; partitioned files were
# written in format 2 until format 3, and are still read (whole, like a small file).
FORMAT_VERSION = 2
# Format of a partitioned file: a head (header, centroids, list offsets, each list block's place and
# CRC-32, the background sample) then one block per list with all of its rows' arrays, so that a
# search container reads the head and the lists a query probes by ranged GETs (index_format/vector_ranges).
LISTS_FORMAT = 3
READABLE_FORMATS = (1, FORMAT_VERSION, LISTS_FORMAT)
EXTENSION = "vectors"
# Up to this many rows every row is scored with its int8 codes (exact up to quantisation); a file
# of more rows is written partitioned.
EXACT_ROWS = 50_000
# Lists scanned per query in a partitioned file. Measured at 1M rows (1,000 lists of ~1,000 rows,
# bench/README.md "Vector search at 1M rows"): 16 lists gave mean recall@10 0.977-0.985 but single
# queries down to 0.6; 32 gave 0.982-0.993, no query below 0.9, at ~5 ms of CPU (target 20 ms).
PROBES = 32
# Rows scored per block of the exact scan (bounds the float32 temporary: 8k x 512 x 4 = 16 MB).
BLOCK_ROWS = 8192
DIGEST_BYTES = 8
_ALIGN = 64
# The type of each array a reader uses (a header naming another is corrupt; format 1's sign bits and
# mean are not read).
ARRAY_DTYPES = {
    "codes": "|i1",
    "scales": "<f4",
    "centroids": "<f4",
    "list_offsets": "<u8",
    "doc_numbers": "<u4",
    "chunk_indexes": "<u4",
    "digests": "|u1",
}
ARRAY_DIMENSIONS = {
    "codes": 2,
    "scales": 1,
    "centroids": 2,
    "list_offsets": 1,
    "doc_numbers": 1,
    "chunk_indexes": 1,
    "digests": 2,
}
REQUIRED_ARRAYS = ("codes", "scales", "doc_numbers", "chunk_indexes", "digests")
PARTITION_ARRAYS = ("centroids", "list_offsets")  # format 2
# Format 3: the head's arrays, and the bytes per row of each array of a list block (codes: d).
HEAD_ARRAYS = (
    "centroids", "list_offsets", "list_bytes", "list_crc32", "sample_codes", "sample_scales",
    "doc_offsets", "doc_names",
)  # fmt: skip
HEAD_DTYPES = {
    "list_bytes": "<u8", "list_crc32": "<u4", "sample_codes": "|i1", "sample_scales": "<f4", "doc_offsets": "<u4",
    "doc_names": "|u1",
}  # fmt: skip
HEAD_DIMENSIONS = {
    "list_bytes": 1, "list_crc32": 1, "sample_codes": 2, "sample_scales": 1, "doc_offsets": 1, "doc_names": 1,
}  # fmt: skip
_BLOCK_ROW_BYTES = {"codes": 0, "scales": 4, "doc_numbers": 4, "chunk_indexes": 4, "digests": DIGEST_BYTES}
# Rows of a partitioned file's background sample (retrieval/dense `_Sample`: the KB's sample takes at
# most this many rows of any one file).
SAMPLE_ROWS = 256
# Bounds of a header's numbers (anything beyond is damage): dimensions of any embedding model in
# use (Titan's 1024 at most), rows numbered by uint32.
MAX_DIMENSIONS = 65_536
MAX_ROWS = 2**32 - 1
MAX_FILE_BYTES = 2**63 - 1
# How a format 3 header starts: its head's size (from the arrays' start) is in a file's first bytes.
HEAD_PREFIX = re.compile(rb'\{"format":3,"lists_at":(\d{1,19}),')


def vector_files(manifest: IndexManifest) -> dict[str, IndexFile]:
    """The generation's vector files by name (here, not in `vector_generation`: search needs this
    and must not import the index writer at cold start)."""
    return {name: entry for name, entry in manifest.files.items() if entry.role == VECTOR_ROLE}


@dataclass(frozen=True, slots=True)  # slots: a merge of a million rows holds a million of these
class VectorRow:
    """What one row's vector belongs to: hits are validated against the current records with it."""

    doc_id: str
    revision: str
    chunk_index: int
    chunk_digest: str  # 16 hex digits


@dataclass(frozen=True)
class VectorHit:
    row: int
    score: float  # cosine similarity of the int8-reconstructed vector with the query
    doc_id: str
    revision: str
    chunk_index: int
    chunk_digest: str


def file_name(data: bytes) -> str:
    """The file's name in the index: the first 32 hex digits of its SHA-256 (the manifest keeps the
    whole digest), so a name never refers to two different contents."""
    return name_of(hashlib.sha256(data).hexdigest())


def name_of(sha256_hex: str) -> str:
    """`file_name` of a file whose SHA-256 is known (one written in a stream)."""
    return f"{sha256_hex[:32]}.{EXTENSION}"


def reconstructed(codes: npt.NDArray[np.int8], scales: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    return codes.astype(np.float32) * scales[:, None]


def block_layout(rows: int, dimensions: int) -> tuple[dict[str, tuple[int, int]], int]:
    """Where each per-row array of a list block of `rows` rows lies in the block (offset, bytes),
    and the block's size: codes, scales, document numbers, chunk numbers, digests, each 64-aligned."""
    places: dict[str, tuple[int, int]] = {}
    offset = 0
    for name, row_bytes in _BLOCK_ROW_BYTES.items():
        size = rows * (dimensions if name == "codes" else row_bytes)
        places[name] = (offset, size)
        offset += padded(size)
    return places, offset


def padded(size: int) -> int:
    return size + (-size) % _ALIGN


def open_vector_file(path: str, space: str | None = None) -> VectorFile:
    """The vector file at `path`, memory-mapped: pages are read as searches touch them, and the
    mapping stays valid after the file is unlinked (the reader cache lets go of old generations).
    `space`: the manifest's `embedding_model_id`; a file of another model (or of other dimensions
    than the space's) is corrupt, since its rows cannot be compared with that model's queries.
    A damaged file raises VectorFileCorrupt, never another error (search fails that file's KB
    alone, and the indexer drops the file: `vector_generation`)."""
    with open(path, "rb") as source:
        if os.fstat(source.fileno()).st_size == 0:
            raise VectorFileCorrupt("vector file is empty")
        mapped = mmap.mmap(source.fileno(), 0, access=mmap.ACCESS_READ)
    opened = VectorFile(mapped)
    if space is not None:
        opened.check_space(space)
    return opened


def _refused_constant(name: str) -> Any:
    raise VectorFileCorrupt(f"vector file header holds {name}, which is not a number")


def _integer(value: object, what: str, low: int, high: int) -> int:
    """`value` if it is a JSON integer from `low` to `high` (not a float, a boolean or a string)."""
    if type(value) is not int or not low <= value <= high:
        raise VectorFileCorrupt(f"vector file header {what} is {value!r:.40}, expected an integer from {low} to {high}")
    return value


class ListSource(Protocol):
    """Where a partitioned (format 3) file's list blocks come from: `spans` are (list number, start,
    end) in the file; the answer holds each one's bytes (index_format/vector_ranges fetches them by need)."""

    def blocks(self, spans: Sequence[tuple[int, int, int]]) -> dict[int, memoryview]: ...


class _Documents(Protocol):
    """A file's documents by number: (doc_id, revision)."""

    def __len__(self) -> int: ...

    def __getitem__(self, number: int) -> tuple[str, str]: ...


class _Listed(list[tuple[str, str]]):
    """Formats 1 and 2: the header's JSON list of documents, parsed whole at open."""


class _Packed:
    """Format 3: the documents' names as UTF-8 in the head, decoded one document at a time (a search
    names its hits only: at 1M rows a file lists ~250,000 documents)."""

    def __init__(self, offsets: npt.NDArray[np.int64], names: bytes) -> None:
        self._offsets = offsets.tolist()
        self._names = names
        # Decoded names, kept: a warm container's searches name the same documents again, and
        # decoding each hit's names every time cost a fifth of a warm search at 100k rows.
        self._decoded: dict[int, tuple[str, str]] = {}

    def __len__(self) -> int:
        return (len(self._offsets) - 1) // 2

    def __getitem__(self, number: int) -> tuple[str, str]:
        known = self._decoded.get(number)
        if known is not None:
            return known
        if not 0 <= number < len(self):
            raise IndexError(number)
        at = self._offsets
        try:
            doc_id = self._names[at[2 * number] : at[2 * number + 1]].decode()
            revision = self._names[at[2 * number + 1] : at[2 * number + 2]].decode()
        except UnicodeDecodeError as exc:
            raise VectorFileCorrupt(f"vector file document {number} is not UTF-8") from exc
        self._decoded[number] = (doc_id, revision)
        return doc_id, revision


class _Slices:
    """List blocks of a file whose bytes are all at hand (read whole, or memory-mapped)."""

    def __init__(self, buffer: memoryview) -> None:
        self._buffer = buffer

    def blocks(self, spans: Sequence[tuple[int, int, int]]) -> dict[int, memoryview]:
        return {number: self._buffer[start:end] for number, start, end in spans}


@dataclass(frozen=True)
class _List:
    """The rows of one list (or of a whole flat file): `first` is its first row's number."""

    first: int
    codes: npt.NDArray[np.int8]
    scales: npt.NDArray[np.float32]
    doc_numbers: npt.NDArray[np.uint32]
    chunk_indexes: npt.NDArray[np.uint32]
    digests: npt.NDArray[np.uint8]


class VectorFile:
    """A vector file opened for search over `data` (bytes, or a memory map of the file: arrays are
    views into it, so opening costs the header parse only). Every field of the header is checked
    for its JSON type and range before it is used, so whatever a damaged header holds (another
    type anywhere, a huge or negative number, NaN, deep nesting) is VectorFileCorrupt.

    A format 3 file may be opened from its head alone (`data` up to the first list block, `size`
    the whole file's size, `lists` what fetches blocks: index_format/vector_ranges); a list block is
    checked (CRC-32, document numbers, scales) the first time it is used."""

    def __init__(self, data: Any, size: int | None = None, lists: ListSource | None = None) -> None:
        buffer = memoryview(data)
        if len(buffer) < len(MAGIC) + 4 or bytes(buffer[: len(MAGIC)]) != MAGIC:
            raise VectorFileCorrupt("not a vector file of this format")
        self.size = len(buffer) if size is None else size
        self._source: ListSource = lists if lists is not None else _Slices(buffer)
        self._parsed: dict[int, _List] = {}  # format 3: the lists read and checked so far
        try:
            self._read(buffer)
        except VectorFileCorrupt:
            raise
        except (
            KeyError, TypeError, ValueError, IndexError, OverflowError, AttributeError, RecursionError, struct.error
        ) as exc:  # fmt: skip
            # Not expected after the checks of `_read`; should one miss a case, it is still one clean
            # error, so that search fails this KB's source (`partial`) and never the whole request.
            raise VectorFileCorrupt(f"unreadable vector file header or arrays: {type(exc).__name__}: {exc}") from exc

    def check_space(self, space: str) -> None:
        """Raise VectorFileCorrupt unless this file was embedded in `space` ("model/dimensions")."""
        if self.model_id != space:
            raise VectorFileCorrupt(f"vector file of model {self.model_id!r:.80}, the index's is {space!r}")
        _, _, dimensions = space.rpartition("/")
        if dimensions.isdigit() and int(dimensions) != self.dimensions:
            raise VectorFileCorrupt(f"vector file of {self.dimensions} dimensions, the index's space is {space!r}")

    @staticmethod
    def header(buffer: memoryview) -> tuple[dict[str, Any], int]:
        """The parsed header (a JSON object) and where the arrays start."""
        (header_length,) = struct.unpack_from("<I", buffer, len(MAGIC))
        if len(MAGIC) + 4 + header_length > len(buffer):
            raise VectorFileCorrupt("vector file is truncated in its header")
        raw = bytes(buffer[len(MAGIC) + 4 : len(MAGIC) + 4 + header_length])
        try:
            header = json.loads(raw, parse_constant=_refused_constant)
        except RecursionError as exc:
            raise VectorFileCorrupt("vector file header is nested too deeply") from exc
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
            raise VectorFileCorrupt(f"vector file header is not JSON: {exc}") from exc
        if not isinstance(header, dict):
            raise VectorFileCorrupt("vector file header is not a JSON object")
        return header, padded(len(MAGIC) + 4 + header_length)

    def _read(self, buffer: memoryview) -> None:
        header, start = self.header(buffer)
        self._start = start
        version = header.get("format")
        if type(version) is not int or version not in READABLE_FORMATS:
            raise VectorFileCorrupt(f"vector file format {version!r:.40}, this code reads formats {READABLE_FORMATS}")
        self.format: int = version
        model_id = header.get("model_id")
        if not isinstance(model_id, str):
            raise VectorFileCorrupt("vector file header model_id is not a string")
        self.model_id: str = model_id
        self.dimensions: int = _integer(header.get("dimensions"), "dimensions", 1, MAX_DIMENSIONS)
        # Rows and documents are numbered by uint32 arrays.
        self.rows: int = _integer(header.get("rows"), "rows", 0, MAX_ROWS)
        documents = header.get("documents")
        self._documents: _Documents
        if version == LISTS_FORMAT:  # their names are in the head's arrays (`_read_head`)
            self._document_count = _integer(documents, "documents", 0, MAX_ROWS)
        else:
            if not isinstance(documents, list):
                raise VectorFileCorrupt("vector file header documents is not a list")
            named: list[tuple[str, str]] = []
            for entry in documents:
                if not (isinstance(entry, list) and len(entry) == 2 and all(isinstance(part, str) for part in entry)):
                    raise VectorFileCorrupt("vector file header lists a document that is not [doc_id, revision]")
                named.append((entry[0], entry[1]))
            self._documents = _Listed(named)
        layout = header.get("arrays")
        if not isinstance(layout, dict):
            raise VectorFileCorrupt("vector file header arrays is not an object")
        if version == LISTS_FORMAT:
            self._lists_at = _integer(header.get("lists_at"), "lists_at", 0, MAX_FILE_BYTES)
            self._read_head(buffer, start, layout)
        else:
            self._read_flat(buffer, start, layout)
        if not np.isfinite(self._centroids).all():
            # A NaN or infinite centroid would rank its list anywhere (and NaN scores choose no row).
            raise VectorFileCorrupt("vector file has a centroid that is not finite")

    def _read_flat(self, buffer: memoryview, start: int, layout: dict[str, Any]) -> None:
        """Formats 1 and 2: every row's arrays in the file, in row order."""
        # Format 1 files have no partition (they are scanned exactly); their sign bits are not read.
        wanted = REQUIRED_ARRAYS if self.format == 1 else (*REQUIRED_ARRAYS, *PARTITION_ARRAYS)
        missing = [name for name in wanted if name not in layout]
        if missing:
            raise VectorFileCorrupt(f"vector file header lacks the arrays {missing}")
        arrays = {name: self._array(buffer, start, name, layout[name]) for name in wanted}
        self._centroids = arrays.get("centroids", np.zeros((0, self.dimensions), np.float32))
        self._list_offsets = arrays.get("list_offsets", np.zeros(1, np.uint64)).astype(np.int64)
        expected = {
            "codes": (self.rows, self.dimensions),
            "scales": (self.rows,),
            "centroids": (len(self._centroids), self.dimensions),
            "list_offsets": (len(self._centroids) + 1,),
            "doc_numbers": (self.rows,),
            "chunk_indexes": (self.rows,),
            "digests": (self.rows, DIGEST_BYTES),
        }
        shapes = {**arrays, "centroids": self._centroids, "list_offsets": self._list_offsets}
        for name, shape in expected.items():
            if shapes[name].shape != shape:
                raise VectorFileCorrupt(f"vector file array {name} has shape {shapes[name].shape}, expected {shape}")
        if not len(self._centroids):
            self._list_offsets = np.array([0, self.rows], np.int64)  # one list: every row
        self._check_offsets()
        self._flat: _List | None = _List(
            0, arrays["codes"], arrays["scales"], arrays["doc_numbers"], arrays["chunk_indexes"], arrays["digests"]
        )
        self._check_rows(self._flat)
        self._sample_codes: npt.NDArray[np.int8] | None = None
        self._sample_scales: npt.NDArray[np.float32] | None = None

    def _read_head(self, buffer: memoryview, start: int, layout: dict[str, Any]) -> None:
        """Format 3: the head's arrays; the list blocks are read as searches need them."""
        missing = [name for name in HEAD_ARRAYS if name not in layout]
        if missing:
            raise VectorFileCorrupt(f"vector file header lacks the arrays {missing}")
        arrays = {name: self._array(buffer, start, name, layout[name]) for name in HEAD_ARRAYS}
        self._centroids = arrays["centroids"]
        lists = len(self._centroids)
        self._list_offsets = arrays["list_offsets"].astype(np.int64)
        self._list_bytes = arrays["list_bytes"].astype(np.int64)
        self._list_crc32 = arrays["list_crc32"]
        self._sample_codes = arrays["sample_codes"]
        self._sample_scales = arrays["sample_scales"]
        expected = {
            "centroids": (lists, self.dimensions),
            "list_offsets": (lists + 1,),
            "list_bytes": (lists + 1,),
            "list_crc32": (lists,),
            "sample_codes": (len(self._sample_scales), self.dimensions),
            "sample_scales": (min(self.rows, SAMPLE_ROWS),),
            "doc_offsets": (2 * self._document_count + 1,),
            "doc_names": arrays["doc_names"].shape,
        }
        for name, shape in expected.items():
            if arrays[name].shape != shape:
                raise VectorFileCorrupt(f"vector file array {name} has shape {arrays[name].shape}, expected {shape}")
        if not lists:
            raise VectorFileCorrupt("vector file of format 3 has no lists")
        parts = arrays["doc_offsets"].astype(np.int64)
        if parts[0] != 0 or parts[-1] != len(arrays["doc_names"]) or bool((np.diff(parts) < 0).any()):
            raise VectorFileCorrupt("vector file document names do not cover its name bytes in order")
        self._documents = _Packed(parts, arrays["doc_names"].tobytes())
        if self._lists_at != int(self._list_bytes[0]):
            raise VectorFileCorrupt("vector file header lists_at is not where its first list block starts")
        self._check_offsets()
        sizes = [block_layout(int(n), self.dimensions)[1] for n in np.diff(self._list_offsets)]
        places = self._list_bytes
        if (
            bool((np.diff(places) != np.array(sizes, np.int64)).any())
            or start + int(places[-1]) != self.size
            or start + int(places[0]) > len(buffer)
        ):
            raise VectorFileCorrupt("vector file list blocks do not match its list offsets and size")
        if not (np.isfinite(self._sample_scales).all() and bool((self._sample_scales >= 0).all())):
            raise VectorFileCorrupt("vector file has a scale that is not a finite, non-negative number")
        self._flat = None

    def _check_offsets(self) -> None:
        offsets = self._list_offsets
        if offsets[0] != 0 or offsets[-1] != self.rows or bool((np.diff(offsets) < 0).any()):
            raise VectorFileCorrupt("vector file list offsets do not cover its rows in order")

    def _check_rows(self, part: _List) -> None:
        if len(part.doc_numbers) and int(part.doc_numbers.max()) >= len(self._documents):
            raise VectorFileCorrupt("vector file row names a document its header does not list")
        # One pass over 4 bytes a row: a non-finite or negative scale would rank its row anywhere.
        if not (np.isfinite(part.scales).all() and bool((part.scales >= 0).all())):
            raise VectorFileCorrupt("vector file has a scale that is not a finite, non-negative number")

    def _array(self, buffer: memoryview, start: int, name: str, entry: object) -> npt.NDArray[Any]:
        """The array `name` of the layout `entry` ([offset, dtype, shape]), checked to lie in the file."""
        if not (isinstance(entry, list) and len(entry) == 3):
            raise VectorFileCorrupt(f"vector file array {name} is not [offset, dtype, shape]")
        offset, dtype, shape = entry
        wanted_dtype = HEAD_DTYPES.get(name) or ARRAY_DTYPES[name]
        if dtype != wanted_dtype:
            raise VectorFileCorrupt(f"vector file array {name} is {dtype!r:.40}, expected {wanted_dtype}")
        position = _integer(offset, f"offset of {name}", 0, len(buffer))
        dimensions = HEAD_DIMENSIONS.get(name) or ARRAY_DIMENSIONS[name]
        if not (isinstance(shape, list) and len(shape) == dimensions):
            raise VectorFileCorrupt(f"vector file array {name} has a shape that is not {dimensions} sizes")
        sizes = [_integer(size, f"size of {name}", 0, len(buffer)) for size in shape]
        kind = np.dtype(dtype)
        count = math.prod(sizes)  # Python integers: no overflow
        if start + position + count * kind.itemsize > len(buffer):
            raise VectorFileCorrupt("vector file is truncated")
        return np.frombuffer(buffer, dtype=kind, count=count, offset=start + position).reshape(sizes)

    @property
    def head_bytes(self) -> int:
        """Bytes from the file's start to its first list block (a format 3 file), else its size."""
        return self._start + int(self._list_bytes[0]) if self._flat is None else self.size

    def list_span(self, number: int) -> tuple[int, int]:
        """Where list `number`'s block lies in a format 3 file (start, end)."""
        return self._start + int(self._list_bytes[number]), self._start + int(self._list_bytes[number + 1])

    def _lists(self, numbers: Sequence[int]) -> dict[int, _List]:
        """The rows of the lists `numbers` (fetched by the file's source if it reads by need)."""
        offsets = self._list_offsets
        if self._flat is not None:
            flat = self._flat
            return {
                n: _List(
                    int(offsets[n]), *(getattr(flat, name)[offsets[n] : offsets[n + 1]] for name in _BLOCK_ROW_BYTES)
                )
                for n in numbers
            }
        missing = [n for n in numbers if n not in self._parsed]
        raw = self._source.blocks([(n, *self.list_span(n)) for n in missing]) if missing else {}
        for number in missing:
            block = raw[number]
            count = int(offsets[number + 1] - offsets[number])
            places, size = block_layout(count, self.dimensions)
            if len(block) != size:
                raise VectorFileCorrupt("vector file list block is truncated")
            if zlib.crc32(block) != int(self._list_crc32[number]):
                raise VectorFileCorrupt(f"vector file list {number} fails its CRC-32")
            arrays = [
                np.frombuffer(
                    block, ARRAY_DTYPES[name], count=length // np.dtype(ARRAY_DTYPES[name]).itemsize, offset=at
                )
                for name, (at, length) in places.items()
            ]
            part = _List(
                int(offsets[number]), arrays[0].reshape(count, self.dimensions), arrays[1], arrays[2], arrays[3],
                arrays[4].reshape(count, DIGEST_BYTES),
            )  # fmt: skip
            self._check_rows(part)
            self._parsed[number] = part  # checked once; its arrays are views of the block
        return {number: self._parsed[number] for number in numbers}

    @property
    def list_total(self) -> int:
        return len(self._list_offsets) - 1

    def _all_lists(self) -> Iterator[_List]:
        for number in range(self.list_total):
            yield self._lists([number])[number]

    @property
    def documents(self) -> frozenset[tuple[str, str]]:
        """The (doc_id, revision) pairs with rows in this file (a document's rows are all in one file)."""
        return frozenset(self._documents[number] for number in range(len(self._documents)))

    def _list_of(self, number: int) -> int:
        return int(np.searchsorted(self._list_offsets, number, side="right")) - 1

    def _described(self, part: _List, local: int) -> VectorRow:
        doc_id, revision = self._documents[int(part.doc_numbers[local])]
        return VectorRow(doc_id, revision, int(part.chunk_indexes[local]), part.digests[local].tobytes().hex())

    def row(self, number: int) -> VectorRow:
        if not 0 <= number < self.rows:
            raise IndexError(f"row {number} of a file of {self.rows} rows")
        listed = self._list_of(number)
        part = self._lists([listed])[listed]
        return self._described(part, number - part.first)

    def rows_of(self) -> Iterable[VectorRow]:
        for part in self._all_lists():
            yield from (self._described(part, local) for local in range(len(part.scales)))

    def vectors(self) -> npt.NDArray[np.float32]:
        """The int8-reconstructed vectors, all of them as float32 (a merge takes `quantised` instead)."""
        parts = [reconstructed(part.codes, part.scales) for part in self._all_lists()]
        return np.concatenate(parts) if parts else np.zeros((0, self.dimensions), np.float32)

    def quantised(self, numbers: npt.NDArray[np.intp]) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
        """The int8 codes and scales of the rows `numbers`: what a merge carries into its file."""
        numbers = np.asarray(numbers, dtype=np.intp)
        if self._flat is not None:
            return self._flat.codes[numbers], self._flat.scales[numbers]
        codes = np.empty((len(numbers), self.dimensions), np.int8)
        scales = np.empty(len(numbers), np.float32)
        owners = np.searchsorted(self._list_offsets, numbers, side="right") - 1
        for listed in np.unique(owners):
            where = np.flatnonzero(owners == listed)
            part = self._lists([int(listed)])[int(listed)]
            codes[where], scales[where] = (
                part.codes[numbers[where] - part.first],
                part.scales[numbers[where] - part.first],
            )
        return codes, scales

    def sample(self, share: int) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
        """The int8 codes and scales of `share` rows spread evenly over the file (retrieval/dense's
        background): of a format 3 file, from its head's SAMPLE_ROWS rows (no list is read); of
        another, the rows evenly spaced over the file."""
        if self._sample_codes is None or self._sample_scales is None:
            return self.quantised(np.unique(np.linspace(0, self.rows - 1, share).astype(np.intp)))
        picked = np.unique(np.linspace(0, len(self._sample_scales) - 1, min(share, len(self._sample_scales))))
        chosen = picked.astype(np.intp)
        return self._sample_codes[chosen], self._sample_scales[chosen]

    @property
    def partitioned(self) -> bool:
        return len(self._centroids) > 0

    def probed_lists(self, query: npt.NDArray[np.float32], k: int, probes: int = PROBES) -> list[int]:
        """The lists a search for the `k` rows nearest `query` scans (file order): the `probes`
        whose centroids are most similar to the query, more if they hold fewer than `k` rows."""
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        ranked = np.argsort(-(self._centroids @ vector), kind="stable")
        sizes = np.diff(self._list_offsets)[ranked]
        needed = int(np.searchsorted(np.cumsum(sizes), k)) + 1
        return [int(n) for n in np.sort(ranked[: max(probes, needed)])]  # in file order: reads move forward

    def search(
        self, query: npt.NDArray[np.float32], k: int, probes: int = PROBES, exact_rows: int = EXACT_ROWS
    ) -> list[VectorHit]:
        """The `k` rows most similar to `query` (L2-normalised, `dimensions` values), best first.
        A partitioned file of more than `exact_rows` rows is scanned in its `probes` lists most
        similar to the query (more if they hold fewer than `k` rows); any other file in full."""
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        if vector.shape[0] != self.dimensions:
            raise ValueError(f"query has {vector.shape[0]} dimensions, the file {self.dimensions}")
        if k <= 0 or self.rows == 0:
            return []
        if self.partitioned and self.rows > exact_rows:
            numbers = self.probed_lists(vector, k, probes)
        else:
            numbers = list(range(self.list_total))
        parts = [part for part in self._lists(numbers).values() if len(part.scales)]
        scores = np.concatenate([_scores(part, vector) for part in parts])
        # Each scanned row's list (an index into `parts`) and its place in that list.
        owners = np.repeat(np.arange(len(parts)), [len(part.scales) for part in parts])
        starts = np.cumsum([0] + [len(part.scales) for part in parts])
        take = min(k, len(scores))
        best = np.argpartition(-scores, take - 1)[:take]
        best = best[np.argsort(-scores[best], kind="stable")]
        hits = []
        for i in best.tolist():
            part = parts[owners[i]]
            local = i - int(starts[owners[i]])
            row = self._described(part, local)
            hits.append(
                VectorHit(
                    part.first + local, float(scores[i]), row.doc_id, row.revision, row.chunk_index, row.chunk_digest
                )
            )
        return hits


def _scores(part: _List, vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Cosines of `vector` with the int8 rows of `part`, BLOCK_ROWS rows at a time."""
    scores = np.empty(len(part.scales), dtype=np.float32)
    for start in range(0, len(scores), BLOCK_ROWS):
        scores[start : start + BLOCK_ROWS] = part.codes[start : start + BLOCK_ROWS].astype(np.float32) @ vector
    return scores * part.scales
