"""A stdio MCP server with two tools, `knowledge_search` and `knowledge_read`.

Built on `MCPServer` from the official `mcp` SDK (FastMCP's name since mcp 2). The bearer is
read from the environment (`AGENT_KNOWLEDGE_TOKEN`) on every call and is never a tool
argument, so a model can neither see nor choose it. Results are the client's pydantic models
(structured content) with their provenance; failures — protocol errors and arguments the tool
schema refuses alike — are tool errors whose text starts with the error code and says what to do.
The server instructions and tool descriptions name the route (and, with `--about`, what its
knowledge covers) so a model knows when to call them; only tools are advertised. Names,
descriptions, parameters and error texts are `agent_knowledge.mcp.tool_catalog`'s, shared with the
stack's own MCP endpoint (`POST .../workspaces/{route}/mcp`, docs/host.md).

Run: `agent-knowledge-mcp --base-url URL --route ROUTE` (or `python -m agent_knowledge_host.mcp_server`).
"""

from __future__ import annotations

import argparse
import functools
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agent_knowledge.mcp.tool_catalog import (
    READ,
    READ_ONLY_ANNOTATIONS,
    SEARCH,
    SERVER_NAME,
    ToolSpec,
    invalid_arguments_message,
    server_instructions,
    server_version,
    tool_error_text,
)
from agent_knowledge_host.client import KnowledgeClient
from agent_knowledge_host.errors import InvalidArguments, KnowledgeHostError, MissingToken
from agent_knowledge_host.models import ReadPage, SearchResult
from agent_knowledge_host.transport import DEFAULT_TIMEOUT_SECONDS

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

TOKEN_ENV = "AGENT_KNOWLEDGE_TOKEN"
# What the SDK serves by default but this server has none of: not advertised, not answered.
UNSERVED_METHODS = ("prompts/list", "prompts/get", "resources/list", "resources/read", "resources/templates/list")

DESCRIPTION = f"Serve knowledge_search and knowledge_read over MCP stdio; the bearer is read from {TOKEN_ENV}."


def package_version() -> str:
    return server_version()


def invalid_arguments(error: ValidationError) -> InvalidArguments:
    """The schema's refusal as protocol-style text: field and rule, never the rejected value."""
    return InvalidArguments(invalid_arguments_message(error))


@functools.cache
def _server_class() -> type[MCPServer]:
    # Imported here: the SDK takes seconds to import, and the `agent-knowledge` CLI builds this
    # command's parser on every run.
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError

    class KnowledgeMCPServer(MCPServer):
        """`MCPServer` with two changes: only tools are advertised and served, and arguments the
        tool schema refuses are reported like protocol errors instead of as a validation dump."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # The SDK registers prompt and resource handlers unconditionally and derives the
            # advertised capabilities from them; it has no public way to leave them out.
            handlers = self._lowlevel_server._request_handlers
            for method in UNSERVED_METHODS:
                handlers.pop(method, None)

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            try:
                return await super().call_tool(name, arguments, context)
            except UnexpectedToolError:
                raise
            except ToolError as error:
                if isinstance(error.__cause__, ValidationError):
                    text = invalid_arguments(error.__cause__).describe()
                    raise ToolError(tool_error_text(name, text)) from error.__cause__
                raise

    return KnowledgeMCPServer


def build_server(client: KnowledgeClient, about: str | None = None) -> MCPServer:
    """The two tools of `agent_knowledge.mcp.tool_catalog` over `client`: each tool function takes
    the catalog's parameters (its `__signature__`), so the SDK advertises the catalog's schema."""
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    server = _server_class()(
        name=SERVER_NAME, instructions=server_instructions(client.route, about), version=package_version()
    )
    annotations = ToolAnnotations.model_validate(READ_ONLY_ANNOTATIONS)

    def knowledge_search(**arguments: Any) -> SearchResult:
        try:
            return client.search(**arguments)
        except KnowledgeHostError as error:
            raise ToolError(error.describe()) from None

    def knowledge_read(**arguments: Any) -> ReadPage:
        try:
            return client.read(**arguments)
        except KnowledgeHostError as error:
            raise ToolError(error.describe()) from None

    for spec, function in ((SEARCH, _taking(SEARCH, knowledge_search)), (READ, _taking(READ, knowledge_read))):
        server.add_tool(
            function, name=spec.name, description=spec.description(client.route, about), annotations=annotations
        )
    return server


def _taking(spec: ToolSpec, function: Callable[..., Any]) -> Callable[..., Any]:
    """`function`, presenting the spec's parameters (and its own return type) as its signature."""
    returns = inspect.signature(function, eval_str=True).return_annotation
    function.__signature__ = spec.signature(returns)  # type: ignore[attr-defined]
    return function


def token_from_environment() -> str:
    return os.environ.get(TOKEN_ENV, "")


def required_token() -> str:
    """The bearer for one call; without it the call fails with a tool error that names the variable
    (the server itself keeps running: a host that sees the process exit can only say "Connection
    closed", and the model never learns why)."""
    token = token_from_environment()
    if not token:
        raise MissingToken(f"{TOKEN_ENV} is not set in the MCP server's environment")
    return token


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The server's options, shared by `main` and the `agent-knowledge mcp` subcommand."""
    parser.add_argument("--base-url", required=True, help="the API's base URL, e.g. http://127.0.0.1:3000")
    parser.add_argument("--route", required=True, help="the workspace route")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS, help="HTTP timeout in seconds")
    parser.add_argument(
        "--about",
        metavar="TEXT",
        help="what the route's knowledge covers, e.g. 'the team handbook: leave, expenses'; "
        "added to the server instructions and the search tool's description so a model knows when to search",
    )


def run(arguments: argparse.Namespace) -> int:
    """Serve over stdio until the host closes the connection; 2 when the base URL is unusable.
    Without a token it still serves (every tool call then fails, naming `TOKEN_ENV`), and says so
    on stderr, which MCP hosts show in their server log."""
    if not token_from_environment():
        print(
            f"agent-knowledge-mcp: {TOKEN_ENV} is not set: every tool call will fail until the server is "
            "started with it (the agent session's bearer token)",
            file=sys.stderr,
        )
    try:
        client = KnowledgeClient(arguments.base_url, arguments.route, required_token, timeout=arguments.timeout)
    except ValueError as error:
        print(f"agent-knowledge-mcp: {error}", file=sys.stderr)
        return 2
    build_server(client, arguments.about).run("stdio")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agent-knowledge-mcp", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"agent-knowledge-mcp {package_version()}")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
