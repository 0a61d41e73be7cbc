"""The parser child of binary documents (ingest/parse_process.py): its limits stop a page that
PDFium cannot be interrupted in, with the reason; a worker serves one document after another and
several threads at once."""

from __future__ import annotations

import threading

import pytest

from agent_knowledge.errors import DocumentRejected
from agent_knowledge.ingest import parse_process
from agent_knowledge.ingest.binary_formats import DOCX, PDF
from agent_knowledge.ingest.parse_process import ParseLimitBroken, ParseLimits, parse_isolated
from tests.support.office_documents import docx, pdf, pdf_page


def test_a_page_over_the_cpu_limit_is_stopped_inside_the_page() -> None:
    # 30,000,000 `q Q` pairs: one page, about 2 s of PDFium's CPU and ~250 MB; the budget's check
    # between pages never runs, the parser's RLIMIT_CPU (budget 0.2 s, limit at most 1.5 s past
    # the parser's CPU so far) stops it. The wall limit is set far off: on a loaded machine a
    # second of CPU may take many.
    slow = pdf_page(b"BT /F1 12 Tf 72 720 Td (Slow) Tj ET " + b"q Q " * 30_000_000)
    with pytest.raises(ParseLimitBroken) as caught:
        parse_isolated(slow, PDF, 1_000_000, ParseLimits(cpu_seconds=0.2, wall_factor=100))
    assert caught.value.limit == "cpu"
    assert caught.value.message == (
        "over the CPU budget: reading page 1 of the PDF took more than 0.2 s of CPU; "
        "simplify the document or split it into smaller ones"
    )
    assert caught.value.cpu_seconds is not None and caught.value.cpu_seconds > 0.2


def test_a_lowered_memory_limit_stops_a_page_that_needs_more() -> None:
    bomb = pdf_page(b"BT /F1 12 Tf 72 720 Td (Heron) Tj " + b"( ) Tj " * 1_000_000 + b"ET")
    with pytest.raises(ParseLimitBroken) as caught:
        parse_isolated(bomb, PDF, 1_000_000, ParseLimits(cpu_seconds=10.0, memory_bytes=128 * 1024 * 1024))
    assert caught.value.limit == "memory"
    assert caught.value.message.startswith(
        "too much memory for one page: reading page 1 of the PDF needed more than 128 MiB"
    )
    # The same document under the real limit is read.
    assert "Heron" in parse_isolated(bomb, PDF, 1_000_000, ParseLimits(cpu_seconds=10.0)).text


def test_a_refusal_inside_the_child_is_a_document_rejected_with_its_reason() -> None:
    with pytest.raises(DocumentRejected) as caught:
        parse_isolated(b"PK\x03\x04 broken", DOCX, 1_000_000, ParseLimits(cpu_seconds=10.0))
    assert not isinstance(caught.value, ParseLimitBroken)
    assert caught.value.message.startswith("the file is not a readable Office document")


def test_one_worker_serves_document_after_document() -> None:
    parse_process.close_workers()
    first = parse_isolated(pdf([["First page words"]]), PDF, 1_000_000, ParseLimits(cpu_seconds=10.0))
    (worker,) = parse_process._POOL._idle
    second = parse_isolated(docx("Second document words"), DOCX, 1_000_000, ParseLimits(cpu_seconds=10.0))
    assert parse_process._POOL._idle == [worker] and worker.process.poll() is None
    assert "First page words" in first.text and "Second document words" in second.text
    assert first.cpu_seconds > 0 and first.peak_rss_bytes > 0


def test_threads_parse_at_once_each_with_its_own_worker() -> None:
    results: dict[int, str] = {}

    def parse(number: int) -> None:
        content = pdf([[f"Thread {number} writes this line"]])
        results[number] = parse_isolated(content, PDF, 1_000_000, ParseLimits(cpu_seconds=10.0)).text

    threads = [threading.Thread(target=parse, args=(number,)) for number in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {number: f"Thread {number} writes this line" in text for number, text in results.items()} == {
        number: True for number in range(4)
    }
