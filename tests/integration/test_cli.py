"""The admin CLI and `invoke`, in-process, against a local stack on a moto server (what `serve`
runs, without the HTTP side). Output is read the way a script would: JSON on stdout."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_knowledge.errors import Unauthorized
from agent_knowledge.identity.caller import revalidate
from agent_knowledge.repositories import Repositories, default_repositories
from agent_knowledge_dev import cli
from agent_knowledge_dev.commands import Command
from agent_knowledge_dev.demo import DEMO_KB, DEMO_ROUTE, SAMPLE_DOCS
from agent_knowledge_dev.localstate import STATE_DIR_ENV, ServeLock, ServerInfo
from agent_knowledge_dev.runtime import reset_caches
from agent_knowledge_dev.server import local_stack
from agent_knowledge_dev.template import function_routes

EVENTS = Path(__file__).resolve().parents[2] / "events"


@pytest.fixture(scope="module")
def running_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ[STATE_DIR_ENV] = str(tmp_path_factory.mktemp("state"))
    lock = ServeLock()
    lock.acquire()
    try:
        with local_stack() as stack:
            lock.publish(ServerInfo(os.getpid(), "http://127.0.0.1:0", stack.moto_endpoint, stack.environment, 0.0))
            yield
    finally:
        lock.release()
        os.environ.clear()
        os.environ.update(saved)
        reset_caches()


@pytest.fixture(autouse=True)
def _restore_environment(running_stack: None) -> Iterator[None]:
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)
    reset_caches()


class Result:
    def __init__(self, status: int, stdout: str, stderr: str) -> None:
        self.status, self.stdout, self.stderr = status, stdout, stderr

    def json(self) -> Any:
        return json.loads(self.stdout)


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    def _run(*arguments: str) -> Result:
        status = cli.main(list(arguments))
        captured = capsys.readouterr()
        return Result(status, captured.out, captured.err)

    return _run


def _repositories() -> Repositories:
    return default_repositories()


def test_workspace_setup_and_session_lifecycle(run):
    assert run("kb", "create", "policies", "--name", "Policies").json() == {
        "kb_id": "policies",
        "name": "Policies",
        "enabled": True,
        "generation": 0,
        "index_manifests": [],
    }
    route = run(
        "route", "put", "hr", "--kb", "policies", DEMO_KB, "--top-k", "5", "--min-score", "0.5", "--max-docs", "2"
    ).json()
    assert route["knowledge"] == {
        "enabled": True,
        "sources": [
            {"kb_id": "policies", "top_k": None, "min_score": None},
            {"kb_id": DEMO_KB, "top_k": None, "min_score": None},
        ],
        "top_k": 5,
        "min_score": 0.5,
        "max_docs": 2,
    }
    assert route["agent_client"] == {"enabled": True} and route["audience"] is None
    assert run("client", "put", "hr-bot", "--route", "hr").json()["allowed_routes"] == ["hr"]

    issued = run(
        "session", "issue", "--client", "hr-bot", "--route", "hr", "--principal-id", "ada", "--tenant", "acme",
        "--role", "analyst", "admin", "--on-behalf-of", "grace", "--ttl", "600",
    ).json()  # fmt: skip
    assert set(issued) == {"session_id", "access_token", "expires_at"}
    assert issued["expires_at"] - time.time() == pytest.approx(600, abs=30)
    caller = revalidate(_repositories(), f"Bearer {issued['access_token']}", "hr", time.time())
    assert caller.session.principal is not None
    assert caller.session.principal.model_dump() == {
        "id": "ada",
        "tenant": "acme",
        "roles": ["analyst", "admin"],
        "audience": None,
    }
    assert caller.session.on_behalf_of == "grace"

    assert run("session", "revoke", issued["session_id"]).json() == {
        "session_id": issued["session_id"],
        "revoked": True,
    }
    with pytest.raises(Unauthorized):
        revalidate(_repositories(), f"Bearer {issued['access_token']}", "hr", time.time())


def test_audience_policy_and_disabled_knowledge(run):
    run("kb", "create", "audience-kb")
    policy = '{"tenants": ["acme"], "roles": ["analyst"]}'
    route = run("route", "put", "guarded", "--kb", "audience-kb", "--audience", policy, "--disable-knowledge").json()
    assert route["audience"]["tenants"] == ["acme"] and route["audience"]["roles"] == ["analyst"]
    assert route["knowledge"]["enabled"] is False
    # Editing a route keeps its instructions unless new ones are given.
    run("route", "put", "guarded", "--kb", "audience-kb", "--instructions", "Be brief.")
    assert run("route", "put", "guarded", "--kb", "audience-kb").json()["instructions"] == "Be brief."


def test_disabling_a_kb_turns_the_demo_route_off_and_enabling_restores_it(run):
    event = str(EVENTS / "capabilities-valid-bearer.json")
    before = json.loads(run("invoke", "capabilities", event).json()["body"])
    assert before["enabled"] is True
    assert run("kb", "disable", DEMO_KB).json()["enabled"] is False
    disabled = json.loads(run("invoke", "capabilities", event).json()["body"])
    assert disabled["enabled"] is False
    assert disabled["knowledge_scope_revision"] != before["knowledge_scope_revision"]
    assert run("kb", "enable", DEMO_KB).json()["enabled"] is True
    after = json.loads(run("invoke", "capabilities", event).json()["body"])
    assert after["knowledge_scope_revision"] == before["knowledge_scope_revision"]


def test_single_document_put_update_skip_and_delete(run, tmp_path):
    document = tmp_path / "leave.md"
    document.write_text("# Leave\n\nParental leave is twenty weeks.\n", encoding="utf-8")
    created = run("doc", "put", DEMO_KB, "extra/leave.md", "--file", str(document)).json()
    assert created["outcome"] == "created"
    assert created["document"]["title"] == "Leave" and created["document"]["status"] == "ready"
    assert run("doc", "put", DEMO_KB, "extra/leave.md", "--file", str(document)).json()["outcome"] == "skipped"
    titled = run("doc", "put", DEMO_KB, "extra/leave.md", "--file", str(document), "--title", "Leave rules").json()
    assert (titled["outcome"], titled["document"]["title"]) == ("updated", "Leave rules")
    assert run("doc", "delete", DEMO_KB, "extra/leave.md").json()["deleted"] is True
    again = run("doc", "delete", DEMO_KB, "extra/leave.md")
    assert again.status == 1 and "no document" in again.stderr


def test_reingesting_the_sample_folder_skips_everything(run):
    summary = run("doc", "put", DEMO_KB, "--dir", str(SAMPLE_DOCS)).json()
    assert summary["files"] == 12 and summary["skipped"] == 12 and summary["failed"] == 0


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("route", "put", "r", "--kb", "missing-kb"), "unknown knowledge base 'missing-kb'"),
        (("route", "put", "r", "--kb", DEMO_KB, "--top-k", "500"), "invalid top_k"),
        (("route", "put", "r", "--audience", '{"tenants": "acme"}'), "--audience is not a valid audience policy"),
        (("route", "put", "bad/route"), "invalid route"),
        (("kb", "disable", "missing-kb"), "unknown knowledge base"),
        (("session", "issue", "--client", "nobody", "--route", DEMO_ROUTE), "unknown client 'nobody'"),
        (("session", "issue", "--client", "demo-agent", "--route", "payroll"), "may not use route(s) payroll"),
        (("session", "issue", "--client", "demo-agent", "--route", "demo", "--ttl", "0"), "positive"),
        (("session", "issue", "--client", "demo-agent", "--route", "demo", "--tenant", "t"), "--principal-id"),
        (("doc", "put", DEMO_KB), "either SOURCE_KEY --file PATH"),
        (("doc", "put", DEMO_KB, "k", "--file", "/nonexistent/x.md"), "file not found"),
        (("doc", "put", DEMO_KB, "--dir", "/nonexistent"), "folder not found"),
        (("invoke", "nosuch", str(EVENTS / "capabilities-valid-bearer.json")), "unknown function 'nosuch'"),
    ],
)
def test_user_mistakes_are_one_line_errors_with_exit_status_1(run, arguments, message):
    result = run(*arguments)
    assert result.status == 1
    assert message in result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == ""


def test_bad_json_event_file_is_reported(run, tmp_path):
    broken = tmp_path / "event.json"
    broken.write_text("{nope", encoding="utf-8")
    result = run("invoke", "capabilities", str(broken))
    assert result.status == 1 and "is not valid JSON" in result.stderr


def test_doc_put_of_an_unsupported_file_type(run, tmp_path):
    pdf = tmp_path / "a.pdf"
    pdf.write_bytes(b"%PDF")
    result = run("doc", "put", DEMO_KB, "a.pdf", "--file", str(pdf))
    assert result.status == 1 and "only .md, .txt and .html" in result.stderr


def test_aws_target_needs_the_stack_names(run, monkeypatch):
    for name in ("SESSIONS_TABLE", "CONFIG_TABLE", "DOCUMENTS_TABLE", "RUNS_TABLE", "BODIES_BUCKET"):
        monkeypatch.delenv(name, raising=False)
    result = run("kb", "create", "x", "--aws")
    assert result.status == 1
    assert "SESSIONS_TABLE" in result.stderr and "BODIES_BUCKET" in result.stderr


EXPECTED_STATUS = {
    "capabilities-valid-bearer.json": 200,
    "capabilities-missing-bearer.json": 401,
    "capabilities-foreign-route.json": 404,
    "capabilities-unknown-route.json": 404,
    "capabilities-unknown-bearer.json": 401,
    "capabilities-basic-auth.json": 401,
    "capabilities-lowercase-scheme.json": 200,
}


def _function_of(event: str) -> str:
    """The function the event's route key leads to, as template.yaml declares it."""
    route_key = json.loads((EVENTS / event).read_text(encoding="utf-8"))["routeKey"]
    return next(route.code_uri.name for route in function_routes() if f"{route.method} {route.path}" == route_key)


