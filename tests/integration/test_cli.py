"""The admin CLI and `invoke`, in-process, against a local stack on a moto server (what `serve`
runs, without the HTTP side). Output is read the way a script would: JSON on stdout."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent_knowledge.errors import Unauthorized
from agent_knowledge.identity.caller import open_workspace
from agent_knowledge.repositories import aws
from agent_knowledge.repositories.bundle import Repositories
from agent_knowledge.runtime.container import default_repositories
from agent_knowledge_dev import cli
from agent_knowledge_dev.commands import Command
from agent_knowledge_dev.demo import DEMO_KB, DEMO_ROUTE
from agent_knowledge_dev.localstate import STATE_DIR_ENV, ServeLock, ServerInfo
from agent_knowledge_dev.runtime import reset_caches
from agent_knowledge_dev.stacks import moto_server_stack
from agent_knowledge_dev.template import function_routes
from tests.support.folders import write_folder
from tests.support.knowledge import published

EVENTS = Path(__file__).resolve().parents[2] / "events"
LOCAL_SOURCES_BUCKET = "agent-knowledge-sourcesbucket"


@pytest.fixture(scope="module")
def running_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ[STATE_DIR_ENV] = str(tmp_path_factory.mktemp("state"))
    lock = ServeLock()
    lock.acquire()
    try:
        with moto_server_stack() as stack:
            environment = dict(stack.environment)
            if "SOURCES_BUCKET" not in environment:  # a template without the pipeline: upload-only tests
                aws.client("s3").create_bucket(Bucket=LOCAL_SOURCES_BUCKET)
                environment["SOURCES_BUCKET"] = LOCAL_SOURCES_BUCKET
            lock.publish(ServerInfo(os.getpid(), "http://127.0.0.1:0", stack.endpoint, environment, 0.0))
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
        "last_sync": None,
        "default_access": "route",
    }
    assert run("kb", "default-access", "policies", "none").json()["default_access"] == "none"
    assert run("kb", "default-access", "policies", "route").json()["default_access"] == "route"
    assert run("kb", "create", "secret", "--default-access", "none").json()["default_access"] == "none"
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
    assert set(issued) == {"session_id", "access_token", "expires_at", "expires_at_epoch"}
    assert issued["expires_at_epoch"] - time.time() == pytest.approx(600, abs=30)
    # ISO 8601 in UTC, as hints give theirs; the same instant as the epoch seconds.
    expires = datetime.strptime(issued["expires_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert expires.timestamp() == issued["expires_at_epoch"]
    caller = open_workspace(
        _repositories(), f"Bearer {issued['access_token']}", "hr", time.time(), oauth=lambda: None
    ).caller
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
        open_workspace(_repositories(), f"Bearer {issued['access_token']}", "hr", time.time(), oauth=lambda: None)


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
    odt = tmp_path / "a.odt"
    odt.write_bytes(b"PK")
    result = run("doc", "put", DEMO_KB, "a.odt", "--file", str(odt))
    assert result.status == 1 and "only .md, .markdown, .txt, .html, .htm, .pdf, .docx, .pptx files" in result.stderr


def test_aws_target_needs_a_stack(run):
    result = run("kb", "create", "x", "--aws")
    assert result.status == 1 and "--aws needs --stack NAME" in result.stderr


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


def _is_http(event: str) -> bool:
    return "routeKey" in json.loads((EVENTS / event).read_text(encoding="utf-8"))


# The ingestion pipeline's SQS events (ingest-*, indexer-*) run in tests/integration/test_pipeline_events.py.
@pytest.mark.parametrize("event", sorted(path.name for path in EVENTS.glob("*.json") if _is_http(path.name)))
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


# Validation of options (issue 17): nothing half-understood reaches the stack.


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        # The reviewer's case: a singular key was dropped, and the policy admitted every tenant.
        ('{"tenant": ["acme"]}', "unknown key 'tenant' (did you mean 'tenants'?)"),
        ('{"tenants": ["acme"], "role": ["x"]}', "unknown key 'role' (did you mean 'roles'?)"),
        ('{"tenants": "acme"}', "tenants: Input should be a valid list"),
        ('{"tenants": [1]}', "tenants.0: Input should be a valid string"),
        ('{"enabled": "yes"}', "enabled: Input should be a valid boolean"),
        ('{"anonymous": 1}', "anonymous: Input should be a valid boolean"),
        ('["acme"]', "must be a JSON object"),
        ('{"tenants": ["a"], "tenants": ["b"]}', "duplicate key"),
        ('{"tenants": ["acme"]', "not valid JSON"),
    ],
)
def test_route_audience_refuses_unknown_keys_and_wrong_types(run, policy, message):
    result = run("route", "put", "guarded-2", "--kb", DEMO_KB, "--audience", policy)
    assert result.status == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert "--audience is not a valid audience policy" in result.stderr and message in result.stderr
    assert _repositories().routes.get("guarded-2") is None  # nothing was written


def test_route_audience_accepts_every_documented_key(run):
    policy = {
        "enabled": True,
        "anonymous": False,
        "clients": ["demo-agent"],
        "tenants": ["acme"],
        "roles": ["analyst"],
        "principals": ["ada"],
        "audiences": ["*"],
    }
    route = run("route", "put", "guarded-3", "--kb", DEMO_KB, "--audience", json.dumps(policy)).json()
    assert route["audience"] == policy


def test_client_put_refuses_routes_that_do_not_exist(run):
    result = run("client", "put", "lost-bot", "--route", DEMO_ROUTE, "no-such-route")
    assert result.status == 1 and result.stderr.count("\n") == 1 and result.stdout == ""
    assert "unknown route 'no-such-route'" in result.stderr and "route put no-such-route" in result.stderr
    assert _repositories().clients.get("lost-bot") is None


@pytest.mark.parametrize("ttl", ["604801", "99999999999", "-5", "0", "1.5", "soon"])
def test_session_ttl_is_a_positive_number_of_seconds_up_to_7_days(run, ttl):
    result = run("session", "issue", "--client", "demo-agent", "--route", DEMO_ROUTE, "--ttl", ttl)
    assert result.status == 1 and result.stderr.count("\n") == 1 and result.stdout == ""
    assert "--ttl" in result.stderr and "604800" in result.stderr


def test_session_ttl_of_7_days_is_accepted(run):
    issued = run("session", "issue", "--client", "demo-agent", "--route", DEMO_ROUTE, "--ttl", "604800").json()
    assert issued["expires_at_epoch"] - time.time() == pytest.approx(604800, abs=30)


@pytest.mark.parametrize("ttl", ["0", "-1", "2592001", "day"])
def test_task_ttl_is_bounded(run, ttl):
    result = run("task", "create", "--member", "ses_x", "--ttl", ttl)
    assert result.status == 1 and result.stderr.count("\n") == 1 and "--ttl" in result.stderr


@pytest.mark.parametrize("workers", ["0", "-2", "33", "two"])
def test_doc_put_workers_must_be_1_to_32(run, tmp_path, workers):
    result = run("doc", "put", DEMO_KB, "--dir", str(tmp_path), "--workers", workers)
    assert result.status == 1 and result.stderr.count("\n") == 1 and result.stdout == ""
    assert "--workers" in result.stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((), "required: COMMAND"),
        (("nosuch",), "invalid choice: 'nosuch'"),
        (("route", "put"), "route put: the following arguments are required: ROUTE"),
        (("session", "issue", "--route", DEMO_ROUTE), "session issue: the following arguments are required: --client"),
        (("kb", "create", "x", "--bogus"), "unrecognized arguments: --bogus"),
        (("route", "put", "r", "--top-k", "many"), "route put: argument --top-k"),
    ],
)
def test_argument_errors_are_one_line_with_exit_status_1(run, arguments, message):
    result = run(*arguments)
    assert result.status == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("agent-knowledge: ") and message in result.stderr
    assert "--help" in result.stderr  # says where to look


def test_version(run, capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"agent-knowledge {version('agent-knowledge')}\n"


# --- documents through the sources bucket ---------------------------------------------------------


def _sources_bucket() -> str:
    from agent_knowledge_dev.localstate import running_server

    server = running_server()
    assert server is not None
    return server.environment["SOURCES_BUCKET"]


def _objects(kb_id: str) -> dict[str, bytes]:
    s3 = aws.client("s3")
    listed = s3.list_objects_v2(Bucket=_sources_bucket(), Prefix=f"{kb_id}/").get("Contents", [])
    return {
        item["Key"][len(kb_id) + 1 :]: s3.get_object(Bucket=_sources_bucket(), Key=item["Key"])["Body"].read()
        for item in listed
    }


def test_a_folder_upload_never_follows_symbolic_links(run, tmp_path):
    """Issue 17 finding 1: a link to a file outside the folder was ingested and served to agents."""
    outside = write_folder(tmp_path / "outside", {"passwd.md": "# root\n\nroot:x:0:0:secret\n"})
    folder = write_folder(
        tmp_path / "docs",
        {"guides/intro.md": "# Intro\n\nWelcome.\n"},
        links={"passwd.md": outside / "passwd.md", "linked": outside},
    )
    os.mkfifo(folder / "pipe.md")
    run("kb", "create", "links")
    result = run("doc", "put", "links", "--dir", str(folder))
    assert result.status == 0, result.stderr
    summary = result.json()
    assert (summary["files"], summary["created"], summary["failed"]) == (1, 1, 0)
    assert summary["ignored"] == [
        {"path": "linked", "reason": "symlink"},
        {"path": "passwd.md", "reason": "symlink"},
        {"path": "pipe.md", "reason": "not_regular_file"},
    ]
    # The same words on stderr, one line each.
    assert "ignored: linked: symlink\n" in result.stderr and "ignored: pipe.md: not_regular_file\n" in result.stderr
    objects = _objects("links")
    assert list(objects) == ["guides/intro.md"]
    assert not any(b"secret" in body for body in objects.values())


def test_a_folder_upload_sends_only_changes_and_prunes_files_that_are_gone(run, tmp_path):
    from agent_knowledge.ingest.ingestor import Ingestor

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "keep.md").write_text("# Keep\n\nStays the same.\n", encoding="utf-8")
    (folder / "change.md").write_text("# Change\n\nFirst version.\n", encoding="utf-8")
    (folder / "gone.md").write_text("# Gone\n\nDeleted locally later.\n", encoding="utf-8")
    run("kb", "create", "sync")
    first = run("doc", "put", "sync", "--dir", str(folder)).json()
    assert (first["created"], first["updated"], first["skipped"], first["deleted"]) == (3, 0, 0, 0)
    # What the pipeline does with the objects (done here directly, so the test needs no pipeline).
    ingestor = Ingestor(_repositories())
    for source_key, content in _objects("sync").items():
        published(_repositories(), ingestor.put("sync", source_key, None, content, media_type="text/markdown"))

    (folder / "change.md").write_text("# Change\n\nSecond version.\n", encoding="utf-8")
    (folder / "gone.md").unlink()
    # An object whose local file exists but is not a document (left out of the walk) is not pruned.
    (folder / "notes.odt").write_bytes(b"PK")
    aws.client("s3").put_object(Bucket=_sources_bucket(), Key="sync/notes.odt", Body=b"PK")
    second = run("doc", "put", "sync", "--dir", str(folder), "--prune").json()
    assert (second["created"], second["updated"], second["skipped"], second["deleted"]) == (0, 1, 1, 1)
    objects = _objects("sync")
    assert sorted(objects) == ["change.md", "keep.md", "notes.odt"]
    assert b"Second version." in objects["change.md"]


def test_a_file_that_cannot_be_ingested_is_reported_and_not_uploaded(run, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.md").write_text("# Good\n\nFine.\n", encoding="utf-8")
    (folder / "latin1.txt").write_bytes("café au lait".encode("latin-1"))
    (folder / "empty.md").write_text("  \n", encoding="utf-8")
    run("kb", "create", "broken")
    aws.client("s3").put_object(Bucket=_sources_bucket(), Key="broken/empty.md", Body=b"# Old\n\nGood old text.")
    result = run("doc", "put", "broken", "--dir", str(folder))
    assert result.status == 1
    summary = result.json()
    assert (summary["created"], summary["failed"]) == (1, 2)
    assert summary["failures"] == [
        {"source_key": "empty.md", "error": "body is empty"},
        {
            "source_key": "latin1.txt",
            "error": "content is not valid UTF-8 (invalid byte at offset 3); if the file is in another encoding, "
            "name it with --charset (e.g. --charset windows-1252)",
        },
    ]
    # The stored version of a file that now fails stays as it was.
    assert _objects("broken") == {"empty.md": b"# Old\n\nGood old text.", "good.md": b"# Good\n\nFine.\n"}


def _settled_body(kb_id: str, source_key: str) -> tuple[Any, str]:
    """The key's record once the pipeline settled it, and its stored body (empty if failed)."""
    from agent_knowledge.repositories.documents import document_id

    deadline = time.monotonic() + 120
    while True:
        record = _repositories().documents.get(kb_id, document_id(source_key))
        if record is not None and record.status in ("ready", "failed"):
            body = _repositories().bodies.read(record.body_key).decode() if record.status == "ready" else ""
            return record, body
        assert time.monotonic() < deadline, f"{kb_id}/{source_key} not settled"
        time.sleep(0.1)


