"""What the protocol publishes, written once for the tests of both sides of the wire: the server's
tests assert it, the host's fake servers answer with it. Literal values on purpose: an oracle that
does not import the layer's `limits` or `errors` cannot agree with a mistake made there."""

from __future__ import annotations

# The capabilities answer's `limits` object.
LIMITS = {
    "search_max_results": 3,
    "search_max_bytes": 4096,
    "read_default_bytes": 16384,
    "read_max_bytes": 32768,
    "reference_ttl_seconds": 300,
    "read_chain_max_bytes": 131072,
}

# The error table: HTTP status, error code, and the class that stands for the code on both sides
# (`agent_knowledge.errors` on the server, `agent_knowledge_host.errors` on the host).
ERRORS = [
    (int(status), code, name)
    for status, code, name in (
        row.split()
        for row in """
            400 invalid_request             InvalidRequest
            401 unauthorized                Unauthorized
            404 workspace_not_found         WorkspaceNotFound
            404 run_not_found               RunNotFound
            409 run_not_ready               RunNotReady
            409 task_not_active             TaskNotActive
            409 turn_conflict               TurnConflict
            400 knowledge_reference_invalid ReferenceInvalid
            410 knowledge_reference_expired ReferenceExpired
            409 knowledge_scope_changed     ScopeChanged
            409 knowledge_changed           KnowledgeChanged
            503 knowledge_unavailable       KnowledgeUnavailable
            500 internal_error              InternalError
        """.strip().splitlines()
    )
]
# The server answers internal_error from its catch-all; no domain error of the layer carries it.
CATCH_ALL_CODE = "internal_error"