@pytest.mark.parametrize("event", sorted(path.name for path in EVENTS.glob("*.json")))
def test_invoke_runs_every_sample_event(run, event):
    result = run("invoke", _function_of(event), str(EVENTS / event))
    assert result.status == 0, result.stderr
    response = result.json()
    assert isinstance(response["statusCode"], int)
    assert response["headers"]["Cache-Control"] == "no-store"
    body = json.loads(response["body"])
    assert ("error" in body) == (response["statusCode"] >= 400)
    if event in EXPECTED_STATUS:
        assert response["statusCode"] == EXPECTED_STATUS[event]


def test_events_readme_lists_every_event():
    index = (EVENTS / "README.md").read_text(encoding="utf-8")
    missing = [path.name for path in EVENTS.glob("*.json") if path.name not in index]
    assert missing == []


def test_a_new_subcommand_is_one_table_entry(run, capsys):
    seen = []
    echo = Command(
        "echo", "say it back", lambda parser: parser.add_argument("word"), lambda args: seen.append(args.word) or 0
    )
    assert cli.main(["echo", "hello"], commands=[*cli.COMMANDS, echo]) == 0
    assert seen == ["hello"]
    with pytest.raises(SystemExit):
        cli.main(["--help"], commands=[*cli.COMMANDS, echo])
    assert "echo" in capsys.readouterr().out