LATIN_1_NOTE = "# Crème brûlée\n\nÀ la carte: café, crème, brûlée, naïve façade.\n"


def test_a_latin_1_file_is_ingested_with_the_charset_doc_put_declares(run, tmp_path):
    document = tmp_path / "menu.txt"
    document.write_bytes(LATIN_1_NOTE.encode("latin-1"))
    run("kb", "create", "charsets")
    refused = run("doc", "put", "charsets", "menu.txt", "--file", str(document))
    assert refused.status == 1 and "content is not valid UTF-8 (invalid byte at offset 4)" in refused.stderr
    assert "name it with --charset (e.g. --charset windows-1252)" in refused.stderr
    result = run("doc", "put", "charsets", "menu.txt", "--file", str(document), "--charset", "latin-1", "--wait")
    assert result.status == 0, result.stderr
    assert result.json()["document"]["status"] == "ready"
    head = aws.client("s3").head_object(Bucket=_sources_bucket(), Key="charsets/menu.txt")
    assert head["ContentType"] == "text/plain; charset=latin-1"
    # Through the ingest: the object's Content-Type decided how the pipeline decoded it.
    record, body = _settled_body("charsets", "menu.txt")
    assert record.status == "ready" and "naïve façade" in body and record.title == "Crème brûlée"


