"""`session issue` and `session revoke`: what the agent platform does when it approves a session."""

from __future__ import annotations

import argparse

from agent_knowledge_dev.admin import DEFAULT_SESSION_TTL, MAX_SESSION_TTL
from agent_knowledge_dev.arguments import add_ttl_argument
from agent_knowledge_dev.commands import Command
from agent_knowledge_dev.console import print_json
from agent_knowledge_dev.target import add_target_arguments, connect


def _issue_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--client", required=True, metavar="APP", help="the client app id")
    parser.add_argument("--route", dest="routes", metavar="R", nargs="+", action="extend", required=True)
    parser.add_argument("--principal-id", metavar="ID", help="omit for an anonymous session")
    parser.add_argument("--tenant")
    parser.add_argument("--role", dest="roles", metavar="R", nargs="+", action="extend", default=[])
    parser.add_argument("--audience")
    parser.add_argument("--on-behalf-of", metavar="X")
    add_ttl_argument(parser, MAX_SESSION_TTL, DEFAULT_SESSION_TTL, "7 days")
    add_target_arguments(parser)


def _issue(arguments: argparse.Namespace) -> int:
    from agent_knowledge.ingest.status import iso_utc
    from agent_knowledge.records import Principal
    from agent_knowledge_dev import admin

    repositories = connect(arguments)
    client = repositories.clients.get(arguments.client)
    if client is None:
        hint = f"register it with `agent-knowledge client put {arguments.client} --route ...`"
        raise admin.AdminError(f"unknown client {arguments.client!r}; {hint}")
    outside = [route for route in arguments.routes if route not in client.allowed_routes]
    if outside:
        raise admin.AdminError(f"client {arguments.client!r} may not use route(s) {', '.join(outside)}")
    principal = None
    if arguments.principal_id:
        principal = Principal(
            id=arguments.principal_id, tenant=arguments.tenant, roles=arguments.roles, audience=arguments.audience
        )
    elif arguments.tenant or arguments.roles or arguments.audience:
        raise admin.AdminError("--tenant, --role and --audience describe a principal: add --principal-id")
    record, token = admin.issue_session(
        repositories,
        client_app_id=arguments.client,
        routes=arguments.routes,
        principal=principal,
        on_behalf_of=arguments.on_behalf_of,
        ttl_seconds=arguments.ttl,
    )
    # ISO 8601 like every other time an agent sees (hints' expires_at); the epoch seconds beside it
    # for scripts that compute with it (it was the only form before).
    print_json(
        {
            "session_id": record.session_id,
            "access_token": token,
            "expires_at": iso_utc(record.expires_at),
            "expires_at_epoch": record.expires_at,
        }
    )
    return 0


def _revoke_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id", metavar="SESSION_ID")
    add_target_arguments(parser)


def _revoke(arguments: argparse.Namespace) -> int:
    from agent_knowledge_dev import admin

    admin.revoke_session(connect(arguments), arguments.session_id)
    print_json({"session_id": arguments.session_id, "revoked": True})
    return 0


COMMAND = Command(
    "session",
    "agent sessions",
    subcommands=[
        Command("issue", "issue a session and print its access token (shown once)", _issue_arguments, _issue),
        Command("revoke", "revoke a session", _revoke_arguments, _revoke),
    ],
)
