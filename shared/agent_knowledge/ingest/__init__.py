"""Ingestion: source objects (S3 events, the CLI) → validated documents, stored, and index changes emitted.

No query function imports it; the search index is written by `agent_knowledge.indexer`."""
