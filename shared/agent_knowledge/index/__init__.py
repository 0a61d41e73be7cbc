"""The search index of each knowledge base: tantivy segments and manifests on S3.

Write side (the indexer): `publish` (pending marks → one generation), `update` (apply a batch of
changed documents), `rebuild` (full rebuild), `writer` (segments, manifests, upload, publish,
garbage collection), `chunk_loader`/`recent_chunks` (chunk texts for the writer). Read side:
`reader_cache` (the container's opened generations), `query` (hits for a search). Shared:
`schema`, `analyzer`, `layout` (keys and manifests), `local_files`, `builder`, `kb_index`.
"""
