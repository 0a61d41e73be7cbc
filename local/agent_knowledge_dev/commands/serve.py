"""`agent-knowledge serve`: the local HTTP API (see `agent_knowledge_dev.server`)."""

from __future__ import annotations

import argparse

from agent_knowledge_dev.commands import Command


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=3000, help="port to listen on (default: 3000)")
    parser.add_argument("--quiet", action="store_true", help="do not log one line per request on stderr")


def _run(arguments: argparse.Namespace) -> int:
    from agent_knowledge_dev.server import serve

    return serve(arguments.host, arguments.port, quiet=arguments.quiet)


COMMAND = Command(
    "serve",
    "run the HTTP API locally on moto, with the demo workspace, until Ctrl-C",
    add_arguments=_arguments,
    run=_run,
)