def test_a_folder_upload_declares_the_charset_of_its_text_and_markdown_files_only(run, tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "menu.txt").write_bytes(LATIN_1_NOTE.encode("latin-1"))
    (folder / "carte.md").write_bytes("# À la carte\n\nCrème fraîche.\n".encode("cp1252"))
    page = '<html><head><meta charset="utf-8"><title>Déjà vu</title></head><body><p>Été.</p></body></html>'
    (folder / "page.html").write_text(page, encoding="utf-8")  # HTML declares its own: not re-decoded
    run("kb", "create", "folder-charsets")
    result = run("doc", "put", "folder-charsets", "--dir", str(folder), "--charset", "windows-1252", "--wait")
    assert result.status == 0, result.stderr
    assert (result.json()["created"], result.json()["ready"], result.json()["failed"]) == (3, 3, 0)
    s3 = aws.client("s3")
    types = {
        key: s3.head_object(Bucket=_sources_bucket(), Key=f"folder-charsets/{key}")["ContentType"]
        for key in ("menu.txt", "carte.md", "page.html")
    }
    assert types == {
        "menu.txt": "text/plain; charset=windows-1252",
        "carte.md": "text/markdown; charset=windows-1252",
        "page.html": "text/html",
    }
    assert "Crème fraîche." in _settled_body("folder-charsets", "carte.md")[1]
    assert _settled_body("folder-charsets", "page.html")[0].title == "Déjà vu"
    # Without --charset a non-UTF-8 text file is refused with the way out.
    plain = run("doc", "put", "folder-charsets", "--dir", str(folder))
    assert plain.status == 1
    errors = {failure["source_key"]: failure["error"] for failure in plain.json()["failures"]}
    assert set(errors) == {"carte.md", "menu.txt"}
    assert all(error.endswith("name it with --charset (e.g. --charset windows-1252)") for error in errors.values())


