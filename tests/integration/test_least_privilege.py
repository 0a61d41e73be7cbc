"""Least privilege checked against behaviour: the AWS calls each handler makes against moto are
exactly what that function's IAM statements in template.yaml allow (docs/DESIGN.md §12).

A scenario drives every function through its storage paths (task-bound runs, so the task-member
check runs; a replayed and a conflicting turn, so the message claim is released; a read chain).
Every botocore call is recorded with the function that made it, mapped to its IAM action and
resource, and compared with the statements written out in the template: each call must be allowed,
and each granted (action, resource) must be used — a grant nothing uses is a grant too many.
"""

from __future__ import annotations

import fnmatch
import json
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import botocore.client
import pytest

from agent_knowledge.runtime.container import reset_container_caches
from agent_knowledge_dev.demo import DEMO_KB
from agent_knowledge_dev.handlers import load_event, with_changes
from agent_knowledge_dev.stack import bucket_name, table_name
from agent_knowledge_dev.tasks_admin import create_task
from agent_knowledge_dev.template import load_template, resources_of_type
from tests.support.knowledge import bearer, new_session, put_documents

FUNCTIONS = {
    "capabilities": "CapabilitiesFunction",
    "search": "SearchFunction",
    "read": "ReadFunction",
    "mcp": "McpFunction",
    "turns": "TurnsFunction",
    "complete_run": "CompleteRunFunction",
}
# Granted but never a call: with s3:ListBucket S3 answers a missing key 404 instead of 403, which
# the functions need to tell a missing body or snapshot from a denied one.
NOT_A_CALL = {("s3:ListBucket", "BodiesBucket")}
SECRET = "ServerTokenSecret"
DOCUMENTS = {
    "hr/vacation.md": (
        "Vacation policy",
        "# Vacation policy\n\n" + "Employees accrue vacation days monthly; request vacation in the HR portal. " * 200,
    ),
}


# -- what the template grants ----------------------------------------------------------------------


def _resource_name(value: Any) -> str:
    """An IAM Resource of the template as a logical name: `SessionsTable`, `BodiesBucket/indexes/*`."""
    if "Fn::GetAtt" in value:
        logical, attribute = value["Fn::GetAtt"]
        assert attribute == "Arn", value
        return str(logical)
    if "Fn::Sub" in value:
        text = value["Fn::Sub"]
        logical, rest = text.removeprefix("${").split(".Arn}", 1)
        return logical + rest
    if value == {"Ref": "ServerTokenSecretArn"}:
        return SECRET
    if value == {"Ref": "ServerTokenKmsKeyArn"}:
        return "ServerTokenKmsKey"
    raise AssertionError(f"unexpected IAM resource {value}")


def _statements(policies: list[Any]) -> Iterator[dict[str, Any]]:
    for policy in policies:
        if "Fn::If" in policy:  # a conditional policy: both branches may apply
            yield from _statements([branch for branch in policy["Fn::If"][1:] if branch != {"Ref": "AWS::NoValue"}])
            continue
        assert set(policy) == {"Statement"}, f"plain IAM statements only, not {policy}"
        yield from policy["Statement"]


def granted(function: str) -> set[tuple[str, str]]:
    """(action, resource) pairs the function's Allow statements grant (KMS and Bedrock excluded: not
    local; tests/unit/test_template.py checks the Bedrock grant names the configured model only)."""
    policies = load_template()["Resources"][function]["Properties"]["Policies"]
    pairs = set()
    for statement in _statements(policies):
        assert statement["Effect"] == "Allow"
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        for action in statement["Action"]:
            if action.startswith(("kms:", "bedrock:")):
                continue
            pairs.update((action, _resource_name(resource)) for resource in resources)
    return pairs


def allowed(pairs: set[tuple[str, str]], action: str, resource: str) -> bool:
    return any(action == a and fnmatch.fnmatchcase(resource, pattern) for a, pattern in pairs)


# -- what the handlers do ---------------------------------------------------------------------------


def _logical_names() -> dict[str, str]:
    names = {table_name(logical): logical for logical in resources_of_type("AWS::DynamoDB::Table")}
    names.update({bucket_name(logical): logical for logical in resources_of_type("AWS::S3::Bucket")})
    return names


_TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}


