"""What `kb status`, `doc list` and `kb sync` read besides the records: the KB's objects in the
sources bucket, its messages in the dead-letter queues, and the queues `kb sync` sends to — for the
local `serve` or a deployed stack (`target.py`), through the layer's own repositories.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from agent_knowledge_dev.console import CliError, note
from agent_knowledge_dev.target import QUEUE_OUTPUTS, pipeline_queues, sources_bucket

if TYPE_CHECKING:
    from agent_knowledge.dependencies import PipelineDependencies
    from agent_knowledge.ingest.status import DeadLetters
    from agent_knowledge.repositories.bundle import Repositories
    from agent_knowledge.repositories.sources import SourceObjects


def source_objects(arguments: argparse.Namespace) -> SourceObjects | None:
    """The sources bucket (call after `connect`); None for a stack deployed before it existed."""
    from agent_knowledge.repositories.sources import SourceObjects

    bucket = sources_bucket(arguments)
    if bucket is None:
        return None
    client, name = bucket
    return SourceObjects(lambda: client, name)


def dead_letters(arguments: argparse.Namespace, kb_id: str) -> DeadLetters | None:
    """The KB's messages in the dead-letter queues: each queue's messages are read (at most 1,000,
    hidden for a moment and made visible again: they stay in the queue) and those naming the KB
    counted (`ingest/status.py` `dead_letters_of`). None, with a note on stderr, if a queue cannot
    be read (e.g. no sqs:ReceiveMessage for you on it): the rest of the status still holds."""
    from agent_knowledge.errors import KnowledgeError
    from agent_knowledge.ingest.status import dead_letters_of
    from agent_knowledge.repositories.queues import DeadLetterQueue

    client, queues = pipeline_queues(arguments)

    def bodies(logical_id: str) -> list[str]:
        url = queues.get(logical_id)
        return DeadLetterQueue(lambda: client, url).peek() if url else []

    try:
        return dead_letters_of(kb_id, bodies("SourceDeadLetterQueue"), bodies("IndexDeadLetterQueue"))
    except KnowledgeError as exc:
        note(f"note: dead-lettered messages not counted ({exc.message})")
        return None


def reconcile_dependencies(arguments: argparse.Namespace, repositories: Repositories) -> PipelineDependencies:
    """What `reconcile_kb` needs, from the CLI's clients: refuses a stack without the pipeline."""
    from agent_knowledge.dependencies import PipelineDependencies
    from agent_knowledge.repositories.queues import IndexQueue, SourceQueue
    from agent_knowledge.settings import get_settings

    sources = source_objects(arguments)
    client, queues = pipeline_queues(arguments)
    missing = [QUEUE_OUTPUTS[name] for name in ("SourceQueue", "IndexQueue") if name not in queues]
    if sources is None or missing:
        what = "sources bucket" if sources is None else f"outputs {', '.join(missing)}"
        raise CliError(f"this stack has no {what}: deploy (or restart `serve` with) the current template to sync")

    def sqs() -> Any:
        return client

    return PipelineDependencies(
        repositories=repositories,
        sources=sources,
        index_queue=IndexQueue(sqs, queues["IndexQueue"]),
        source_queue=SourceQueue(sqs, queues["SourceQueue"]),
        settings=get_settings(),
    )
