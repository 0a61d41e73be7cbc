"""Ingestion: source objects (S3 events, the CLI) → validated documents, stored, and index changes emitted.

No query function imports it; the search index itself lives in `agent_knowledge.index`."""
