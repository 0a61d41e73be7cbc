"""`serve`'s function logs (log_summary): warnings and errors pass, INFO lines are counted and
summed up in one line; nothing is held back once `serve` stops."""

from __future__ import annotations

import logging

import pytest

from agent_knowledge_dev import log_summary
from agent_knowledge_dev.log_summary import InfoSummary


@pytest.fixture
def functions_logger() -> logging.Logger:
    logger = logging.getLogger("test-log-summary")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_info_lines_are_counted_and_warnings_pass(functions_logger: logging.Logger) -> None:
    written: list[str] = []
    summary = InfoSummary(every=5, write=written.append)
    handler = _Records()
    functions_logger.addHandler(handler)
    functions_logger.addFilter(summary)
    try:
        for outcome in ("created", "created", "failed", "updated"):
            functions_logger.info("source applied", extra={"kb_id": "kb", "outcome": outcome})
        functions_logger.info("index published", extra={"kb_id": "kb", "generation": 3})
        functions_logger.warning("index update failed")
        functions_logger.error("dead-lettered")
    finally:
        functions_logger.removeFilter(summary)
        functions_logger.removeHandler(handler)
    assert handler.messages == ["index update failed", "dead-lettered"]
    summary.flush()
    assert written == ["functions, last 5 s: 4 x source applied (2 created, 1 failed, 1 updated); 1 x index published"]
    summary.flush()  # nothing new: no line
    assert len(written) == 1


def test_the_summary_goes_on_the_functions_logger_only_under_serve(functions_logger: logging.Logger) -> None:
    log_summary.install(functions_logger.name)  # a CLI command: nothing wanted
    assert functions_logger.filters == []
    log_summary.summarise_function_logs(every=3600)
    try:
        log_summary.install(functions_logger.name)
        log_summary.install(functions_logger.name)  # once
        assert len(functions_logger.filters) == 1
        functions_logger.info("source applied", extra={"outcome": "created"})
    finally:
        log_summary.stop()  # `serve` --verbose never installs it; stopping writes the last line
    assert functions_logger.filters == []


def test_stopping_writes_what_was_held_back(capsys: pytest.CaptureFixture[str], functions_logger) -> None:
    log_summary.summarise_function_logs(every=3600)
    log_summary.install(functions_logger.name)
    functions_logger.info("knowledge base reconciled")
    log_summary.stop()
    assert capsys.readouterr().err == "functions, last 3600 s: 1 x knowledge base reconciled\n"