@pytest.mark.parametrize(
    ("file_name", "charset", "message"),
    [
        ("a.txt", "rot13", "--charset 'rot13' is not a text encoding the ingest decodes"),
        ("a.txt", "no-such-charset", "--charset 'no-such-charset' is not a text encoding"),
        ("a.html", "latin-1", "--charset is for .txt, .md and .markdown files; a.html is text/html"),
    ],
)
def test_doc_put_refuses_a_charset_it_cannot_apply(run, tmp_path, file_name, charset, message):
    document = tmp_path / file_name
    document.write_text("<p>Text</p>", encoding="utf-8")
    result = run("doc", "put", DEMO_KB, file_name, "--file", str(document), "--charset", charset)
    assert result.status == 1 and message in result.stderr and result.stdout == ""
    assert file_name not in _objects(DEMO_KB)


def test_an_undecodable_byte_in_the_declared_charset_is_refused_before_the_upload(run, tmp_path):
    document = tmp_path / "sjis.txt"
    document.write_bytes(b"Text \x81\x20 broken")  # 0x81 0x20 is no Shift_JIS character
    result = run("doc", "put", DEMO_KB, "sjis.txt", "--file", str(document), "--charset", "shift_jis")
    assert result.status == 1
    assert "cannot be ingested (nothing was uploaded): content is not valid shift_jis" in result.stderr


def test_one_file_with_a_title_travels_as_object_metadata(run, tmp_path):
    document = tmp_path / "leave.md"
    document.write_text("# Leave\n\nParental leave is twenty weeks.\n", encoding="utf-8")
    run("kb", "create", "single")
    result = run("doc", "put", "single", "guides/leave.md", "--file", str(document), "--title", "Congé parental")
    assert result.status == 0, result.stderr
    put = result.json()
    assert put["outcome"] == "created"
    assert put["object"] == f"s3://{_sources_bucket()}/single/guides/leave.md"
    assert put["document"]["title"] == "Congé parental" and put["document"]["status"] == "pending"
    head = aws.client("s3").head_object(Bucket=_sources_bucket(), Key="single/guides/leave.md")
    assert head["ContentType"] == "text/markdown"
    # base64url of the title's UTF-8: read back exactly (test_cli_titles_wait.py)
    assert head["Metadata"] == {"title-base64url": "Q29uZ8OpIHBhcmVudGFs"}


@pytest.mark.parametrize(
    ("source_key", "message"),
    [
        ("../leave.md", "invalid SOURCE_KEY '../leave.md'"),
        ("/leave.md", "invalid SOURCE_KEY"),
        ("guides/leave", "must end in one of .md"),
        ("guides/leave.html", "is text/html but leave.md is text/markdown"),
    ],
)
def test_a_source_key_the_pipeline_could_not_type_is_refused(run, tmp_path, source_key, message):
    document = tmp_path / "leave.md"
    document.write_text("# Leave\n", encoding="utf-8")
    result = run("doc", "put", DEMO_KB, source_key, "--file", str(document))
    assert result.status == 1 and message in result.stderr


def test_a_bad_single_file_is_refused_before_anything_is_uploaded(run, tmp_path):
    document = tmp_path / "empty.md"
    document.write_text("\n", encoding="utf-8")
    result = run("doc", "put", DEMO_KB, "empty.md", "--file", str(document))
    assert result.status == 1 and "cannot be ingested (nothing was uploaded): body is empty" in result.stderr
    assert "empty.md" not in _objects(DEMO_KB)


def test_writing_to_a_disabled_kb_is_refused(run, tmp_path):
    run("kb", "create", "off")
    run("kb", "disable", "off")
    result = run("doc", "put", "off", "--dir", str(tmp_path))
    assert result.status == 1 and "`agent-knowledge kb enable off`" in result.stderr


