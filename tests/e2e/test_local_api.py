"""The local API over real HTTP on loopback: `agent-knowledge serve` in a subprocess, called the way
an agent would, every answer checked against docs/openapi.yaml."""

from __future__ import annotations

import json

import pytest

from agent_knowledge_dev.demo import DEMO_TOKEN, FOREIGN_ROUTE
from agent_knowledge_dev.handlers import PROJECT_ROOT
from tests.e2e.contract import assert_matches_spec
from tests.support.folders import write_folder
from tests.support.local_api import ServedApi, cli_environment, start_server


def test_capabilities_with_the_printed_token(local_api: ServedApi):
    assert local_api.token == DEMO_TOKEN
    reply = local_api.capabilities()
    assert reply.status == 200
    assert_matches_spec(reply, "GET", "capabilities")
    body = reply.json()
    assert body["route"] == "demo" and body["enabled"] is True and body["supported"] is True


@pytest.mark.parametrize("token", [None, "not-a-session-token-0000000000000", "short"])
def test_missing_or_unknown_bearer_is_401(local_api: ServedApi, token):
    reply = local_api.capabilities(token=token)
    assert reply.status == 401
    assert_matches_spec(reply, "GET", "capabilities")
    assert reply.json()["error"] == "unauthorized"
    assert reply.headers["www-authenticate"].startswith("Bearer")


def test_foreign_and_unknown_routes_are_the_same_404(local_api: ServedApi):
    foreign = local_api.capabilities(route=FOREIGN_ROUTE)
    unknown = local_api.capabilities(route="no-such-route")
    assert foreign.status == unknown.status == 404
    assert foreign.body == unknown.body
    assert_matches_spec(foreign, "GET", "capabilities")
    assert foreign.json()["error"] == "workspace_not_found"


def test_unknown_path_is_404_and_wrong_method_405_with_no_store(local_api: ServedApi):
    missing = local_api.request("GET", "/agent-api/v1/nowhere")
    assert missing.status == 404
    assert missing.headers["cache-control"] == "no-store"
    assert missing.json()["error"] == "not_found"
    wrong = local_api.request("DELETE", local_api.workspace("capabilities"))
    assert wrong.status == 405
    assert wrong.headers["allow"] == "GET"
    assert wrong.headers["cache-control"] == "no-store"


def test_bad_bodies_are_400_invalid_request(local_api: ServedApi):
    cases = [
        local_api.request("POST", local_api.workspace("search"), raw=b"{not json", headers={"Content-Type": "text/x"}),
        local_api.request("POST", local_api.workspace("search"), raw=b"\xff\xfe\x00binary"),
        local_api.search({"query": "vacation", "kb_id": "handbook"}),
        local_api.search({"query": "x" * 70_000}),
        local_api.read({"ref": "x", "max_bytes": 100}),
    ]
    for reply in cases:
        assert reply.status == 400, reply.body
        assert reply.json()["error"] == "invalid_request"
    for reply in cases[:4]:
        assert_matches_spec(reply, "POST", "search")


def test_search_then_read_every_page_following_next_cursor(local_api: ServedApi):
    search = local_api.search({"query": "How do I report a lost laptop?", "limit": 3})
    assert search.status == 200
    assert_matches_spec(search, "POST", "search")
    body = search.json()
    assert body["status"] == "ok" and body["hints"], body
    assert len(search.body) <= 4096
    hint = body["hints"][0]

    pages, cursor = [], None
    while True:
        request = {"ref": hint["ref"], "max_bytes": 4096} | ({"cursor": cursor} if cursor else {})
        reply = local_api.read(request)
        assert reply.status == 200, reply.body
        assert_matches_spec(reply, "POST", "read")
        assert len(reply.body) <= 4096
        page = reply.json()
        pages.append(page)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    content = "".join(page["content"] for page in pages)
    assert len(content.encode("utf-8")) == pages[0]["total_content_bytes"]
    assert pages[-1]["truncated"] is False and pages[-1]["budget_exhausted"] is False
    assert all(page["title"] == hint["title"] and page["revision"] == hint["revision"] for page in pages)