def iam_calls(service: str, operation: str, params: dict[str, Any]) -> list[tuple[str, str]]:
    """The (action, resource) pairs IAM evaluates for one API call."""
    names = _logical_names()
    if service == "dynamodb":
        if operation in {"BatchGetItem", "BatchWriteItem"}:
            return [(f"dynamodb:{operation}", names[table]) for table in params["RequestItems"]]
        if operation in {"TransactWriteItems", "TransactGetItems"}:
            pairs = []
            for item in params["TransactItems"]:
                ((kind, request),) = item.items()
                verb = "GetItem" if operation == "TransactGetItems" else _TRANSACT_ACTIONS[kind]
                pairs.append((f"dynamodb:{verb}", names[request["TableName"]]))
            return pairs
        resource = names[params["TableName"]]
        if params.get("IndexName"):
            resource += f"/index/{params['IndexName']}"
        return [(f"dynamodb:{operation}", resource)]
    if service == "s3":
        bucket = names[params["Bucket"]]
        if operation in {"ListObjectsV2", "ListObjects"}:
            return [("s3:ListBucket", bucket)]
        verb = {"HeadObject": "GetObject"}.get(operation, operation)
        if params.get("VersionId"):
            verb += "Version"
        return [(f"s3:{verb}", f"{bucket}/{params['Key']}")]
    if service == "secretsmanager":
        return [(f"secretsmanager:{operation}", SECRET)]
    if service == "sqs":
        # A queue by its local name (`stack.queue_name`): the logical id, `.fifo` for FIFO queues.
        queue = str(params["QueueUrl"]).rsplit("/", 1)[1].removesuffix(".fifo")
        verb = {"SendMessageBatch": "SendMessage", "DeleteMessageBatch": "DeleteMessage"}.get(operation, operation)
        return [(f"sqs:{verb}", queue)]
    raise AssertionError(f"unexpected AWS service {service}")


