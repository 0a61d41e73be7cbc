"""Drive our MCP server process with the `mcp` SDK's own stdio client."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from agent_knowledge_host.mcp_server import TOKEN_ENV

Session = Callable[[ClientSession], Awaitable[None]]
SERVER_MODULE = [sys.executable, "-m", "agent_knowledge_host.mcp_server"]
# The console script docs/host.md registers in MCP hosts, next to this interpreter.
CONSOLE_SCRIPT = [str(Path(sys.executable).parent / "agent-knowledge-mcp")]


def run_session(
    base_url: str,
    route: str,
    body: Session,
    token: str,
    launcher: list[str] = SERVER_MODULE,
    extra_arguments: list[str] | None = None,
) -> str:
    """Start the server over stdio, initialize, run `body`; return what the server wrote to stderr."""
    command, *arguments = launcher
    parameters = StdioServerParameters(
        command=command,
        args=[*arguments, "--base-url", base_url, "--route", route, *(extra_arguments or [])],
        env={TOKEN_ENV: token},
    )

    async def main() -> None:
        async with stdio_client(parameters, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await body(session)

    with tempfile.TemporaryFile("w+") as errlog:
        anyio.run(main)
        errlog.seek(0)
        return errlog.read()


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def read_every_page(session: ClientSession, ref: str, max_bytes: int) -> list[dict[str, Any]]:
    """`knowledge_read` page after page, following `next_cursor`; every page must succeed."""
    pages: list[dict[str, Any]] = []
    cursor = None
    while True:
        arguments = {"ref": ref, "max_bytes": max_bytes} | ({"cursor": cursor} if cursor else {})
        page = await session.call_tool("knowledge_read", arguments)
        assert not page.is_error, text_of(page)
        pages.append(page.structured_content)
        cursor = page.structured_content["next_cursor"]
        if cursor is None:
            return pages