def test_chinese_query_finds_the_chinese_handbook(local_api: ServedApi):
    reply = local_api.search({"query": "设备丢失应该怎么办？"})
    assert reply.status == 200
    assert_matches_spec(reply, "POST", "search")
    titles = [hint["title"] for hint in reply.json()["hints"]]
    assert "信息安全守则" in titles


def test_tampered_reference_is_400_knowledge_reference_invalid(local_api: ServedApi):
    search = local_api.search({"query": "code review"})
    ref = search.json()["hints"][0]["ref"]
    tampered = ref[:-4] + ("AAAA" if not ref.endswith("AAAA") else "BBBB")
    reply = local_api.read({"ref": tampered})
    assert reply.status == 400
    assert_matches_spec(reply, "POST", "read")
    assert reply.json()["error"] == "knowledge_reference_invalid"


def test_a_second_serve_says_one_is_running(local_api: ServedApi):
    again = local_api.cli("serve", "--port", "0")
    assert again.returncode == 1
    assert "already running" in again.stderr
    assert f"{local_api.base_url}" in again.stderr
    assert "Traceback" not in again.stderr


def test_serve_on_a_taken_port_says_so(local_api: ServedApi, tmp_path):
    environment = dict(local_api.environment, AGENT_KNOWLEDGE_STATE_DIR=str(tmp_path))
    other = ServedApi(local_api.host, local_api.port, "", environment, tmp_path / "out")
    result = other.cli("serve", "--port", str(local_api.port))
    assert result.returncode == 1
    assert f"port {local_api.port}" in result.stderr and "already in use" in result.stderr


def test_bulk_ingest_of_a_folder_with_one_broken_file(local_api: ServedApi, tmp_path):
    folder = write_folder(
        tmp_path / "docs",
        {
            "guides/parking.md": "# Parking and bicycles\n\n"
            "The garage under the Lisbon office has twelve bicycle racks.\n",
            "guides/canteen.txt": "The canteen serves lunch from 11:30 to 14:00.\n",
            "kitchen.html": "<html><head><title>Kitchen rules</title></head>"
            "<body><p>Clean the espresso machine daily.</p></body></html>",
            "broken.md": b"# Broken\n\n\xff\xfe not UTF-8 \xc3\x28\n",
            "ignored.bin": b"\x00\x01 not a document type",
        },
    )

    assert local_api.cli("kb", "create", "office", "--name", "Office").returncode == 0
    first = local_api.cli("doc", "put", "office", "--dir", str(folder), "--wait", "--timeout", "120")
    assert first.returncode == 1, first.stderr
    summary = json.loads(first.stdout)
    assert (summary["files"], summary["created"], summary["updated"], summary["skipped"], summary["failed"]) == (
        4,
        3,
        0,
        0,
        1,
    )
    assert summary["failures"][0]["source_key"] == "broken.md"
    assert "UTF-8" in summary["failures"][0]["error"]
    assert "broken.md" in first.stderr and "Traceback" not in first.stderr

    (folder / "broken.md").write_text("# Fixed\n\nNow it is valid text.\n", encoding="utf-8")
    (folder / "guides" / "canteen.txt").write_text("The canteen serves lunch from 11:00.\n", encoding="utf-8")
    second = local_api.cli("doc", "put", "office", "--dir", str(folder), "--wait", "--timeout", "120")
    assert second.returncode == 0, second.stderr
    summary = json.loads(second.stdout)
    assert (summary["created"], summary["updated"], summary["skipped"], summary["failed"]) == (1, 1, 2, 0)

    # The new knowledge base answers over HTTP once a route uses it.
    assert local_api.cli("route", "put", "office", "--kb", "office").returncode == 0
    assert local_api.cli("client", "put", "office-agent", "--route", "office").returncode == 0
    issued = local_api.cli("session", "issue", "--client", "office-agent", "--route", "office", "--principal-id", "u1")
    token = json.loads(issued.stdout)["access_token"]
    reply = local_api.search({"query": "bicycle racks"}, route="office", token=token)
    assert reply.status == 200
    assert [hint["title"] for hint in reply.json()["hints"]][0] == "Parking and bicycles"

    # One document with --wait: searchable when the command returns.
    single = tmp_path / "espresso.md"
    single.write_text("# Espresso\n\nThe espresso machine descales itself on Fridays.\n", encoding="utf-8")
    put = local_api.cli("doc", "put", "office", "kitchen/espresso.md", "--file", str(single), "--wait")
    assert put.returncode == 0, put.stderr
    assert json.loads(put.stdout)["document"]["status"] == "ready"
    reply = local_api.search({"query": "descales itself"}, route="office", token=token)
    assert [hint["title"] for hint in reply.json()["hints"]][0] == "Espresso"