class Recorder:
    def __init__(self) -> None:
        self.function: str | None = None
        self.calls: dict[str, set[tuple[str, str]]] = defaultdict(set)

    @contextmanager
    def calls_of(self, function: str) -> Iterator[None]:
        # A fresh container per call: the signing key and the opened indexes are read again, so
        # every function's first-call reads are seen.
        reset_container_caches()
        self.function = function
        try:
            yield
        finally:
            self.function = None


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = Recorder()
    original = botocore.client.BaseClient._make_api_call

    def recording(client: Any, operation: str, params: dict[str, Any]) -> Any:
        if recorder.function is not None:
            service = client.meta.service_model.service_name
            recorder.calls[recorder.function].update(iam_calls(service, operation, params))
        return original(client, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", recording)
    return recorder


def _turn(call, token: str, task: dict[str, str], turn_id: str, message_id: str, mode: str, text: str):
    body = json.loads(load_event("turns-on-demand")["body"])
    body.update(
        client_turn_id=turn_id,
        user_message_id=message_id,
        knowledge_delivery=mode,
        user_input=text,
        task_binding={
            "schema_version": "bailing.agent-task-binding.v1",
            "task_id": task["task_id"],
            "scope_hash": task["scope_hash"],
        },
    )
    return call("turns", with_changes(load_event("turns-on-demand"), body=body, authorization=bearer(token)))


def _mcp_tool(call, token: str, tool: str, arguments: dict[str, Any]):
    """A tools/call of the MCP endpoint; the tool's answer (the protocol's JSON), asserting it succeeded."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    result = call("mcp", with_changes(load_event("mcp-search"), body=message, authorization=bearer(token)))
    assert result.status == 200, result.body
    answer = result.json()["result"]
    assert not answer["isError"], answer
    return answer["structuredContent"]


def _complete(call, token: str, run_id: str):
    event = load_event("complete-run")
    event["pathParameters"]["run_id"] = run_id
    event["rawPath"] = f"/agent-api/v1/runs/{run_id}/complete"
    event["requestContext"]["http"]["path"] = event["rawPath"]
    return call("complete_run", with_changes(event, authorization=bearer(token)))


@pytest.fixture
def observed(call, demo, recorder: Recorder) -> dict[str, set[tuple[str, str]]]:
    """Run the scenario once; the (action, resource) pairs each function used."""
    put_documents(demo.repositories, DEMO_KB, DOCUMENTS, demo.clock())
    alice_id, alice = new_session(demo.repositories, demo.clock(), ttl_seconds=7200)
    bob_id, _ = new_session(demo.repositories, demo.clock(), ttl_seconds=7200)
    task = create_task(demo.repositories, [alice_id, bob_id], ttl=3600, now=demo.clock())

    with recorder.calls_of("capabilities"):
        assert (
            call(
                "capabilities", with_changes(load_event("capabilities-valid-bearer"), authorization=bearer(alice))
            ).status
            == 200
        )

    with recorder.calls_of("turns"):
        on_demand = _turn(call, alice, task, "turn-1", "msg-1", "on_demand", "How do I request vacation?")
        assert on_demand.status == 200, on_demand.body
    with recorder.calls_of("turns"):
        assert _turn(call, alice, task, "turn-2", "msg-2", "inline", "vacation days").status == 200
    with recorder.calls_of("turns"):  # a replay answers the stored bytes
        assert (
            _turn(call, alice, task, "turn-1", "msg-1", "on_demand", "How do I request vacation?").body
            == on_demand.body
        )
    with recorder.calls_of("turns"):  # same turn, other request: conflict, and the new message claim is released
        assert _turn(call, alice, task, "turn-1", "msg-9", "on_demand", "something else").status == 409
    run_id = on_demand.json()["run_id"]

    search_event = load_event("search-english-query")
    with recorder.calls_of("search"):
        found = call(
            "search",
            with_changes(search_event, body={"query": "vacation", "run_id": run_id}, authorization=bearer(alice)),
        )
        assert found.status == 200 and found.json()["hints"], found.body
    ref = found.json()["hints"][0]["ref"]

    read_event = load_event("read-first-page")
    with recorder.calls_of("read"):
        page = call(
            "read",
            with_changes(
                read_event, body={"ref": ref, "run_id": run_id, "max_bytes": 4096}, authorization=bearer(alice)
            ),
        )
        assert page.status == 200 and page.json()["next_cursor"], page.body
    with recorder.calls_of("read"):
        body = {"ref": ref, "run_id": run_id, "cursor": page.json()["next_cursor"], "max_bytes": 4096}
        assert call("read", with_changes(read_event, body=body, authorization=bearer(alice))).status == 200

    # The MCP endpoint's two tools: what search and read did, through the same calls.
    with recorder.calls_of("mcp"):
        hints = _mcp_tool(call, alice, "knowledge_search", {"query": "vacation", "run_id": run_id})["hints"]
        assert hints
    with recorder.calls_of("mcp"):
        arguments = {"ref": hints[0]["ref"], "run_id": run_id, "max_bytes": 4096}
        first = _mcp_tool(call, alice, "knowledge_read", arguments)
        assert first["next_cursor"]
    with recorder.calls_of("mcp"):
        assert _mcp_tool(call, alice, "knowledge_read", {**arguments, "cursor": first["next_cursor"]})["content"]

    with recorder.calls_of("complete_run"):
        assert _complete(call, alice, run_id).status == 200
    return recorder.calls


def test_every_call_is_granted_and_every_grant_is_used(observed):
    """One scenario for all six functions (it is the slow part); every function is checked."""
    problems = {}
    for short_name, function in FUNCTIONS.items():
        grants = granted(function)
        used = observed[short_name]
        refused = sorted((action, resource) for action, resource in used if not allowed(grants, action, resource))
        unused = sorted(
            (action, pattern)
            for action, pattern in grants - NOT_A_CALL
            if not any(a == action and fnmatch.fnmatchcase(r, pattern) for a, r in used)
        )
        if not used or refused or unused:
            problems[function] = {"calls beyond its IAM statements": refused, "granted but never used": unused}
    assert problems == {}


def test_query_functions_never_scan_and_write_only_where_the_protocol_writes():
    for short_name, function in FUNCTIONS.items():
        actions = {action for action, _ in granted(function)}
        assert "dynamodb:Scan" not in actions, function
        writes = {
            (action, resource)
            for action, resource in granted(function)
            if action.split(":")[1].startswith(("Put", "Update", "Delete", "BatchWrite"))
        }
        if short_name in {"turns", "complete_run"}:
            assert {resource for _, resource in writes} == {"RunsTable"}, function
        else:
            assert writes == set(), function


def test_the_reconciler_makes_exactly_the_calls_its_statements_grant(stack, recorder: Recorder):
    """The scheduled function reads the bucket listing, the KB, its current index manifest and its
    records, sends reconciles and an indexing request, and records `last_sync`: every call granted,
    every grant used."""
    import dataclasses
    import time

    from agent_knowledge.ingest.status import GRACE_SECONDS
    from agent_knowledge.runtime.container import default_pipeline_dependencies
    from agent_knowledge_dev.admin import create_knowledge_base
    from agent_knowledge_dev.handlers import load_function
    from agent_knowledge_dev.lambda_context import LambdaContext
    from tests.support.pipeline import start_pipeline

    create_knowledge_base(stack.repositories, "kb")
    pipeline = start_pipeline(stack.environment)
    pipeline.put("kb/indexed.md", "# Indexed\n\nIts index manifest is read.")
    pipeline.run()
    pipeline.put("kb/indexed-later.md", "# Later\n\nIts indexing request is lost.")
    pipeline.runner.step(pipeline.runner.mapping("IngestFunction"))
    pipeline.take_messages("IndexQueue")
    pipeline.put("kb/lost.md", "# Lost\n\nIts event is lost.")
    pipeline.take_messages("SourceQueue")
    handler = load_function("reconciler").lambda_handler
    with recorder.calls_of("reconciler"):
        later = dataclasses.replace(default_pipeline_dependencies(), clock=lambda: time.time() + GRACE_SECONDS + 60)
        answer = handler(
            load_event("reconciler-scheduled"), LambdaContext.for_function("ReconcilerFunction"), deps=later
        )
    (report,) = answer["reconciled"]
    assert report["missing"] == 1 and report["index_requested"]
    grants, used = granted("ReconcilerFunction"), recorder.calls["reconciler"]
    assert sorted(call for call in used if not allowed(grants, *call)) == []
    assert sorted(grant for grant in grants if not any(allowed({grant}, *call) for call in used)) == []
