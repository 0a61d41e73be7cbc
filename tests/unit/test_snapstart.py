"""SnapStart (issue 36, item 4): the protocol handlers register runtime hooks at import, their init
reads no secret and handles nothing of a request, and the hooks renew what a restored container
must not share (random state, the AWS session and clients, the server-token codec)."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
import snapshot_restore_py

from agent_knowledge.references import server_token
from agent_knowledge.repositories import aws
from agent_knowledge.runtime import snapstart
from agent_knowledge_dev.handlers import PROJECT_ROOT
from tests.support.sam import QUERY_FUNCTIONS


@pytest.fixture(autouse=True)
def _own_aws_session(monkeypatch):
    """The hooks renew the process's AWS session and make real clients: both are undone after each
    test, so that a later test's moto stack is not handed them (they reached the real endpoints
    when this module ran before tests/integration in one process)."""
    monkeypatch.setattr(aws, "_session", aws._session)
    yield
    aws.reset_clients()


HANDLERS = {
    "CapabilitiesFunction": "capabilities",
    "SearchFunction": "search",
    "ReadFunction": "read",
    "McpFunction": "mcp",
    "TurnsFunction": "turns",
    "CompleteRunFunction": "complete_run",
}

# A fresh process as Lambda's init: import one handler, then report what the init left behind.
INIT = """
import json, sys
from agent_knowledge_dev.aws_environment import dummy_environment, use_dummy_environment
use_dummy_environment(dummy_environment("snapstart-test", "SnapStartTest"))
import snapshot_restore_py
from agent_knowledge_dev.handlers import load_function
load_function(sys.argv[1])
from agent_knowledge.references import server_token
from agent_knowledge.repositories import aws
print(json.dumps({
    "before": [f.__qualname__ for f, _, _ in snapshot_restore_py.get_before_snapshot()],
    "after": [[f.__qualname__, list(a[0])] for f, a, _ in snapshot_restore_py.get_after_restore()],
    "codec_built": bool(server_token.server_codec._values),
    "clients": sorted(aws._clients),
}))
"""


def test_every_protocol_handler_registers_the_hooks_at_init_and_reads_no_secret_there():
    assert set(HANDLERS) == set(QUERY_FUNCTIONS)
    for function in ("search", "capabilities"):
        done = subprocess.run(
            [sys.executable, "-c", INIT, function], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
        )
        state = json.loads(done.stdout.splitlines()[-1])
        assert state["before"] == ["before_snapshot"]
        ((hook, clients),) = state["after"]
        assert hook == "after_restore" and clients == state["clients"] == sorted(clients)
        # The snapshot would hold the clients, never the server token (nor any request: init has none).
        assert state["codec_built"] is False


def test_after_restore_reseeds_random_renews_the_session_and_forgets_the_codec(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    aws.reset_clients()
    aws.client("s3")
    session, s3 = aws._session, aws._clients["s3"]
    models = session.get_component("data_loader")
    server_token.server_codec._values["secret"] = object()  # as if a request had built it

    random.seed(1234)
    shared = random.random()  # what every container resumed from the same snapshot would draw
    random.seed(1234)
    snapstart.after_restore(("s3", "dynamodb"))

    assert random.random() != shared
    assert aws._session is not session and aws._session.get_component("data_loader") is models
    assert sorted(aws._clients) == ["dynamodb", "s3"] and aws._clients["s3"] is not s3
    assert server_token.server_codec._values == {}


def test_before_snapshot_forgets_the_codec_and_registration_needs_the_runtime_module(monkeypatch):
    server_token.server_codec._values["secret"] = object()
    snapstart.before_snapshot()
    assert server_token.server_codec._values == {}

    monkeypatch.setattr(snapshot_restore_py, "_before_snapshot_registry", [])
    monkeypatch.setattr(snapshot_restore_py, "_after_restore_registry", [])
    assert snapstart.register(("dynamodb",)) is True
    assert snapshot_restore_py.get_after_restore() == [(snapstart.after_restore, (("dynamodb",),), {})]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)  # a runtime without it: no hooks
    assert snapstart.register(("dynamodb",)) is False