def test_moto_speedups_change_no_answer():
    """The local stack's moto fast paths give exactly what moto's own serializer gives."""
    from agent_knowledge.repositories import aws
    from agent_knowledge_dev import moto_speedups

    dynamodb = aws.client("dynamodb")
    table = os.environ["CONFIG_TABLE"]
    item = {
        "pk": {"S": "speedups#1"},
        "text": {"S": '中文 and "quotes" \\ \n'},
        "number": {"N": "12.5"},
        "flag": {"BOOL": True},
        "nothing": {"NULL": True},
        "strings": {"SS": ["a", "b"]},
        "numbers": {"NS": ["1", "2"]},
        "nested": {"L": [{"L": [{"N": "0"}, {"N": "10"}]}, {"M": {"k": {"S": "v"}, "b": {"B": b"\x00\xff"}}}]},
        "binary": {"B": b"\x01\x02"},
    }
    dynamodb.put_item(TableName=table, Item=item)
    query = {
        "TableName": table,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": "speedups#1"}},
    }
    fast = (dynamodb.get_item(TableName=table, Key={"pk": item["pk"]})["Item"], dynamodb.query(**query)["Items"])
    moto_speedups.uninstall()
    try:
        plain = (dynamodb.get_item(TableName=table, Key={"pk": item["pk"]})["Item"], dynamodb.query(**query)["Items"])
    finally:
        moto_speedups.install()
    assert fast == plain
    assert fast[0] == item
