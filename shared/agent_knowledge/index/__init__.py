"""The search index of each knowledge base: tantivy segments, our own text and vector files, manifests on S3.

Format (both sides): `schema`, `analyzer` (tokens), `chunks` (digests), `layout` (keys, manifests,
VectorFileCorrupt), `versions` (schema and tantivy versions), `local_files` (/tmp copies,
`by_need`), `builder` (segments), `kb_index` (BM25, access filter), `chunk_text` (chunk texts per
segment, read by ranges), `vectors` (the vector file format, read, and its scan), `vector_writing`
(a vector file written), `vector_ranges` (partitioned vector files read by need), `sizing`
(ephemeral storage), `stored_generation` (a manifest read, a generation's files opened).

Write side (the indexer): `index_batch` (the function's batch), `publish` (pending marks → one
generation), `update` (apply a batch of changed documents), `rebuild` (full rebuild), `generation`
(the one way a new generation is composed), `writer` (upload, publish, garbage collection),
`merge_policy`, `segment_passes` and `compaction` (merges),
`chunk_loader`/`recent_chunks` (chunk texts for the writer), `vector_generation` and
`vector_backlog` (embedding passes).

Read side: `reader_cache` (the container's opened generations), `query` (retrieve: hits, their
validation and texts), `query_vector` (the query's embedding), `dense` (vector search and its
background), `hybrid` and `fusion` (lexical and dense evidence fused), `rerank` (the optional
reranker).

docs/DESIGN.md §10 says how they fit together; the restructuring that splits this package by role
is not yet done.
"""
