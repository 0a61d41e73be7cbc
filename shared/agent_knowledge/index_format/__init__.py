"""The search index's format, what the writer and the reader share: tantivy's schema and analyzer,
segments and their chunk texts, the vector file format, the S3 layout and manifests, this
container's copies of index files, and opening a stored generation.

`schema`, `analyzer` (tokens), `chunks` (digests), `versions` (schema and tantivy versions),
`layout` (keys, manifests, ranged reads, VectorFileCorrupt), `builder` (segments), `chunk_text`
(chunk texts per segment, read by ranges), `kb_index` (BM25 and its normalization, the access
filter), `vectors` (the vector file format, read, and its scan), `vector_writing` (a vector file
written), `vector_ranges` (partitioned vector files read by need), `local_files` (/tmp copies,
`by_need`), `sizing` (ephemeral storage), `stored_generation` (a generation's manifest read and its
files opened), `recent_chunks` (chunk texts the ingestor just made, handed to the indexer).

Imports neither `indexer` nor `retrieval` (docs/DESIGN.md §11; tests/unit/test_layer_structure.py).
"""