def test_doc_list_kb_status_kb_list_and_reindex(run):
    listing = run("doc", "list", DEMO_KB).json()
    assert len(listing) == 12
    assert {entry["status"] for entry in listing} == {"ready"}
    assert set(listing[0]) == {
        "source_key",
        "title",
        "revision",
        "status",
        "reason",
        "updated_at",
        "access",
        "sections",
    }
    assert {len(entry["sections"]) for entry in listing} == {0}  # short sources: served whole
    assert {entry["access"] for entry in listing} == {None}  # no sidecars: the KB's default
    assert listing == sorted(listing, key=lambda entry: entry["source_key"])
    status = run("kb", "status", DEMO_KB).json()
    assert (status["ready"], status["pending"], status["failed"]) == (12, 0, 0)
    assert status["oldest_pending_age_seconds"] is None
    assert DEMO_KB in [kb["kb_id"] for kb in run("kb", "list").json()]
    reindexed = run("kb", "reindex", DEMO_KB).json()
    assert reindexed["index_generation"] == status["index_generation"] + 1
    # The rebuild's generation is published; the indexer's vector pass may already have published
    # the next one (the rebuilt documents' vectors, reused, in one merged file), so never less.
    assert run("kb", "status", DEMO_KB).json()["index_generation"] >= reindexed["index_generation"]
    assert run("kb", "status", "missing-kb").status == 1


def test_deleting_a_document_stored_before_the_sources_bucket(run):
    from agent_knowledge.ingest.ingestor import Ingestor

    run("kb", "create", "direct")
    published(_repositories(), Ingestor(_repositories()).put("direct", "old.md", None, "# Old\n\nStored directly."))
    deleted = run("doc", "delete", "direct", "old.md").json()
    assert deleted == {"kb_id": "direct", "source_key": "old.md", "deleted": True, "object": None}
    assert run("doc", "list", "direct").json() == []
    again = run("doc", "delete", "direct", "old.md")
    assert again.status == 1 and "no document 'old.md' in knowledge base 'direct'" in again.stderr


def test_deleting_a_document_deletes_its_object(run, tmp_path):
    document = tmp_path / "a.md"
    document.write_text("# A\n\nText.\n", encoding="utf-8")
    run("kb", "create", "objects")
    run("doc", "put", "objects", "a.md", "--file", str(document))
    deleted = run("doc", "delete", "objects", "a.md").json()
    assert deleted["object"] == f"s3://{_sources_bucket()}/objects/a.md"
    assert _objects("objects") == {}


# --- reconciliation: kb sync, and kb status / doc list from the bucket (issue 23, finding 4) ----------


@contextmanager
def _events_lost() -> Iterator[None]:
    """Objects put meanwhile send no event at all (the notification configuration is off)."""
    s3, bucket = aws.client("s3"), _sources_bucket()
    saved = s3.get_bucket_notification_configuration(Bucket=bucket)
    saved.pop("ResponseMetadata", None)
    s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={})
    try:
        yield
    finally:
        s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration=saved)


def _adds_up(status: dict[str, Any]) -> bool:
    return status["ready"] + status["pending"] + status["failed"] + status["not_ingested"] == status["objects"]


def test_objects_put_straight_into_the_bucket_with_their_events_lost_are_ready_after_kb_sync_wait(run):
    """The outside reviewers' check: the bucket is the truth, whatever happened to its events."""
    run("kb", "create", "lost")
    s3 = aws.client("s3")
    with _events_lost():
        for number in range(5):
            body = f"# Lost note {number}\n\nThe mislaid marmoset number {number}.\n".encode()
            s3.put_object(Bucket=_sources_bucket(), Key=f"lost/notes/{number}.md", Body=body)
        s3.put_object(Bucket=_sources_bucket(), Key="lost/broken.txt", Body="café".encode("latin-1"))
    before = run("kb", "status", "lost").json()
    assert (before["objects"], before["ready"], before["pending"]) == (6, 0, 6) and _adds_up(before)
    # (The scheduled reconcile may have run meanwhile: it leaves objects this young to their events.)
    assert before["dead_lettered"] == 0
    assert {entry["status"] for entry in run("doc", "list", "lost").json()} == {"pending"}

    synced = run("kb", "sync", "lost", "--wait", "--timeout", "120")
    assert synced.status == 0, synced.stderr
    result = synced.json()
    assert (result["kb_id"], result["objects"], result["documents"]) == ("lost", 6, 0)
    assert (result["requeued"], result["missing"], result["orphaned"]) == (6, 6, 0)
    final = result["status"]
    assert (final["objects"], final["ready"], final["failed"], final["pending"], final["not_ingested"]) == (
        6, 5, 1, 0, 0,
    )  # fmt: skip
    assert "kb sync: lost: " in synced.stderr  # progress on stderr
    listing = {entry["source_key"]: entry for entry in run("doc", "list", "lost").json()}
    assert {key: entry["status"] for key, entry in listing.items()} == {
        **{f"notes/{number}.md": "ready" for number in range(5)},
        "broken.txt": "failed",
    }
    assert "not valid UTF-8" in listing["broken.txt"]["reason"]
    after = run("kb", "status", "lost").json()
    # The local scheduled reconcile may have run since: last_sync never goes back.
    assert after["last_sync"] >= result["last_sync"] and _adds_up(after)
    records = list(_repositories().documents.list("lost", with_chunks=False))
    assert sorted(r.status for r in records) == ["failed"] + ["ready"] * 5


