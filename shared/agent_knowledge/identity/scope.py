"""Knowledge scope revision (docs/DESIGN.md §3).

SHA-256 over the canonical JSON of the route's whole knowledge configuration plus the enabled
flag of every knowledge base it names, so editing the route or disabling one of its KBs changes
the revision, and nothing else does. A KB that does not exist counts as disabled.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from agent_knowledge.records import KnowledgeBaseRecord, KnowledgeConfig

if TYPE_CHECKING:
    pass


def canonical_json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def source_kb_ids(config: KnowledgeConfig) -> list[str]:
    return list(dict.fromkeys(source.kb_id for source in config.sources))


def kb_enabled_flags(config: KnowledgeConfig, kbs: dict[str, KnowledgeBaseRecord]) -> dict[str, bool]:
    return {kb_id: bool(kbs.get(kb_id) and kbs[kb_id].enabled) for kb_id in source_kb_ids(config)}


def scope_revision(config: KnowledgeConfig, kbs: dict[str, KnowledgeBaseRecord]) -> str:
    document = {
        "knowledge": config.model_dump(mode="json"),
        "kb_enabled": kb_enabled_flags(config, kbs),
    }
    return hashlib.sha256(canonical_json(document)).hexdigest()


def knowledge_enabled(config: KnowledgeConfig, kbs: dict[str, KnowledgeBaseRecord]) -> bool:
    """Knowledge is on for the route and at least one of its sources is an enabled KB."""
    return config.enabled and any(kb_enabled_flags(config, kbs).values())


class Scope:
    """A route's knowledge scope as read just now: config, its KBs, revision and enabled state."""

    __slots__ = ("config", "knowledge_bases", "revision", "enabled")

    def __init__(self, config: KnowledgeConfig, knowledge_bases: dict[str, KnowledgeBaseRecord]) -> None:
        self.config = config
        self.knowledge_bases = knowledge_bases
        self.revision = scope_revision(config, knowledge_bases)
        self.enabled = knowledge_enabled(config, knowledge_bases)

    def enabled_kb_ids(self) -> list[str]:
        return [kb_id for kb_id, on in kb_enabled_flags(self.config, self.knowledge_bases).items() if on]
