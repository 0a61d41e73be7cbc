"""Fixtures of the reliability suite: a two-KB workspace and fault injection without retry sleeps."""

from __future__ import annotations

import pytest

from agent_knowledge.records import KnowledgeConfig, SourceConfig
from agent_knowledge_dev import admin
from agent_knowledge_dev.demo import DEMO_KB, DEMO_ROUTE
from tests.reliability.faults import FaultInjector
from tests.support.knowledge import put_documents

OTHER_KB = "engineering"
HANDBOOK_BODY = "# Expenses\n\nKeep every receipt for travel expenses. 报销需要发票。\n"
ENGINEERING_BODY = "# On-call\n\nFile the receipt of every on-call taxi ride with the incident report.\n"


@pytest.fixture
def two_kbs(demo):
    """The demo route searching two KBs, each with one document that matches "receipt"."""
    admin.create_knowledge_base(demo.repositories, OTHER_KB)
    route = demo.repositories.routes.get(DEMO_ROUTE)
    knowledge = KnowledgeConfig(
        enabled=True, sources=[SourceConfig(kb_id=DEMO_KB), SourceConfig(kb_id=OTHER_KB)], top_k=10, max_docs=3
    )
    demo.repositories.routes.put(route.model_copy(update={"knowledge": knowledge}))
    put_documents(demo.repositories, DEMO_KB, {"expenses.md": ("Expenses", HANDBOOK_BODY)}, demo.clock())
    put_documents(demo.repositories, OTHER_KB, {"on-call.md": ("On-call", ENGINEERING_BODY)}, demo.clock())
    return demo


@pytest.fixture
def faults(monkeypatch) -> FaultInjector:
    """Retries happen as configured, without their jittered sleeps (seconds per faulted call);
    bench/reliability/faults.py measures the real elapsed times."""
    from botocore.retries import standard

    monkeypatch.setattr(standard.ExponentialBackoff, "delay_amount", lambda self, context: 0.0)
    return FaultInjector()


def pytest_terminal_summary(terminalreporter) -> None:
    from tests.reliability.fuzzcount import CASES

    if CASES:
        figures = ", ".join(f"{kind}: {n}" for kind, n in sorted(CASES.items()))
        terminalreporter.write_line(f"fuzz cases run: {figures} (total {sum(CASES.values())})")
