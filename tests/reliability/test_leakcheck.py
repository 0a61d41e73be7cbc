"""The leak check itself catches leaks (so a green session means something), and traces never
capture responses."""

from __future__ import annotations

import json
import logging

from agent_knowledge_dev.handlers import load_event, with_changes
from tests.leakcheck import LeakScanner, _CaptureHandler, scanner

REFERENCE = "AQFpXp8sQ2hhbmRib29rDGRvY180ZjNhOWIyYwAUxYzA0lW9kq3uGgq7Rr5J0w"


def _logger_into(own: LeakScanner, name: str) -> logging.Logger:
    logger = logging.getLogger(name)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # keep the planted leaks out of the session's own check
    logger.handlers = [_CaptureHandler(own)]
    return logger


def test_a_secret_in_a_message_an_extra_field_or_a_traceback_is_found():
    own = LeakScanner()
    own.remember("reference", REFERENCE)
    own.remember("bearer token", "Zx9-long-bearer-token-value-42")
    logger = _logger_into(own, "leakcheck-selftest")
    logger.info("nothing to see")
    assert own.hits() == []
    logger.info("refused", extra={"ref": REFERENCE})
    try:
        raise ValueError("bad bearer Zx9-long-bearer-token-value-42")
    except ValueError:
        logger.exception("failed")
    assert sorted(hit.kind for hit in own.hits()) == ["bearer token", "reference"]


def test_body_lines_and_structured_stdout_lines_are_checked():
    own = LeakScanner()
    own.remember_body("# Title\n\nA confidential paragraph that must never be logged.\nshort\n")
    own.record_output("plain output with A confidential paragraph that must never be logged.\n")
    assert own.hits() == []  # command output is not a log line
    line = json.dumps({"level": "INFO", "message": "x", "body": "A confidential paragraph that must never be logged."})
    own.record_output(line + "\n")
    assert [hit.kind for hit in own.hits()] == ["document body"]


def test_filler_and_short_values_are_not_secrets():
    own = LeakScanner()
    own.remember("server token", "x" * 40)
    own.remember("bearer token", "short")
    assert own.secret_counts() == {}


def test_the_session_scanner_learns_what_the_code_issues(call, demo):
    from agent_knowledge_dev.demo import DEMO_KB, DEMO_TOKEN
    from tests.support.knowledge import put_documents

    body = "# Leave\n\nEvery vacation request needs a manager's approval first.\n"
    put_documents(demo.repositories, DEMO_KB, {"leave.md": ("Leave", body)}, demo.clock())
    result = call("search", with_changes(load_event("search-english-query"), body={"query": "vacation"}))
    ref = result.json()["hints"][0]["ref"]
    secrets = scanner._secrets  # noqa: SLF001 - the plugin's own state
    assert secrets[ref] == "reference" and secrets[DEMO_TOKEN] == "bearer token"
    assert secrets["Every vacation request needs a manager's approval first."] == "document body"
    assert "server token" in scanner.secret_counts()


def test_traced_handlers_never_capture_responses(monkeypatch):
    from agent_knowledge.core import observability

    seen: list[dict] = []

    class FakeTracer:
        def capture_lambda_handler(self, handler, **options):
            seen.append(options)
            return handler

    monkeypatch.setattr(observability, "tracing_enabled", lambda: True)
    monkeypatch.setattr(observability, "tracer", FakeTracer)
    handler = observability.traced(lambda event, context: {"statusCode": 200, "body": "a document body"})
    assert handler({}, None)["statusCode"] == 200
    assert seen == [{"capture_response": False}]


def test_every_function_handler_is_traced_by_the_non_capturing_wrapper():
    from agent_knowledge.core.observability import traced
    from agent_knowledge_dev.handlers import FUNCTIONS, load_function

    marker = traced(lambda event, context: {}).__code__
    names = sorted(path.parent.name for path in FUNCTIONS.glob("*/app.py"))
    assert {"capabilities", "search", "read"} <= set(names)
    for name in names:
        handler = load_function(name).lambda_handler
        chain = []
        while handler is not None:
            chain.append(getattr(handler, "__code__", None))
            handler = getattr(handler, "__wrapped__", None)
        assert marker in chain, name
