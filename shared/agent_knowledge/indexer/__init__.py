"""The indexer: the only writer of a KB's index generations (docs/DESIGN.md §10).

`index_batch` (the indexer function's batch), `publish` (pending marks → one generation), `update`
(apply a batch of changed documents), `rebuild` (full rebuild), `compaction`, `merge_policy` and
`segment_passes` (merges), `generation` (the one function that composes a new generation: segments,
vectors, manifest), `writer` (upload, publish, garbage collection), `chunk_loader` (chunk texts
for the writer), `vector_generation` and `vector_backlog` (embedding passes).

Imports `index_format`, never `retrieval` (docs/DESIGN.md §11).
"""