def test_user_mistakes_are_one_line_errors(local_api: ServedApi, tmp_path):
    cases = [
        (("doc", "put", "no-such-kb", "--dir", str(tmp_path)), "unknown knowledge base"),
        (("doc", "put", "handbook", "a.md", "--file", str(tmp_path / "missing.md")), "file not found"),
        (("kb", "enable", "no-such-kb"), "unknown knowledge base"),
        (("route", "put", "r1", "--kb", "handbook", "--audience", "{bad json"), "--audience"),
        (("invoke", "capabilities", str(tmp_path / "missing.json")), "event file not found"),
        (("session", "revoke", "ses_unknown"), "unknown session"),
    ]
    for arguments, expected in cases:
        result = local_api.cli(*arguments)
        assert result.returncode == 1, arguments
        assert expected in result.stderr, (arguments, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert result.stdout == ""


def test_without_a_running_serve_admin_commands_say_so(tmp_path):
    api = ServedApi("127.0.0.1", 0, "", cli_environment(tmp_path), tmp_path / "out")
    result = api.cli("kb", "create", "x")
    assert result.returncode == 1
    assert "agent-knowledge serve" in result.stderr and "Traceback" not in result.stderr


def test_invoke_without_a_running_serve_uses_a_fresh_demo_stack(tmp_path):
    api = ServedApi("127.0.0.1", 0, "", cli_environment(tmp_path), tmp_path / "out")
    result = api.cli("invoke", "capabilities", str(PROJECT_ROOT / "events" / "capabilities-valid-bearer.json"))
    assert result.returncode == 0, result.stderr
    response = json.loads(result.stdout)
    assert response["statusCode"] == 200
    assert response["headers"]["Cache-Control"] == "no-store"
    assert json.loads(response["body"])["route"] == "demo"


def test_start_server_helper_is_reusable(tmp_path):
    """A second, independent server (own state dir and port) runs beside the module's one."""
    api = start_server(tmp_path / "state", tmp_path / "serve.out")
    try:
        assert api.capabilities().status == 200
    finally:
        assert api.stop() == 0
    assert not (tmp_path / "state" / "serve.json").exists()


def test_ctrl_c_stops_a_server_started_as_a_background_job(tmp_path):
    """A shell starts background jobs with SIGINT ignored, and the child inherits that; serve
    still stops on Ctrl-C (SIGINT) rather than running until it is killed."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        api = start_server(tmp_path / "state", tmp_path / "serve.out")
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        assert api.capabilities().status == 200
    finally:
        assert api.stop() == 0
    assert "stopping" in api.output_text()


def test_an_oversized_body_is_refused_unread_with_413(local_api: ServedApi):
    import socket

    with socket.create_connection((local_api.host, local_api.port), timeout=30) as connection:
        connection.sendall(
            (
                f"POST {local_api.workspace('search')} HTTP/1.1\r\nHost: {local_api.host}\r\n"
                f"Authorization: Bearer {local_api.token}\r\nContent-Type: application/json\r\n"
                "Content-Length: 7000000\r\n\r\n"
            ).encode()
        )
        response = b""
        while chunk := connection.recv(65536):  # the server answers without reading and closes
            response += chunk
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413")
    assert b"Cache-Control: no-store" in head
    assert json.loads(body)["error"] == "payload_too_large"


def test_a_kept_alive_connection_serves_several_requests(local_api: ServedApi):
    import http.client

    connection = http.client.HTTPConnection(local_api.host, local_api.port, timeout=30)
    try:
        for _ in range(3):
            connection.request(
                "GET", local_api.workspace("capabilities"), headers={"Authorization": f"Bearer {local_api.token}"}
            )
            response = connection.getresponse()
            assert response.status == 200 and json.loads(response.read())["route"] == "demo"
    finally:
        connection.close()
