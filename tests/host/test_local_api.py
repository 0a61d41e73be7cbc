"""End to end against a real `agent-knowledge serve`: the client's turns, and the `mcp` SDK's stdio
client → `agent-knowledge-mcp` → the local API.

One local API per module (it takes a few seconds to start); documents are added with the
admin CLI, as an operator would. Expired references cannot be produced here without waiting
300 s; that case is covered against the fake API in test_mcp_server.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio.to_thread
import pytest
from mcp.client.session import ClientSession

from agent_knowledge_dev.demo import DEMO_ROUTE, DEMO_TOKEN
from agent_knowledge_host import KnowledgeClient
from agent_knowledge_host import errors as e
from tests.host.fakes import CHAIN_MAX_BYTES
from tests.host.stdio import CONSOLE_SCRIPT, read_every_page, run_session, text_of
from tests.support.local_api import ServedApi, start_server

GUIDE = "# Zephyrine operations guide\n\n" + "".join(
    f"Step {n}: the zephyrine valve is checked twice; 检查阀门 before every shift.\n\n" for n in range(1400)
)  # about 115 KB: several pages, within the 128 KiB chain
ARCHIVE = "# Quillwort archive\n\n" + "".join(
    f"Entry {n}: quillwort samples are archived in the cold room.\n\n" for n in range(3000)
)  # about 180 KB: longer than the chain


NOTE = "# Ephemeral note\n\nThe marmoset key opens the east door.\n"


def put_documents(api: ServedApi, documents: dict[str, str]) -> None:
    """`agent-knowledge doc put handbook --dir`: one CLI run for all (the source key is the file name)."""
    assert api.output is not None
    folder = api.output.parent / "docs"
    folder.mkdir(exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    for key, text in documents.items():
        (folder / key).write_text(text, encoding="utf-8")
    done = api.cli("doc", "put", "handbook", "--dir", str(folder), "--wait", "--timeout", "100", timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def local_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApi]:
    tmp = tmp_path_factory.mktemp("host-e2e")
    api = start_server(tmp / "state", tmp / "serve.out", quiet=True)
    try:
        put_documents(api, {"zephyrine-guide.md": GUIDE, "quillwort-archive.md": ARCHIVE, "ephemeral-note.md": NOTE})
        yield api
    finally:
        api.stop()


def test_search_and_read_whole_documents_through_mcp(local_api: ServedApi) -> None:
    seen: dict[str, Any] = {}

    async def body(session: ClientSession) -> None:
        seen["tools"] = sorted(tool.name for tool in (await session.list_tools()).tools)
        guide = await session.call_tool("knowledge_search", {"query": "zephyrine valve"})
        archive = await session.call_tool("knowledge_search", {"query": "quillwort samples"})
        seen["guide_hint"] = guide.structured_content["hints"][0]
        seen["guide_pages"] = await read_every_page(session, seen["guide_hint"]["ref"], 32768)
        seen["archive_pages"] = await read_every_page(session, archive.structured_content["hints"][0]["ref"], 32768)

    # Launched as docs/host.md registers it in a host: `agent-knowledge-mcp ...`.
    run_session(local_api.base_url, DEMO_ROUTE, body, token=DEMO_TOKEN, launcher=CONSOLE_SCRIPT)

    assert seen["tools"] == ["knowledge_read", "knowledge_search"]
    hint = seen["guide_hint"]
    assert (hint["title"], hint["trust"]) == ("Zephyrine operations guide", "reference_only")

    guide_pages = seen["guide_pages"]
    assert len(guide_pages) > 1
    assert "".join(page["content"] for page in guide_pages) == GUIDE
    assert not guide_pages[-1]["truncated"] and not guide_pages[-1]["budget_exhausted"]
    assert all(page["trust"] == "reference_only" and page["revision"] == hint["revision"] for page in guide_pages)

    archive_pages = seen["archive_pages"]
    archive_served = "".join(page["content"] for page in archive_pages)
    assert archive_pages[-1]["budget_exhausted"] and archive_pages[-1]["truncated"]
    assert ARCHIVE.startswith(archive_served) and len(archive_served.encode("utf-8")) <= CHAIN_MAX_BYTES
    assert archive_pages[-1]["total_content_bytes"] == len(ARCHIVE.encode("utf-8"))


def _note_ref(hints: list[dict[str, Any]]) -> str:
    """The reference of the note's hint (hybrid search may rank a semantically close one first)."""
    return next(hint["ref"] for hint in hints if hint["title"] == "Ephemeral note")


def test_changed_and_forged_references_are_tool_errors(local_api: ServedApi) -> None:
    seen: dict[str, Any] = {}

    async def body(session: ClientSession) -> None:
        found = await session.call_tool("knowledge_search", {"query": "marmoset key"})
        ref = _note_ref(found.structured_content["hints"])
        forged = ref[:-4] + ("AAAA" if not ref.endswith("AAAA") else "BBBB")
        seen["forged"] = await session.call_tool("knowledge_read", {"ref": forged})
        # An operator edits the document: the reference's revision is gone.
        changed = NOTE.replace("east", "west")
        await anyio.to_thread.run_sync(put_documents, local_api, {"ephemeral-note.md": changed})
        seen["changed"] = await session.call_tool("knowledge_read", {"ref": ref})
        # As the error says: search again, then read the new reference.
        again = await session.call_tool("knowledge_search", {"query": "marmoset key"})
        new_ref = _note_ref(again.structured_content["hints"])
        seen["new_page"] = await session.call_tool("knowledge_read", {"ref": new_ref})

    run_session(local_api.base_url, DEMO_ROUTE, body, token=DEMO_TOKEN)

    assert seen["forged"].is_error
    assert "knowledge_read: knowledge_reference_invalid (HTTP 400)" in text_of(seen["forged"])
    assert seen["changed"].is_error
    assert "knowledge_read: knowledge_changed (HTTP 409)" in text_of(seen["changed"])
    assert "Search again" in text_of(seen["changed"])
    assert not seen["new_page"].is_error
    assert "west door" in seen["new_page"].structured_content["content"]


def test_client_negotiates_an_on_demand_turn_and_reads_its_hints(local_api: ServedApi) -> None:
    client = KnowledgeClient(local_api.base_url, DEMO_ROUTE, lambda: DEMO_TOKEN)
    ask = ("conv-e2e", "turn-1", "msg-1", "How often is the zephyrine valve checked?")

    turn = client.start_turn(*ask, knowledge_delivery="on_demand")

    assert turn.delivered == "on_demand" and turn.fallback_reason is None
    assert turn.context.knowledge == [] and turn.context.knowledge_refs == []
    assert turn.context.governance.knowledge_trust == "reference_only"
    hint = next(hint for hint in turn.hints if hint.title == "Zephyrine operations guide")
    assert hint.trust == "reference_only"
    chain = client.read_all(hint.ref, run_id=turn.run_id)
    assert chain.content == GUIDE and not chain.source_longer_than_chain
    with pytest.raises(e.ReferenceInvalid):  # the hint is bound to the run
        client.read(hint.ref)
    assert client.start_turn(*ask, knowledge_delivery="on_demand").run_id == turn.run_id  # an identical replay

    legacy = client.start_turn("conv-e2e", "turn-2", "msg-2", "How often is the zephyrine valve checked?")
    assert legacy.delivered == "legacy" and legacy.hints == []
    assert "Zephyrine operations guide" in [item.title for item in legacy.context.knowledge]
    assert all(item.trust == "reference_only" for item in legacy.context.knowledge)
    with pytest.raises(e.TurnConflict):  # the same turn id with another payload
        client.start_turn(*ask, knowledge_delivery="inline")
