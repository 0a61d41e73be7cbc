"""Who may see a document (issue 33): its access list, the KB's default, the caller's entries.

A document's access is declared beside its source object `KB/path/doc.ext` in the sidecar
`KB/path/doc.ext.metadata.json`: `{"access": {"allow": [...], "deny": [...]}}`. An entry is
`principal:<id>`, `role:<name>`, `tenant:<name>` or `everyone`; deny overrides allow. A document
without a sidecar takes its KB's `default_access`: `route` (every session of a route that names
the KB, the behaviour before access lists) or `none` (nobody).

A caller is one identity, or two when its session acts on behalf of someone: the session's
principal (`principal:<id>`, `role:<r>` per role, `tenant:<t>`, `everyone`) and the principal it
acts for (`principal:<id>`, `everyone`: the session records no roles or tenant of theirs). A
document is visible when it is visible to every identity; a session without a principal is only
`everyone`. `visible` is the one rule; the search index keeps the same rule as terms
(`index_terms`, `index_filter_terms`) so that lexical search filters before its top-k cut.

Nothing here reads storage: the sidecar's bytes come from the ingest, the record and the KB from
the caller's reads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from agent_knowledge.errors import DocumentRejected
from agent_knowledge.records import DocumentAccess, Principal

SIDECAR_SUFFIX = ".metadata.json"
# A sidecar is a short list of entries: anything larger is a mistake, refused before parsing.
MAX_SIDECAR_BYTES = 64 * 1024
MAX_ENTRIES = 1000
MAX_ENTRY_CHARS = 256

DefaultAccess = Literal["route", "none"]
DEFAULT_ACCESS_VALUES: tuple[DefaultAccess, ...] = ("route", "none")

EVERYONE = "everyone"
ENTRY_KINDS = ("principal", "role", "tenant")
# A name is printable, without whitespace or control characters (one raw term in the index).
_ENTRY = re.compile(r"(?:principal|role|tenant):[^\s\x00-\x1f\x7f]+|everyone")

# Index terms (`index_terms`): "+entry" allows, "-entry" denies, DEFAULT_TERM marks a document
# without a sidecar (it follows the KB's default, which the query adds or leaves out).
ALLOW_PREFIX = "+"
DENY_PREFIX = "-"
DEFAULT_TERM = "@default"


class AccessSidecarInvalid(DocumentRejected):
    """A document's access sidecar cannot be read: the document fails (and is hidden) until it is
    fixed or deleted — never shown to everyone."""


def is_sidecar(source_key: str) -> bool:
    """Whether the key is an access sidecar (`doc.ext.metadata.json`), never a document itself."""
    return source_key.endswith(SIDECAR_SUFFIX) and len(source_key) > len(SIDECAR_SUFFIX)


def sidecar_key(source_key: str) -> str:
    return source_key + SIDECAR_SUFFIX


def document_key(sidecar: str) -> str:
    """The document a sidecar key belongs to."""
    return sidecar.removesuffix(SIDECAR_SUFFIX)


def check_entry(entry: object) -> str:
    """The entry if it is valid, else ValueError saying what is wrong with it."""
    if not isinstance(entry, str):
        raise ValueError(f"an access entry must be a string, not {type(entry).__name__}")
    if len(entry) > MAX_ENTRY_CHARS:
        raise ValueError(f"access entry {entry[:40]!r}... is longer than {MAX_ENTRY_CHARS} characters")
    if not _ENTRY.fullmatch(entry):
        raise ValueError(
            f"access entry {entry[:80]!r} is not principal:<id>, role:<name>, tenant:<name> or everyone "
            "(names without whitespace)"
        )
    return entry


def access_list(allow: Iterable[object], deny: Iterable[object]) -> DocumentAccess:
    """Checked entries, duplicates dropped, in their order (ValueError on a bad entry)."""
    allowed = list(dict.fromkeys(check_entry(entry) for entry in allow))
    denied = list(dict.fromkeys(check_entry(entry) for entry in deny))
    if len(allowed) + len(denied) > MAX_ENTRIES:
        raise ValueError(f"more than {MAX_ENTRIES} access entries")
    return DocumentAccess(allow=allowed, deny=denied)


def parse_sidecar(content: bytes) -> DocumentAccess:
    """The access a sidecar declares, parsed strictly: one JSON object whose only key is `access`,
    itself an object with `allow` and/or `deny` lists of entries. AccessSidecarInvalid says why not
    (its message, the failed document's reason, starts with "access sidecar")."""
    try:
        return _parse_sidecar(content)
    except ValueError as exc:
        raise AccessSidecarInvalid(f"access sidecar: {exc}") from None


def _parse_sidecar(content: bytes) -> DocumentAccess:
    if len(content) > MAX_SIDECAR_BYTES:
        raise ValueError(f"larger than {MAX_SIDECAR_BYTES} bytes")
    try:
        value = json.loads(content.decode("utf-8-sig"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"not JSON ({_first_line(exc)})") from None
    if not isinstance(value, dict) or set(value) != {"access"}:
        raise ValueError('must be a JSON object with one key, "access"')
    access = value["access"]
    if not isinstance(access, dict) or not access or not set(access) <= {"allow", "deny"}:
        raise ValueError('"access" must be an object with "allow" and/or "deny" lists')
    lists = {name: access.get(name, []) for name in ("allow", "deny")}
    for name, entries in lists.items():
        if not isinstance(entries, list):
            raise ValueError(f'"access.{name}" must be a list of entries')
    return access_list(lists["allow"], lists["deny"])


def sidecar_json(access: DocumentAccess) -> bytes:
    """The sidecar that declares `access` (what `doc put --allow/--deny` uploads)."""
    return json.dumps({"access": {"allow": access.allow, "deny": access.deny}}, indent=2).encode("utf-8") + b"\n"


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__


@dataclass(frozen=True)
class Viewer:
    """Who a search or a read is for: one set of entries per identity, all of which must see it."""

    identities: tuple[frozenset[str], ...]

    @classmethod
    def of(cls, principal: Principal | None, on_behalf_of: str | None = None) -> Viewer:
        identities = [principal_entries(principal)]
        if on_behalf_of:
            identities.append(frozenset({EVERYONE, f"principal:{on_behalf_of}"}))
        return cls(tuple(identities))


ANONYMOUS = Viewer((frozenset({EVERYONE}),))


def principal_entries(principal: Principal | None) -> frozenset[str]:
    if principal is None:
        return frozenset({EVERYONE})
    entries = {EVERYONE, f"principal:{principal.id}"}
    entries.update(f"role:{role}" for role in principal.roles)
    if principal.tenant:
        entries.add(f"tenant:{principal.tenant}")
    return frozenset(entries)


def visible(access: DocumentAccess | None, default: DefaultAccess, viewer: Viewer) -> bool:
    """The rule: without an access list, the KB's default; with one, every identity of the viewer
    matches an allow entry and none of its entries is denied."""
    if access is None:
        return default == "route"
    return _admitted(set(access.allow), set(access.deny), viewer)


def _admitted(allow: set[str], deny: set[str], viewer: Viewer) -> bool:
    """The rule's core, one place for the record (`visible`) and the index's terms (`visible_terms`)."""
    return all(entries & allow and not entries & deny for entries in viewer.identities)


def index_terms(access: DocumentAccess | None) -> list[str]:
    """What the search index keeps of a document's access, one raw term each (every chunk)."""
    if access is None:
        return [DEFAULT_TERM]
    return [ALLOW_PREFIX + entry for entry in access.allow] + [DENY_PREFIX + entry for entry in access.deny]


def visible_terms(terms: Iterable[str], default: DefaultAccess, viewer: Viewer) -> bool:
    """`visible` over the terms the index keeps (a dense hit's document, from its stored chunk). No
    terms at all (a chunk indexed without them) is visible to nobody."""
    kept = set(terms)
    if not kept:
        return False
    if DEFAULT_TERM in kept:
        return default == "route"
    allow = {term[1:] for term in kept if term.startswith(ALLOW_PREFIX)}
    deny = {term[1:] for term in kept if term.startswith(DENY_PREFIX)}
    return _admitted(allow, deny, viewer)


def index_filter_terms(default: DefaultAccess, viewer: Viewer) -> tuple[list[list[str]], list[str]]:
    """The lexical filter: per identity, the terms one of which a chunk must hold, and the terms
    none of which it may hold. Equivalent to `visible_terms` (a property test checks it)."""
    required = []
    for entries in viewer.identities:
        terms = [ALLOW_PREFIX + entry for entry in sorted(entries)]
        if default == "route":
            terms.append(DEFAULT_TERM)
        required.append(terms)
    excluded = sorted({DENY_PREFIX + entry for entries in viewer.identities for entry in entries})
    return required, excluded
