"""What references bind, computed from current state (docs/DESIGN.md §5).

A reference carries digests; on every read the server recomputes them from the revalidated
caller, the route's current scope and the current document record, and compares.
"""

from __future__ import annotations

from agent_knowledge.identity.caller import Caller
from agent_knowledge.records import DocumentRecord
from agent_knowledge.references.codec import ReferenceClaims, digest


def identity_digest(caller: Caller, run_id: str | None) -> bytes:
    principal = caller.principal
    return digest(
        "identity",
        caller.client_app_id,
        caller.session_id,
        principal.id if principal else "",
        (principal.tenant or "") if principal else "",
        caller.on_behalf_of or "",
        caller.route.route,
        run_id or "",
    )


def scope_digest(scope_revision: str) -> bytes:
    return digest("scope", scope_revision)


def document_digest(document: DocumentRecord) -> bytes:
    return digest("document", document.revision, document.title_sha256, document.body_sha256)


def reference_claims(
    caller: Caller, run_id: str | None, scope_revision: str, document: DocumentRecord
) -> ReferenceClaims:
    return ReferenceClaims(
        kb_id=document.kb_id,
        doc_id=document.doc_id,
        run_id=run_id,
        identity=identity_digest(caller, run_id),
        scope=scope_digest(scope_revision),
        document=document_digest(document),
    )