def test_kb_sync_deletes_documents_whose_objects_are_gone_and_reports_a_timeout(run, tmp_path):
    document = tmp_path / "short-lived.md"
    document.write_text("# Short-lived\n\nThe ephemeral egret.\n", encoding="utf-8")
    run("kb", "create", "orphans")
    put = run("doc", "put", "orphans", "short-lived.md", "--file", str(document), "--wait", "--timeout", "60")
    assert put.status == 0, put.stderr
    with _events_lost():
        aws.client("s3").delete_object(Bucket=_sources_bucket(), Key="orphans/short-lived.md")
    status = run("kb", "status", "orphans").json()
    assert (status["objects"], status["deletes_pending"]) == (0, 1) and _adds_up(status)
    listed = run("doc", "list", "orphans").json()
    assert [(e["source_key"], e["status"]) for e in listed] == [("short-lived.md", "pending")]
    assert "its object is gone" in listed[0]["reason"]
    # A timeout that cannot be met: exit 1, the result still printed with the status it reached.
    hurried = run("kb", "sync", "orphans", "--wait", "--timeout", "0.001")
    assert hurried.status == 1 and "not settled after 0.001 s" in hurried.stderr
    assert hurried.json()["orphaned"] == 1 and "status" in hurried.json()
    synced = run("kb", "sync", "orphans", "--wait", "--timeout", "120")
    assert synced.status == 0, synced.stderr
    assert synced.json()["status"]["deletes_pending"] == 0
    assert run("doc", "list", "orphans").json() == []


def test_kb_status_says_when_the_dead_letter_queues_cannot_be_read(run, monkeypatch):
    from agent_knowledge.errors import KnowledgeUnavailable
    from agent_knowledge.repositories.queues import DeadLetterQueue

    def denied(self, limit=0):
        raise KnowledgeUnavailable.of("the dead-letter queue")

    monkeypatch.setattr(DeadLetterQueue, "peek", denied)
    result = run("kb", "status", DEMO_KB)
    assert result.status == 0 and result.json()["dead_lettered"] is None
    assert "dead-lettered messages not counted" in result.stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("kb", "sync", "missing-kb"), "unknown knowledge base 'missing-kb'"),
        (("kb", "sync", DEMO_KB, "--timeout", "0"), "--timeout must be a positive number"),
    ],
)
def test_kb_sync_mistakes_are_one_line_errors(run, arguments, message):
    result = run(*arguments)
    assert result.status == 1 and message in result.stderr and result.stdout == ""
    assert result.stderr.count("\n") == 1


def test_kb_sync_refuses_a_disabled_kb(run):
    run("kb", "create", "sync-off")
    run("kb", "disable", "sync-off")
    result = run("kb", "sync", "sync-off")
    assert result.status == 1 and "`agent-knowledge kb enable sync-off`" in result.stderr


def test_serve_runs_the_reconciler_on_its_schedule():
    import threading

    from agent_knowledge_dev.reconcile_schedule import schedule_seconds

    assert schedule_seconds() == 15 * 60  # template.yaml ReconcileSchedule: rate(15 minutes)
    assert schedule_seconds("rate(1 hour)") == 3600 and schedule_seconds("cron(0 * * * ? *)") == 900
    assert "reconcile-schedule" in {thread.name for thread in threading.enumerate()}


# --- a deployed stack: names from its CloudFormation outputs -------------------------------------


