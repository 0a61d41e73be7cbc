"""`client put`, `route put`, `kb create|enable|disable`: the workspace configuration."""

from __future__ import annotations

import argparse
from typing import Any

from agent_knowledge_dev.arguments import json_option
from agent_knowledge_dev.commands import Command, documents
from agent_knowledge_dev.console import note, print_json
from agent_knowledge_dev.target import add_target_arguments, connect

AUDIENCE_EXAMPLE = '{"tenants": ["acme"], "roles": ["analyst"]}'


def _client_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("client_app_id", metavar="APP_ID")
    parser.add_argument(
        "--route", dest="routes", metavar="R", nargs="+", action="extend", required=True, help="routes it may use"
    )
    parser.add_argument("--disabled", action="store_true", help="register it disabled (every call then answers 404)")
    add_target_arguments(parser)


def _client_put(arguments: argparse.Namespace) -> int:
    from agent_knowledge_dev import admin

    admin.check_identifier("client id", arguments.client_app_id)
    for route in arguments.routes:
        admin.check_identifier("route", route)
    repositories = connect(arguments)
    for route in dict.fromkeys(arguments.routes):
        admin.require_route(repositories, route)
    record = admin.put_client(repositories, arguments.client_app_id, arguments.routes, enabled=not arguments.disabled)
    print_json(record.model_dump(mode="json"))
    return 0


def _route_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("route", metavar="ROUTE")
    parser.add_argument("--kb", dest="kbs", metavar="KB", nargs="+", action="extend", default=[], help="sources")
    parser.add_argument("--top-k", type=int, help="chunks retrieved per search (1-100, default 10)")
    parser.add_argument("--min-score", type=float, help="drop hits scoring below this ranking number (default 0)")
    parser.add_argument("--max-docs", type=int, help="distinct documents per search (1-10, default 3)")
    parser.add_argument("--disable-knowledge", action="store_true", help="keep the sources but turn knowledge off")
    parser.add_argument(
        "--audience",
        metavar="JSON",
        help=f"audience policy, e.g. '{AUDIENCE_EXAMPLE}' (default: everyone)",
    )
    parser.add_argument("--instructions", help="route instructions (default: keep the current ones)")
    add_target_arguments(parser)


def _audience(text: str | None) -> Any:
    from agent_knowledge.records import AudiencePolicy

    if text is None:
        return None
    return json_option("--audience", text, AudiencePolicy, "audience policy", AUDIENCE_EXAMPLE)


def _route_put(arguments: argparse.Namespace) -> int:
    from agent_knowledge.records import KnowledgeConfig, SourceConfig
    from agent_knowledge_dev import admin

    admin.check_identifier("route", arguments.route)
    audience = _audience(arguments.audience)
    repositories = connect(arguments)
    for kb_id in arguments.kbs:
        admin.require_knowledge_base(repositories, kb_id)
    settings = {
        name: value
        for name, value in {
            "top_k": arguments.top_k,
            "min_score": arguments.min_score,
            "max_docs": arguments.max_docs,
        }.items()
        if value is not None
    }
    knowledge = KnowledgeConfig(
        enabled=not arguments.disable_knowledge,
        sources=[SourceConfig(kb_id=kb_id) for kb_id in dict.fromkeys(arguments.kbs)],
        **settings,
    )
    current = repositories.routes.get(arguments.route)
    instructions = arguments.instructions
    if instructions is None:
        instructions = current.instructions if current else ""
    record = admin.put_route(repositories, arguments.route, knowledge, audience=audience, instructions=instructions)
    if not arguments.kbs and not arguments.disable_knowledge:
        note("note: the route has no knowledge base, so knowledge stays off until you add one with --kb")
    print_json(record.model_dump(mode="json"))
    return 0


def _kb_create_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kb_id", metavar="KB_ID")
    parser.add_argument("--name", default="", help="display name (default: the id)")
    _default_access_argument(parser, "--default-access", default="route")
    add_target_arguments(parser)


def _default_access_argument(parser: argparse.ArgumentParser, name: str, default: str | None = None) -> None:
    options: dict[str, Any] = {"default": default} if default else {}
    parser.add_argument(
        name,
        choices=("route", "none"),
        help="who sees a document without an access sidecar: every session of the route (route, "
        "the default) or nobody (none)",
        **options,
    )


def _kb_create(arguments: argparse.Namespace) -> int:
    from agent_knowledge_dev import admin

    admin.check_identifier("knowledge base id", arguments.kb_id)
    repositories = connect(arguments)
    if repositories.knowledge_bases.get(arguments.kb_id) is not None:
        note(f"knowledge base {arguments.kb_id!r} already exists; left as it is")
    record = admin.create_knowledge_base(
        repositories, arguments.kb_id, name=arguments.name, default_access=arguments.default_access
    )
    if record.default_access != arguments.default_access:
        note(f"its default access stays {record.default_access!r}; change it with `kb default-access`")
    print_json(record.model_dump(mode="json"))
    return 0


def _kb_default_access_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kb_id", metavar="KB_ID")
    _default_access_argument(parser, "default_access")
    add_target_arguments(parser)


def _kb_default_access(arguments: argparse.Namespace) -> int:
    from agent_knowledge_dev import admin

    record = admin.set_knowledge_base_default_access(connect(arguments), arguments.kb_id, arguments.default_access)
    print_json(record.model_dump(mode="json"))
    return 0


def _kb_id_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kb_id", metavar="KB_ID")
    add_target_arguments(parser)


def _kb_setter(enabled: bool) -> Any:
    def run(arguments: argparse.Namespace) -> int:
        from agent_knowledge_dev import admin

        record = admin.set_knowledge_base_enabled(connect(arguments), arguments.kb_id, enabled)
        print_json(record.model_dump(mode="json"))
        return 0

    return run


COMMANDS = [
    Command(
        "client",
        "agent clients",
        subcommands=[
            Command("put", "create or replace a client and its allowed routes", _client_arguments, _client_put)
        ],
    ),
    Command(
        "route",
        "workspace routes",
        subcommands=[
            Command("put", "create or replace a route and its knowledge configuration", _route_arguments, _route_put)
        ],
    ),
    Command(
        "kb",
        "knowledge bases",
        subcommands=[
            Command("create", "create a knowledge base (no-op if it exists)", _kb_create_arguments, _kb_create),
            Command("enable", "enable a knowledge base", _kb_id_arguments, _kb_setter(True)),
            Command("disable", "disable a knowledge base (no route can use it)", _kb_id_arguments, _kb_setter(False)),
            Command(
                "default-access",
                "who sees documents without an access sidecar: route or none",
                _kb_default_access_arguments,
                _kb_default_access,
            ),
            *documents.KB_COMMANDS,  # list, status, reindex, sync
        ],
    ),
]
