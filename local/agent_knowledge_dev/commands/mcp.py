"""`agent-knowledge mcp`: the stdio MCP server of the host package (`agent_knowledge_host.mcp_server`).

Registered in `agent_knowledge_dev.cli.COMMANDS` and documented in the README; the same server is
also the console script `agent-knowledge-mcp` (docs/host.md).
"""

from __future__ import annotations

import argparse

from agent_knowledge_dev.commands import Command


def _arguments(parser: argparse.ArgumentParser) -> None:
    from agent_knowledge_host.mcp_server import add_arguments

    add_arguments(parser)


def _run(arguments: argparse.Namespace) -> int:
    from agent_knowledge_host.mcp_server import run

    return run(arguments)


COMMAND = Command(
    "mcp",
    "serve knowledge_search and knowledge_read over MCP stdio (bearer from AGENT_KNOWLEDGE_TOKEN)",
    add_arguments=_arguments,
    run=_run,
)
