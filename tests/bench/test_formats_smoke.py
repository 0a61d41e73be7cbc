"""The PDF, Word and PowerPoint benchmark (`bench/ingest_formats.py`) on small files the test writes:
it finds the files, ingests them through the product's path, counts pages and slides, reports
failures and up-front refusals with their reasons, measures the largest file in a fresh process,
and its table renders. No speed is asserted (the figures are in bench/README.md)."""

from __future__ import annotations

from pathlib import Path

from bench import ingest_formats
from tests.support.office_documents import docx, pdf, pptx


def write_corpus(folder: Path) -> None:
    (folder / "manuals").mkdir()
    manual = [[f"Chapter {page} of the heron manual", "Herons wade in shallow water."] for page in range(1, 13)]
    (folder / "manuals" / "heron.pdf").write_bytes(pdf(manual, title="Heron Manual"))
    (folder / "secret.pdf").write_bytes(pdf([["secret"]], encrypted=True))
    (folder / "memo.docx").write_bytes(docx(("Heading1", "Ibis Memo"), "The ibis budget. " * 200))
    deck = [("Stork Roadmap", ["Ship the stork release"], "Notes"), ("Second", ["More storks"], None)]
    (folder / "deck.pptx").write_bytes(pptx(deck))
    (folder / "notes.txt").write_text("not a binary format: not measured")


def test_the_formats_benchmark_measures_every_file(tmp_path, monkeypatch):
    write_corpus(tmp_path)
    monkeypatch.setattr(ingest_formats, "LARGE_MANUAL_PAGES", 10)  # the 12-page manual counts as large
    monkeypatch.setattr(ingest_formats, "LARGE_FILE_BYTES", 1_000)  # measure the largest alone
    result = ingest_formats.run(tmp_path, repeats=2)
    files = {item["name"]: item for item in result["files"]}
    assert set(files) == {"manuals/heron.pdf", "secret.pdf", "memo.docx", "deck.pptx"}
    assert (files["manuals/heron.pdf"]["outcome"], files["manuals/heron.pdf"]["title"]) == ("ready", "Heron Manual")
    assert files["manuals/heron.pdf"]["pages"] == 12 and files["deck.pptx"]["pages"] == 2
    assert files["memo.docx"]["title"] == "Ibis Memo" and files["memo.docx"]["pages"] > 1
    assert result["failed"] == [{"name": "secret.pdf", "reason": files["secret.pdf"]["reason"]}]
    assert "encrypted" in files["secret.pdf"]["reason"]
    formats = result["formats"]
    assert set(formats) == {"PDF", "DOCX", "PPTX"} and formats["PDF"]["files"] == 1
    assert all(figures["cpu_ms_per_page"] > 0 and figures["documents_per_second"] > 0 for figures in formats.values())
    (manual,) = result["large_manuals"]
    # A 12-page PDF takes a few milliseconds: its share of the 10 s budget may round to 0.0.
    assert manual["name"] == "manuals/heron.pdf" and 0 <= manual["budget_share"] < 1
    largest = result["fifty_megabytes"]["largest_accepted"]  # measured in a child process
    assert largest["name"] == max(files.values(), key=lambda item: item["bytes"])["name"]
    assert largest["rss_peak_mib"] >= largest["rss_baseline_mib"] > 0
    assert result["fifty_megabytes"]["ingest_function"]["timeout_seconds"] > 0
    assert set(result["folders"]) == {"PDF in manuals/", "DOCX in ./", "PPTX in ./"}
    table = ingest_formats.render(result)
    assert [line.split(" | ")[0] for line in table[4:]] == [
        "| PDF", "| DOCX", "| PPTX", "| — PDF in manuals/", "| — DOCX in ./", "| — PPTX in ./"
    ]  # fmt: skip


def test_a_file_over_the_size_limit_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    (tmp_path / "big.pdf").write_bytes(pdf([["a page"]] * 3))
    monkeypatch.setattr(ingest_formats, "max_source_bytes", lambda media_type: 100)
    result = ingest_formats.run(tmp_path, repeats=1)
    (refused,) = result["fifty_megabytes"]["refused_up_front"]
    assert refused["name"] == "big.pdf" and refused["pages"] == 3
    assert refused["reason"].startswith("the object is larger than 100 bytes")
    assert result["formats"] == {} and result["fifty_megabytes"]["largest_accepted"] is None