def _create_stack(name: str, outputs: dict[str, str]) -> None:
    body = {
        "Resources": {"Marker": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    import botocore.session
    from botocore.config import Config

    # moto's first CloudFormation call imports all its resource models: slow on a busy machine, so
    # not through the layer's clients (they give up after 4 s).
    cloudformation = botocore.session.get_session().create_client(
        "cloudformation", config=Config(read_timeout=300, retries={"max_attempts": 1})
    )
    try:
        cloudformation.create_stack(StackName=name, TemplateBody=json.dumps(body))
    except cloudformation.exceptions.AlreadyExistsException:
        pass


def _local_outputs() -> dict[str, str]:
    from agent_knowledge.settings import ENVIRONMENT
    from agent_knowledge_dev.target import SOURCES_BUCKET_OUTPUT, STACK_OUTPUTS

    outputs = {output: os.environ[ENVIRONMENT[field]] for field, output in STACK_OUTPUTS.items()}
    return {**outputs, SOURCES_BUCKET_OUTPUT: _sources_bucket()}


def test_aws_stack_names_come_from_the_stack_outputs(run, tmp_path):
    run("kb", "list")  # points this process at the local stack (moto stands in for AWS here)
    _create_stack("ak-deployed", _local_outputs())
    listed = run("kb", "list", "--aws", "--stack", "ak-deployed")
    assert listed.status == 0, listed.stderr
    assert DEMO_KB in [kb["kb_id"] for kb in listed.json()]
    document = tmp_path / "remote.md"
    document.write_text("# Remote\n\nUploaded to the deployed stack.\n", encoding="utf-8")
    put = run("doc", "put", DEMO_KB, "remote.md", "--file", str(document), "--aws", "--stack", "ak-deployed")
    assert put.json()["object"] == f"s3://{_sources_bucket()}/{DEMO_KB}/remote.md"
    aws.client("s3").delete_object(Bucket=_sources_bucket(), Key=f"{DEMO_KB}/remote.md")


def test_kb_sync_on_a_deployed_stack_takes_the_queues_from_its_outputs(run):
    run("kb", "list")
    sqs = aws.client("sqs")
    queues = {
        "SourceQueueUrl": os.environ["SOURCE_QUEUE_URL"],
        "IndexQueueUrl": os.environ["INDEX_QUEUE_URL"],
        "SourceDeadLetterQueueUrl": sqs.get_queue_url(QueueName="SourceDeadLetterQueue")["QueueUrl"],
        "IndexDeadLetterQueueUrl": sqs.get_queue_url(QueueName="IndexDeadLetterQueue.fifo")["QueueUrl"],
    }
    _create_stack("ak-pipeline", {**_local_outputs(), **queues})
    run("kb", "create", "remote-sync")
    with _events_lost():
        aws.client("s3").put_object(
            Bucket=_sources_bucket(), Key="remote-sync/far.md", Body=b"# Far\n\nThe distant dormouse.\n"
        )
    synced = run("kb", "sync", "remote-sync", "--wait", "--timeout", "120", "--aws", "--stack", "ak-pipeline")
    assert synced.status == 0, synced.stderr
    assert synced.json()["status"]["ready"] == 1
    status = run("kb", "status", "remote-sync", "--aws", "--stack", "ak-pipeline").json()
    assert (status["objects"], status["ready"], status["dead_lettered"]) == (1, 1, 0)
    # A stack whose outputs name no queues (deployed before the reconciler) cannot sync.
    _create_stack("ak-deployed", _local_outputs())
    old = run("kb", "sync", "remote-sync", "--aws", "--stack", "ak-deployed")
    assert old.status == 1 and "no outputs SourceQueueUrl, IndexQueueUrl" in old.stderr


def test_aws_stack_errors_say_what_is_wrong(run, monkeypatch):
    run("kb", "list")
    _create_stack("ak-partial", {"SessionsTableName": "x"})
    _create_stack("ak-old", {key: value for key, value in _local_outputs().items() if key != "SourcesBucketName"})
    cases = [
        (("kb", "list", "--aws", "--stack", "ak-missing"), "no stack 'ak-missing' in us-east-1"),
        (("kb", "list", "--aws", "--stack", "ak-partial"), "lacks the outputs ConfigTableName, DocumentsTableName"),
        (("kb", "list", "--stack", "ak-partial"), "--stack names a deployed stack: add --aws"),
    ]
    for arguments, message in cases:
        result = run(*arguments)
        assert result.status == 1 and message in result.stderr, (arguments, result.stderr)
        assert result.stderr.count("\n") == 1
    # A stack deployed before the sources bucket: documents are stored directly, with a note.
    stored = run("doc", "put", "links", "--dir", str(EVENTS / "no-such-folder-here"), "--aws", "--stack", "ak-old")
    assert "folder not found" in stored.stderr
    old = run("kb", "status", DEMO_KB, "--aws", "--stack", "ak-old")
    assert old.status == 0 and old.json()["ready"] >= 12
    monkeypatch.setenv("AWS_REGION", "eu-west-1")  # AWS_REGION wins over AWS_DEFAULT_REGION
    assert "no stack 'ak-old' in eu-west-1" in run("kb", "list", "--aws", "--stack", "ak-old").stderr


def test_missing_aws_credentials_are_reported_as_such(run, monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    result = run("kb", "list", "--aws", "--stack", "anything")
    assert result.status == 1
    assert result.stderr.startswith("agent-knowledge: no AWS credentials found: set AWS_PROFILE")
    assert "temporarily unavailable" not in result.stderr


def test_pdf_docx_and_pptx_files_are_checked_locally_and_uploaded_with_their_type(run, tmp_path):
    from tests.support.office_documents import docx, pdf, pptx

    manual = tmp_path / "manual.pdf"
    manual.write_bytes(pdf([["Osprey nesting"]], title="Osprey Manual"))
    run("kb", "create", "office")
    put = run("doc", "put", "office", "birds/osprey.pdf", "--file", str(manual))
    assert put.status == 0, put.stderr
    assert put.json()["document"]["title"] == "Osprey Manual"  # found locally, as the ingest will
    head = aws.client("s3").head_object(Bucket=_sources_bucket(), Key="office/birds/osprey.pdf")
    assert head["ContentType"] == "application/pdf"

    secret = tmp_path / "secret.pdf"
    secret.write_bytes(pdf([["hidden"]], encrypted=True))
    refused = run("doc", "put", "office", "secret.pdf", "--file", str(secret))
    assert refused.status == 1 and "nothing was uploaded): the file is encrypted" in refused.stderr

    folder = write_folder(
        tmp_path / "docs",
        {
            "memo.docx": docx(("Heading1", "Memo"), "Text."),
            "deck.pptx": pptx([("Deck", ["Slide text"], None)]),
            "scan.pdf": pdf([[]], images_only=True),
        },
    )
    summary = run("doc", "put", "office", "--dir", str(folder)).json()
    assert (summary["created"], summary["failed"]) == (2, 1)
    assert summary["failures"][0]["source_key"] == "scan.pdf"
    assert "OCR is not done" in summary["failures"][0]["error"]
    assert {"deck.pptx", "memo.docx"} <= set(_objects("office"))


def _access_of(run, kb_id: str, source_key: str, expected: Any) -> dict[str, Any]:
    """`doc access` once the pipeline has applied the sidecar (its events are asynchronous)."""
    deadline = time.monotonic() + 120
    while True:
        shown = run("doc", "access", kb_id, source_key).json()
        if shown["access"] == expected:
            return shown  # type: ignore[no-any-return]
        assert time.monotonic() < deadline, shown
        time.sleep(0.1)


def test_doc_put_allow_and_deny_write_the_sidecar_and_doc_access_and_list_show_it(run, tmp_path):
    document = tmp_path / "pay.md"
    document.write_text("# Pay scales\n\nThe pay scales.\n", encoding="utf-8")
    run("kb", "create", "acl")
    refused = run("doc", "put", "acl", "pay.md", "--file", str(document), "--allow", "hr")
    assert refused.status == 1
    assert "'hr' is not principal:<id>, role:<name>, tenant:<name> or everyone" in refused.stderr
    assert _objects("acl") == {}
    assert run("doc", "put", "acl", "--dir", str(tmp_path), "--allow", "role:hr").status == 1
    put = ("doc", "put", "acl", "pay.md", "--file", str(document), "--wait")
    result = run(*put, "--allow", "role:hr", "principal:bob", "--deny", "tenant:x")
    assert result.status == 0, result.stderr
    access = {"allow": ["role:hr", "principal:bob"], "deny": ["tenant:x"]}
    assert result.json()["access"] == access and result.json()["document"]["status"] == "ready"
    assert json.loads(_objects("acl")["pay.md.metadata.json"]) == {"access": access}
    shown = _access_of(run, "acl", "pay.md", access)
    assert (shown["sidecar"], shown["default_access"], shown["follows"]) == ("pay.md.metadata.json", "route", "access")
    listed = run("doc", "list", "acl").json()
    assert [(entry["source_key"], entry["access"]) for entry in listed] == [("pay.md", access)]
    # The same document, other access: the sidecar changes and the document follows it.
    again = run(*put, "--allow", "everyone")
    assert again.status == 0 and again.json()["outcome"] == "updated", again.stderr
    _access_of(run, "acl", "pay.md", {"allow": ["everyone"], "deny": []})
    assert run("doc", "access", "acl", "nothing.md").status == 1


def test_a_folder_upload_takes_each_sidecar_beside_its_document(run, tmp_path):
    folder = write_folder(
        tmp_path / "docs",
        {
            "hr/pay.md": "# Pay\n\nPay scales.\n",
            "hr/pay.md.metadata.json": json.dumps({"access": {"allow": ["role:hr"]}}),
            "open.md": "# Open\n\nFor all.\n",
            "orphan.md.metadata.json": json.dumps({"access": {"allow": ["everyone"]}}),
            "bad.md": "# Bad\n\nBroken sidecar.\n",
            "bad.md.metadata.json": '{"access": {"allow": "role:hr"}}',
        },
    )
    run("kb", "create", "acl-folder")
    result = run("doc", "put", "acl-folder", "--dir", str(folder), "--wait")
    assert result.status == 1
    summary = result.json()
    assert (summary["files"], summary["created"], summary["failed"]) == (3, 2, 1)
    assert summary["failures"] == [
        {"source_key": "bad.md", "error": 'access sidecar: "access.allow" must be a list of entries'}
    ]
    assert {"path": "orphan.md.metadata.json", "reason": "unsupported_type"} in summary["ignored"]
    assert sorted(_objects("acl-folder")) == ["hr/pay.md", "hr/pay.md.metadata.json", "open.md"]
    _access_of(run, "acl-folder", "hr/pay.md", {"allow": ["role:hr"], "deny": []})
    assert run("doc", "access", "acl-folder", "open.md").json()["follows"] == "default_access"
    # The sidecar removed locally: --prune deletes it, and the document follows the KB's default.
    (folder / "hr" / "pay.md.metadata.json").unlink()
    (folder / "bad.md").unlink()
    (folder / "bad.md.metadata.json").unlink()
    pruned = run("doc", "put", "acl-folder", "--dir", str(folder), "--prune")
    assert pruned.status == 0, pruned.stderr
    assert sorted(_objects("acl-folder")) == ["hr/pay.md", "open.md"]
    _access_of(run, "acl-folder", "hr/pay.md", None)
