"""Agent knowledge protocol (`bailing.agent-knowledge.v1`) — the shared Lambda layer.

Where each part of the protocol lives (sections of docs/DESIGN.md):

    §2 identity, audience ............ identity/ (caller: revalidation and audience)
    §3 knowledge scope revision ...... identity/scope
    §4 runs and managed tasks ........ identity/run_access
    §5 references, cursors, errors ... references/ (codec, binding, server_token), errors
    §6 byte budgets .................. knowledge/ (search_budget, read_budget), wire, limits
    §7 HTTP surface .................. runtime/http (functions/*/app.py are thin handlers)
    §8 retrieval and validation ...... retrieval/ (query, reader cache, fusion), knowledge/search
    §9 turns ......................... turns/
    §10 ingestion .................... ingest/ (source objects → documents → index changes)
    §10 the search index ............. index_format/ (segments, manifests, vector files),
                                       indexer/ (updates, rebuilds, publishing)
    §13 MCP .......................... mcp/ (tool catalog, Streamable HTTP, origins)
    §14 document-level access ........ identity/document_access
    embeddings ....................... embedding/ (providers; Bedrock calls botocore itself)
    storage .......................... repositories/ (AWS, except the Bedrock runtime clients)

Root modules: `limits` (every protocol number), `errors` (the one exception root and the domain
error ladder), `settings`, `records` (stored records), `models` (API models), `wire` (exact JSON
bytes and their cost, and the JSON this API accepts).

Every package is plain: its `__init__` re-exports nothing and imports nothing, so importing one
submodule loads exactly that submodule's imports (the query functions never load the write side).
"""
