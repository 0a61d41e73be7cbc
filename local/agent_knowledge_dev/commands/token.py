"""`token issue`: an OAuth access token from the local test issuer of `agent-knowledge serve --oauth`
(agent_knowledge_dev.oauth_issuer), what an identity provider would hand an MCP client."""

from __future__ import annotations

import argparse

from agent_knowledge_dev.arguments import add_ttl_argument
from agent_knowledge_dev.commands import Command
from agent_knowledge_dev.console import CliError, print_json

DEFAULT_TOKEN_TTL = 3600
MAX_TOKEN_TTL = 86_400


def _issue_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--principal-id", required=True, metavar="ID", help="the token's subject (sub)")
    parser.add_argument("--role", dest="roles", metavar="R", nargs="+", action="extend", default=[])
    parser.add_argument("--tenant")
    parser.add_argument("--client", default="demo-agent", metavar="APP", help="the client app id (default: demo-agent)")
    parser.add_argument(
        "--route",
        dest="routes",
        metavar="R",
        nargs="+",
        action="extend",
        default=[],
        help="check that the client may use these routes and print their MCP URLs",
    )
    add_ttl_argument(parser, MAX_TOKEN_TTL, DEFAULT_TOKEN_TTL, "1 day")


def _issue(arguments: argparse.Namespace) -> int:
    from agent_knowledge.ingest.status import iso_utc
    from agent_knowledge_dev import admin
    from agent_knowledge_dev.localstate import running_server, state_dir
    from agent_knowledge_dev.oauth_issuer import LocalIssuer
    from agent_knowledge_dev.target import connect

    server = running_server()
    if server is None:
        raise CliError("no local stack is running: start `agent-knowledge serve --oauth` first")
    issuer_url = server.environment.get("OAUTH_ISSUER", "")
    issuer = LocalIssuer.load(state_dir(), issuer_url, server.environment.get("OAUTH_AUDIENCE", ""))
    if not issuer_url or issuer is None:
        raise CliError("the running serve has no OAuth issuer: restart it with `agent-knowledge serve --oauth`")
    client = connect(argparse.Namespace(aws=False, stack=None)).clients.get(arguments.client)
    if client is None:
        hint = f"register it with `agent-knowledge client put {arguments.client} --route ...`"
        raise admin.AdminError(f"unknown client {arguments.client!r}; {hint}")
    outside = [route for route in arguments.routes if route not in client.allowed_routes]
    if outside:
        raise admin.AdminError(f"client {arguments.client!r} may not use route(s) {', '.join(outside)}")
    token, expires_at = issuer.mint(
        arguments.principal_id, arguments.roles, arguments.tenant, arguments.client, arguments.ttl
    )
    result = {
        "access_token": token,
        "token_type": "Bearer",
        "expires_at": iso_utc(expires_at),
        "expires_at_epoch": expires_at,
        "issuer": issuer.issuer,
        "audience": issuer.audience,
    }
    if arguments.routes:
        base = server.api_url.rstrip("/")
        result["mcp_urls"] = {route: f"{base}/agent-api/v1/workspaces/{route}/mcp" for route in arguments.routes}
    print_json(result)
    return 0


COMMAND = Command(
    "token",
    "OAuth access tokens of the local test issuer (serve --oauth)",
    subcommands=[
        Command("issue", "mint an access token (JWT) for a principal and print it", _issue_arguments, _issue),
    ],
)
