"""`kb eval`: how well a KB's own questions are answered, lexically, densely and hybrid.

An operator writes what their users ask and which documents answer it, one JSON object per line:

    {"query": "how do I reset my password?", "expected": ["handbook/password.md", "Password recovery"]}

`expected` names acceptable answers by source key (with or without the `KB/` prefix of the sources
bucket) or by title. Each question is searched three ways over the KB's served index, each answering
at most three documents as a search does: `lexical` (BM25 alone), `dense` (the embeddings alone,
best chunk per document) and `hybrid` (what the search routes answer: `retrieval/query.retrieve`, with
the fusion, the thresholds of a route with default settings and validation against the records).
Per mode: MRR@3, recall@3, hit@1, and the questions it missed (no expected document in its three).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_knowledge.embedding.base import Embedder
from agent_knowledge.identity.scope import Scope
from agent_knowledge.records import DocumentRecord, KnowledgeConfig, SourceConfig
from agent_knowledge.repositories.bundle import Repositories

TOP = 3
MODES = ("lexical", "dense", "hybrid")


class QuestionsInvalid(ValueError):
    """The questions file cannot be used: the message names the line and what is wrong."""


@dataclass(frozen=True)
class Question:
    query: str
    expected: tuple[str, ...]


def read_questions(path: Path) -> list[Question]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise QuestionsInvalid(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise QuestionsInvalid(f"{path} is not UTF-8 text") from None
    questions = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise QuestionsInvalid(f"{path}:{number}: not JSON ({exc.msg})") from None
        if not isinstance(entry, dict) or set(entry) - {"query", "expected"}:
            raise QuestionsInvalid(f'{path}:{number}: expected an object with "query" and "expected" only')
        query, expected = entry.get("query"), entry.get("expected")
        if not isinstance(query, str) or not query.strip():
            raise QuestionsInvalid(f'{path}:{number}: "query" must be a non-empty string')
        if not isinstance(expected, list) or not expected or not all(isinstance(e, str) and e for e in expected):
            raise QuestionsInvalid(f'{path}:{number}: "expected" must be a non-empty list of source keys or titles')
        questions.append(Question(query.strip(), tuple(expected)))
    if not questions:
        raise QuestionsInvalid(f"{path} holds no question")
    return questions


@dataclass
class ModeResult:
    reciprocal: list[float] = field(default_factory=list)
    found: list[float] = field(default_factory=list)
    first: list[float] = field(default_factory=list)
    missed: list[dict[str, Any]] = field(default_factory=list)
    unavailable: str | None = None

    def add(self, question: Question, answered: Sequence[DocumentRecord], kb_id: str) -> None:
        ranks = [rank for rank, record in enumerate(answered[:TOP], 1) if _matches(record, question.expected, kb_id)]
        self.reciprocal.append(1.0 / ranks[0] if ranks else 0.0)
        self.found.append(1.0 if ranks else 0.0)
        self.first.append(1.0 if ranks and ranks[0] == 1 else 0.0)
        if not ranks:
            self.missed.append({"query": question.query, "answered": [record.source_key for record in answered[:TOP]]})

    def summary(self) -> dict[str, Any]:
        if self.unavailable is not None:
            return {"available": False, "reason": self.unavailable}
        return {
            "available": True,
            "mrr_at_3": round(statistics.fmean(self.reciprocal), 4),
            "recall_at_3": round(statistics.fmean(self.found), 4),
            "hit_at_1": round(statistics.fmean(self.first), 4),
            "missed": self.missed,
        }


def _matches(record: DocumentRecord, expected: tuple[str, ...], kb_id: str) -> bool:
    names = {record.source_key, f"{kb_id}/{record.source_key}", record.title}
    return any(name in names for name in expected)


def evaluate(
    repositories: Repositories, kb_id: str, questions: Sequence[Question], embedder: Embedder | None
) -> dict[str, Any]:
    """Every question in the three modes over the KB's served index (see module)."""
    from agent_knowledge.embedding.base import vector_space
    from agent_knowledge.retrieval.query import retrieve
    from agent_knowledge.retrieval.query_vector import searchable
    from agent_knowledge.retrieval.reader_cache import index_cache

    def search(query: str, embedder: Embedder | None) -> Any:
        # The fused order: no reranker, whatever the stack's (`hybrid` is the fusion's answer).
        return retrieve(
            repositories.bodies, repositories.documents, scope, query, TOP,
            cache=index_cache, embedder=embedder, reranker=None,
        )  # fmt: skip

    kb = repositories.knowledge_bases.get(kb_id)
    assert kb is not None
    scope = Scope(KnowledgeConfig(enabled=True, sources=[SourceConfig(kb_id=kb_id)], max_docs=TOP), {kb_id: kb})
    served = index_cache.serve(repositories.bodies, kb)
    space = vector_space(embedder) if embedder is not None else ""
    results = {mode: ModeResult() for mode in MODES}
    if embedder is None:
        reason = "the stack has no embedding provider (EMBEDDING_PROVIDER=none)"
    elif served is None or not searchable(served.manifest, space):
        reason = f"the KB's index has no vectors of {space} for nearly all its documents yet (see kb status)"
    else:
        reason = None
    for mode in ("dense", "hybrid"):
        results[mode].unavailable = reason
    for question in questions:
        lexical = search(question.query, None)
        results["lexical"].add(question, [hit.document for hit in lexical.documents], kb_id)
        if reason is not None or embedder is None or served is None:
            continue
        hybrid = search(question.query, embedder)
        results["hybrid"].add(question, [hit.document for hit in hybrid.documents], kb_id)
        results["dense"].add(question, _dense_documents(repositories, served, embedder, question.query, kb_id), kb_id)
    return {
        "kb_id": kb_id,
        "questions": len(questions),
        "embedding_model": space or None,
        "modes": {mode: result.summary() for mode, result in results.items()},
    }


def _dense_documents(
    repositories: Repositories, served: Any, embedder: Embedder, query: str, kb_id: str
) -> list[DocumentRecord]:
    """The three documents whose best chunks are nearest the query, current ones only."""
    from agent_knowledge.retrieval.dense import dense_hits

    hits = dense_hits(served.manifest, served.directory, embedder.embed_query(query), TOP * 3)
    records = repositories.documents.get_many([(kb_id, hit.doc_id) for hit in hits])
    answered = []
    for hit in hits:
        record = records.get((kb_id, hit.doc_id))
        if record is not None and record.status == "ready" and record.revision == hit.revision:
            answered.append(record)
    return answered[:TOP]


def render(report: dict[str, Any]) -> str:
    """The report as text: one line per mode, then each mode's missed questions."""
    lines = [f"kb {report['kb_id']}: {report['questions']} questions, embeddings {report['embedding_model'] or 'none'}"]
    lines.append(f"{'mode':<8} {'MRR@3':>7} {'recall@3':>9} {'hit@1':>7}")
    for mode, summary in report["modes"].items():
        if not summary["available"]:
            lines.append(f"{mode:<8} unavailable: {summary['reason']}")
            continue
        lines.append(
            f"{mode:<8} {summary['mrr_at_3']:>7.3f} {summary['recall_at_3']:>9.3f} {summary['hit_at_1']:>7.3f}"
        )
    for mode, summary in report["modes"].items():
        if summary["available"] and summary["missed"]:
            lines.append(f"\n{mode} missed {len(summary['missed'])}:")
            lines.extend(
                f"  {miss['query']}  (answered: {', '.join(miss['answered']) or 'nothing'})"
                for miss in summary["missed"]
            )
    return "\n".join(lines)
