"""Locally every function runs in one process: each log line must name the function that logged it."""

from __future__ import annotations

import io
import json
import logging
import threading

from agent_knowledge.core.observability import logger
from agent_knowledge_dev.functions import invocation_log_keys
from agent_knowledge_dev.lambda_context import LambdaContext


def test_each_thread_logs_with_its_own_function_s_lambda_context() -> None:
    """Issue 24: an indexer line named `SearchFunction` (Powertools keeps the keys on the one
    logger of the process; the last function invoked won)."""
    handler = next(h for h in logging.getLogger(logger.name).handlers if isinstance(h, logging.StreamHandler))
    sink = io.StringIO()
    saved = handler.setStream(sink)
    inside = threading.Barrier(2)

    def invoke(function: str) -> None:
        context = LambdaContext(function, request_id=f"request-{function}")
        logger.append_keys(function_name=function)  # what inject_lambda_context does: shared by all threads
        with invocation_log_keys(context):
            inside.wait()  # both functions are inside their invocation now
            logger.info("working", extra={"who": function})
            inside.wait()

    try:
        threads = [threading.Thread(target=invoke, args=(name,)) for name in ("SearchFunction", "IndexerFunction")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    finally:
        handler.setStream(saved)
        logger.remove_keys(["function_name"])
    lines = [json.loads(line) for line in sink.getvalue().splitlines() if line.strip()]
    assert len(lines) == 2
    for line in lines:
        assert line["function_name"] == line["who"] and line["function_request_id"] == f"request-{line['who']}"
